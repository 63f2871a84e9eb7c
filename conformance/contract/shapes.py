"""The input shapes of the spec-merge laws (chapters ROLE to GROUP).

A :class:`~kvcontract.conformance.contract.model.Shape` is the set of examples a law
judges: a hypothesis strategy over the engine's domain and a systematic enumerator
of the contract's finite structure (built from
:mod:`kvcontract.conformance.contract.systematic`). Laws that judge the same inputs
share a shape; the symbolic search's probes name the shapes of the examples they
build. The dispatch shapes live with their laws
(:mod:`kvcontract.conformance.contract.laws.dispatch`): their examples are routing
requests, not specs.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterator
from typing import Any

from hypothesis import strategies as st

from kvcontract.conformance.contract import strategies as strat
from kvcontract.conformance.contract import systematic as sysm
from kvcontract.conformance.contract.model import Example, Shape
from kvcontract.conformance.contract.values import rebuilt
from kvcontract.reference import is_advisory

# -- strategies and systematic enumerators per example shape -------------------------


def _one_spec(domain: strat.Domain) -> Any:
    return strat.specs(domain=domain).map(lambda s: Example(specs=(s,)))


def _sys_one_spec(domain: strat.Domain) -> Iterator[Example]:
    for spec in sysm.single_specs(domain):
        yield Example(specs=(spec,))


def _compatible(domain: strat.Domain, min_size: int = 2) -> Any:
    return strat.compatible_specs(min_size=min_size, domain=domain).map(lambda ss: Example(specs=tuple(ss)))


def _sys_compatible(domain: strat.Domain) -> Iterator[Example]:
    """Flag patterns, every single spec merged with itself, and every single spec with a string
    set merged with its equal whose values are other objects (an engine comparing with ``is``)."""
    for specs in sysm.flag_patterns(domain):
        yield Example(specs=tuple(specs))
    for spec in sysm.single_specs(domain):
        yield Example(specs=(spec, spec))
    for spec in sysm.single_specs(domain):
        if any(isinstance(v, str) and not isinstance(v, enum.Enum) for v in vars(spec).values()):
            yield Example(specs=(spec, rebuilt(spec)), rebuilt=True)


def _sys_advisory(domain: strat.Domain) -> Iterator[Example]:
    """Single specs and compatible lists (advisory fields kept by their rule), and every near
    miss on an advisory field that its role says must agree (merge rejects it all the same)."""
    yield from _sys_one_spec(domain)
    yield from _sys_compatible(domain)
    for specs, name in sysm.near_misses(domain):
        if any(f.name == name and is_advisory(f) for f in dataclasses.fields(specs[0])):
            yield Example(specs=tuple(specs), field=name)


def _permuted(domain: strat.Domain) -> Any:
    return strat.compatible_specs(min_size=2, domain=domain).flatmap(
        lambda ss: st.permutations(range(len(ss))).map(
            lambda p: Example(specs=tuple(ss), order=tuple(p))))


def _sys_permuted(domain: strat.Domain) -> Iterator[Example]:
    for ex in _sys_compatible(domain):
        yield dataclasses.replace(ex, order=tuple(reversed(range(len(ex.specs)))))


def _split(domain: strat.Domain) -> Any:
    return strat.compatible_specs(min_size=2, max_size=5, domain=domain).flatmap(
        lambda ss: st.integers(1, len(ss) - 1).map(lambda c: Example(specs=tuple(ss), cut=c)))


def _sys_split(domain: strat.Domain) -> Iterator[Example]:
    """Flag patterns cut at each point, and every single spec merged with itself, cut once
    (a merge that loses a field of the first member fails to merge with the second)."""
    for specs in sysm.flag_patterns(domain):
        for cut in range(1, len(specs)):
            yield Example(specs=tuple(specs), cut=cut)
    for spec in sysm.single_specs(domain):
        yield Example(specs=(spec, spec), cut=1)


def _near_miss(domain: strat.Domain) -> Any:
    return strat.near_misses(domain=domain).map(lambda case: Example(specs=tuple(case[0]), field=case[1]))


def _sys_near_miss(domain: strat.Domain) -> Iterator[Example]:
    for specs, name in sysm.near_misses(domain):
        yield Example(specs=tuple(specs), field=name)
    for specs, name in sysm.near_misses_beside_flags(domain):
        yield Example(specs=tuple(specs), field=name)
    for specs, name in sysm.page_equal_near_misses(domain):
        yield Example(specs=tuple(specs), field=name)


def _mixed_kinds(domain: strat.Domain) -> Any:
    if len(domain.kinds) < 2:  # an early release with one kind: no two kinds to draw
        return st.nothing()
    independent = st.tuples(strat.specs(domain=domain), strat.specs(domain=domain)).filter(
        lambda ab: type(ab[0]) is not type(ab[1]))
    return st.one_of(strat.mixed_kind_pairs(domain), independent).map(lambda ab: Example(specs=tuple(ab)))


def _sys_mixed_kinds(domain: strat.Domain) -> Iterator[Example]:
    for a, b in sysm.kind_pairs(domain):
        yield Example(specs=(a, b))
    for a, b in sysm.annotated_kind_pairs(domain):
        yield Example(specs=(a, b))


def _table(domain: strat.Domain) -> Any:
    return strat.layer_tables(domain=strat.grouping_domain(domain)).map(lambda t: Example(table=tuple(t.items())))


def _sys_table(domain: strat.Domain) -> Iterator[Example]:
    for table in sysm.grouping_tables(strat.grouping_domain(domain)):
        yield Example(table=tuple(table.items()))


def _uniform_table(domain: strat.Domain) -> Any:
    return strat.compatible_specs(min_size=1, max_size=5, domain=strat.grouping_domain(domain)).map(
        lambda ss: Example(table=tuple((f"layers.{i}", s) for i, s in enumerate(ss))))


def _sys_uniform_table(domain: strat.Domain) -> Iterator[Example]:
    for table in sysm.uniform_tables(strat.grouping_domain(domain)):
        yield Example(table=tuple(table.items()))


def _uniform_cases(domain: strat.Domain) -> Any:
    return st.one_of(_near_miss(domain), _compatible(domain, 1), _mixed_kinds(domain))


def _sys_uniform_cases(domain: strat.Domain) -> Iterator[Example]:
    yield from _sys_near_miss(domain)
    yield from _sys_compatible(domain)
    yield from _sys_mixed_kinds(domain)


def _incompatible(domain: strat.Domain) -> Any:
    return st.one_of(_near_miss(domain), _mixed_kinds(domain))


def _sys_incompatible(domain: strat.Domain) -> Iterator[Example]:
    yield from _sys_near_miss(domain)
    yield from _sys_mixed_kinds(domain)


def _nothing(_domain: strat.Domain) -> Any:
    return st.just(Example())


def _sys_nothing(_domain: strat.Domain) -> Iterator[Example]:
    yield Example()


ONE_SPEC = Shape("one-spec", _one_spec, _sys_one_spec)
COMPATIBLE = Shape("compatible", _compatible, _sys_compatible)
ADVISORY = Shape("advisory", _compatible, _sys_advisory)
PERMUTED = Shape("permuted", _permuted, _sys_permuted)
SPLIT = Shape("split", _split, _sys_split)
NEAR_MISS = Shape("near-miss", _near_miss, _sys_near_miss)
MIXED_KINDS = Shape("mixed-kinds", _mixed_kinds, _sys_mixed_kinds)
TABLE = Shape("table", _table, _sys_table)
UNIFORM_TABLE = Shape("uniform-table", _uniform_table, _sys_uniform_table)
UNIFORM_CASES = Shape("uniform-cases", _uniform_cases, _sys_uniform_cases)
INCOMPATIBLE = Shape("incompatible", _incompatible, _sys_incompatible)
NOTHING = Shape("nothing", _nothing, _sys_nothing)
