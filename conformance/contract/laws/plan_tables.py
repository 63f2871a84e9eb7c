"""The PLAN laws' input shape: layer tables as grouping draws them, hidden-state layers
included, enumerated once per domain (:data:`PLAN_TABLE` of
:mod:`kvcontract.conformance.contract.laws.plan` is built from them)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from hypothesis import strategies as st

from kvcontract import reference
from kvcontract.conformance.contract import strategies as strat
from kvcontract.conformance.contract import systematic as sysm
from kvcontract.conformance.contract.model import Example

_PLAN_EXCLUDED = frozenset(strat.UNGROUPED_KINDS) - {"HiddenStateCacheSpec"}


def plan_domain(domain: strat.Domain) -> strat.Domain:
    """``domain`` with the kinds planning tables hold: grouping's, plus hidden-state layers."""
    return dataclasses.replace(domain, kinds=tuple(k for k in domain.kinds if k.__name__ not in _PLAN_EXCLUDED))


def plan_table(domain: strat.Domain) -> Any:
    """The random phase re-draws the enumerated tables: a planner's answers to random tables of
    several kinds raise a different exception per kind combination (under python -O above all),
    so random tables would make the findings depend on the seed; the enumeration covers each
    kind pair, sharding and hidden-state combination instead."""
    return st.sampled_from(_plan_tables(domain))


_TABLES: dict[strat.Domain, tuple[Example, ...]] = {}


def _plan_tables(domain: strat.Domain) -> tuple[Example, ...]:
    """The enumerated tables, once per domain: the systematic and the random phase judge the
    same objects (whose plans, keys and facts are remembered by identity)."""
    if domain not in _TABLES:
        if len(_TABLES) >= 4:
            _TABLES.clear()
        _TABLES[domain] = tuple(_enumerate_plan_tables(domain))
    return _TABLES[domain]


def sys_plan_table(domain: strat.Domain) -> Iterator[Example]:
    return iter(_plan_tables(domain))


def _enumerate_plan_tables(domain: strat.Domain) -> Iterator[Example]:
    seen: set[str] = set()
    for table in sysm.tables(plan_domain(domain)):
        key = repr(table)
        if key not in seen:
            seen.add(key)
            yield Example(table=tuple(table.items()))
    grouped = strat.grouping_domain(domain)
    for table in sysm.grouping_tables(grouped):
        key = repr(table)
        if key not in seen:
            seen.add(key)
            yield Example(table=tuple(table.items()))
    hidden = sysm.base_spec(reference.HiddenStateCacheSpec, domain) \
        if reference.HiddenStateCacheSpec in domain.kinds else None
    if hidden is not None:  # a hidden-state layer beside tables of several groups (PLAN-HIDDEN-1)
        for table in sysm.tables(grouped):
            if len({type(s) for s in table.values()}) > 1:
                yield Example(table=(*table.items(), ("layers.hidden", hidden)))
        for spec in sysm.single_specs(dataclasses.replace(domain, kinds=(reference.HiddenStateCacheSpec,))):
            if spec != hidden:  # hidden-state layers only, of two types or pages
                yield Example(table=(("cache_only_layers.0", hidden), ("cache_only_layers.1", spec)))
    yield from _sharding_tables(plan_domain(domain))
    yield from _split_tables(grouped)


def _split_tables(domain: strat.Domain) -> Iterator[Example]:
    """Every pair of kinds as two layers of the first beside four of the second (vLLM's own
    planning test's "2 full + 4 sliding"): the second kind's layers are split into two groups
    of two, which layers go together being the planner's choice (PLAN-MATCH-1)."""
    bases = [b for b in (sysm.base_spec(k, domain) for k in domain.kinds) if b is not None]
    for first in bases:
        for second in bases:
            if type(first) is not type(second):
                yield Example(table=(("layers.0", first), ("layers.1", first),
                                     *((f"layers.{i}", second) for i in range(2, 6))))


def _sharding_tables(domain: strat.Domain) -> Iterator[Example]:
    """Every pair of kinds with the second layer's DCP sharding flipped: two shardings, which
    the hybrid-off planner promotes apart (PLAN-HYBRID-1)."""
    bases = [b for b in (sysm.base_spec(k, domain) for k in domain.kinds) if b is not None]
    for first in bases:
        for second in bases:
            if not domain.allows(type(second), "dcp_sharded", not second.dcp_sharded):
                continue
            try:
                flipped = dataclasses.replace(second, dcp_sharded=not second.dcp_sharded)
            except reference.InvalidSpec:
                continue
            yield Example(table=(("layers.0", first), ("layers.1", flipped), ("layers.2", first)))


# -- the settings a table is planned with --------------------------------------------------------


def own_hybrid(ex: Example) -> bool:
    """The hybrid-manager setting a table is planned with by default: the one the engine picks for a
    corpus table (its recorded decision), on for the contract's own tables."""
    if ex.model:
        from kvcontract.conformance.contract.corpus import current_corpus

        corpus = current_corpus()
        table = corpus.by_name().get(ex.model) if corpus is not None else None
        if table is not None:
            return table.settings.hybrid
    return True


def match_settings(ex: Example, block_outermost_ok: bool) -> list[tuple[bool, bool]]:
    """``(hybrid, block_outermost)`` settings PLAN-MATCH-1 plans ``ex`` in: a corpus table in the layout
    the engine resolved for it, with its own hybrid-manager decision and the hybrid manager off (the
    option a user has); a table of the contract's own with the hybrid manager on and off, layer-outermost,
    and block-outermost too where that can change the plan — three layers or more whose pages differ
    (blocks then pack layers of different pages; two layers are the GROUP laws' near misses)."""
    if ex.model:
        from kvcontract.conformance.contract.corpus import current_corpus

        corpus = current_corpus()
        table = corpus.by_name().get(ex.model) if corpus is not None else None
        if table is not None:
            layout = table.settings.block_outermost and block_outermost_ok
            return list(dict.fromkeys([(table.settings.hybrid, layout), (False, layout)]))
    packs = block_outermost_ok and len(ex.table) >= 3 and len({s.page_size_bytes for _, s in ex.table}) > 1
    return [(hybrid, layout) for hybrid in (True, False) for layout in ((False, True) if packs else (False,))]
