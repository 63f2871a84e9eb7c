"""The catalogue of structured repros, its planning part (chapter PLAN): what an oracle of
:mod:`kvcontract.conformance.contract.laws.plan` expects of the engine's plan of ``table``
within a memory budget, rendered as the snippet's check lines (the snippet's ``_plan`` and
``_plan_view``, :mod:`kvcontract.conformance.contract.repro`). The rest of the catalogue is
:mod:`kvcontract.conformance.contract.expectations`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kvcontract.conformance.contract.repro import Context, Expectation, esc, indent

FULL_KINDS = ("FullAttentionSpec", "MLAAttentionSpec", "RSWASpec", "SinkFullAttentionSpec", "HiddenStateCacheSpec")
LOCAL_KINDS = ("SlidingWindowSpec", "SlidingWindowMLASpec", "ChunkedLocalAttentionSpec")


def plan_setup(memory: int, hybrid: bool, block_outermost: bool = False) -> list[str]:
    """Snippet lines planning ``table`` within ``memory`` bytes: ``num_blocks``, ``tensors``
    (``[(layer_names, size, offset, layer_stride, block_stride), ...]``), ``pairs`` and
    ``_layer_spec(name)``, the spec a layer is allocated with."""
    return [f"plan = _plan(table, {memory!r}, {hybrid!r}{', True' * block_outermost})",
            "num_blocks, tensors, pairs = _plan_view(plan)",
            "def _layer_spec(name):", "    for names, spec in pairs:", "        if name in names:",
            "            members = getattr(spec, 'kv_cache_specs', None)",
            "            return members[name] if members else spec"]


@dataclasses.dataclass(frozen=True)
class _Planned(Expectation):
    """An expectation over the engine's plan of ``table`` within ``memory`` bytes."""

    memory: int

    @property
    def uses_table(self) -> bool:
        return True

    hybrid = True

    def lines(self, ctx: Context) -> list[str]:
        return [*plan_setup(self.memory, self.hybrid), *self.body(ctx), "print('no violation')"]

    def body(self, ctx: Context) -> list[str]:
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class PlanRaised(Expectation):
    """Planning ``table`` within ``memory`` bytes must answer."""

    memory: int
    hybrid: bool = True
    block_outermost: bool = False

    @property
    def uses_table(self) -> bool:
        return True

    def lines(self, ctx: Context) -> list[str]:
        call = f"_plan(table, {self.memory!r}, {self.hybrid!r}{', True' * self.block_outermost})"
        return ["try:", f"    plan = {call}", "except Exception as exc:",
                "    " + ctx.fail("f'planning raised {type(exc).__name__}: {exc}'"), "print('no violation')"]


@dataclasses.dataclass(frozen=True)
class TypeOfMembers(_Planned):
    """The two layers of ``pair`` differ in type and must not share a per-member group."""

    pair: tuple[str, str] = ("", "")

    def body(self, ctx: Context) -> list[str]:
        return [f"a, b = {self.pair!r}", "for names, spec in pairs:",
                "    members = getattr(spec, 'kv_cache_specs', None) or {}",
                "    if a in members and b in members:",
                "        " + ctx.fail("f'{a} ({type(members[a]).__name__}, block_size {members[a].block_size}) and "
                                     "{b} ({type(members[b]).__name__}, block_size {members[b].block_size}) share "
                                     "a per-member group'")]


@dataclasses.dataclass(frozen=True)
class HiddenStateGroup(_Planned):
    """With several groups, the hidden-state layer ``layer`` is alone in a hidden-state group."""

    layer: str = ""

    def body(self, ctx: Context) -> list[str]:
        return ["if len(pairs) > 1:",
                f"    names, spec = next((n, s) for n, s in pairs if {self.layer!r} in n)",
                "    kinds = sorted({type(table[n]).__name__ for n in names})",
                "    if hasattr(spec, 'kv_cache_specs') or type(spec).__name__ != 'HiddenStateCacheSpec' "
                "or kinds != ['HiddenStateCacheSpec']:",
                "        " + ctx.fail(f"f'{esc(self.layer)} is in a group of {{kinds}} ({{type(spec).__name__}}) "
                                     "among {len(pairs)} groups'")]


@dataclasses.dataclass(frozen=True)
class HybridPlan(Expectation):
    """With the hybrid manager off: at most ``parts`` groups and no local allocation beside full
    attention of the same DCP sharding; with ``refuse``, a refusal or at most ``parts`` groups."""

    memory: int
    parts: int
    refuse: bool = False

    @property
    def uses_table(self) -> bool:
        return True

    def lines(self, ctx: Context) -> list[str]:
        plan = plan_setup(self.memory, False)
        if self.refuse:
            head = ["try:", *indent(plan), "except Exception as exc:",
                    "    print('no violation: refused with', type(exc).__name__, exc)", "    raise SystemExit(0)"]
        else:
            head = plan
        return [*head, "counted = [names for names, _ in pairs  # a hidden-state layer may have a group of its own",
                "           if not all(type(table[n]).__name__ == 'HiddenStateCacheSpec' for n in names)]",
                f"if len(counted) > {self.parts}:",
                "    " + ctx.fail(f"f'{{len(counted)}} groups with the hybrid manager off (at most {self.parts})'"),
                "def _part(s):  # DCP sharding: replicated attention layers, and the others",
                "    return hasattr(s, 'num_kv_heads') and not s.dcp_sharded",
                f"with_full = {{_part(s) for s in table.values() if type(s).__name__ in {FULL_KINDS!r}}}",
                f"kept = [n for n in table if _part(table[n]) in with_full and type(_layer_spec(n)).__name__ in "
                f"{LOCAL_KINDS!r}]",
                "if kept:", "    " + ctx.fail("f'{kept} keep local-attention allocation beside full attention'"),
                "print('no violation')"]


@dataclasses.dataclass(frozen=True)
class PlanBacked(_Planned):
    """One backing allocation within the budget, holding ``num_blocks`` pages of every layer."""

    def body(self, ctx: Context) -> list[str]:
        return ["sizes = sorted({t[1] for t in tensors})",
                "if len(sizes) > 1:", "    " + ctx.fail("f'tensor sizes {sizes}'"),
                f"if sizes and sizes[0] > {self.memory!r}:",
                "    " + ctx.fail(f"f'{{sizes[0]}} bytes allocated, budget {self.memory}'"),
                "for names, size, offset, layer_stride, block_stride in tensors:",
                "    if None in (offset, layer_stride, block_stride) or not num_blocks or not names:",
                "        continue",
                f"    page = max({ctx.page('_layer_spec(n)')} for n in names)",
                "    end = offset + (len(names) - 1) * layer_stride + (num_blocks - 1) * block_stride + page",
                "    if end > size:",
                "        " + ctx.fail("f'{list(names)} need {end} bytes for {num_blocks} blocks; tensor has {size}'")]


@dataclasses.dataclass(frozen=True)
class PlanUsed(_Planned):
    """Less than one block's bytes of the budget left unused by what the tensors address."""

    def body(self, ctx: Context) -> list[str]:
        return ["ends = [0]", "for names, size, offset, layer_stride, block_stride in tensors:",
                "    if None in (offset, layer_stride, block_stride) or not names or not num_blocks:",
                "        ends.append(size if num_blocks else 0)", "        continue",
                f"    page = max({ctx.page('_layer_spec(n)')} for n in names)",
                "    slot = block_stride if page <= block_stride <= layer_stride else page  # a padded stride",
                "    ends.append(offset + (len(names) - 1) * layer_stride + (num_blocks - 1) * block_stride + slot)",
                "used = max(ends)",
                "if tensors and num_blocks:", "    per_block = used // num_blocks",
                f"    if {self.memory!r} - used >= per_block:",
                "        " + ctx.fail(f"f'{{num_blocks}} blocks of {{per_block}} bytes address {{used}} bytes, "
                                     f"leaving {{{self.memory!r} - used}} of {self.memory} unused'"),
                "elif tensors:", "    " + ctx.fail(f"'no block planned within {self.memory} bytes'")]


@dataclasses.dataclass(frozen=True)
class PlanTensors(_Planned):
    """Every layer in exactly one tensor; a tensor's layers of one group and one page size."""

    def body(self, ctx: Context) -> list[str]:
        return ["held = {n: sum(n in t[0] for t in tensors) for n in table}",
                "wrong = {n: c for n, c in held.items() if c != 1}",
                "if wrong:", "    " + ctx.fail("f'layers held by that many tensors: {wrong}'"),
                "group_of = {n: i for i, (names, _) in enumerate(pairs) for n in names}",
                "for t in tensors:",
                f"    pages = sorted({{{ctx.page('_layer_spec(n)')} for n in t[0]}})",
                "    groups = {group_of.get(n) for n in t[0]}",
                "    if len(pages) > 1 or len(groups) > 1:",
                "        " + ctx.fail("f'tensor of {list(t[0])} spans groups {groups} and pages {pages}'")]


# -- PLAN-MATCH-1: one thing of the plan, as the reference plans it ----------------------------

_OBSERVED = {
    "groups": "sorted(sorted(names) for names, _ in pairs)",
    "group-split": "sorted(sorted(names) for names, _ in pairs)",
    "group-form": "'per-member' if hasattr(_group_of(layer)[1], 'kv_cache_specs') else 'merged'",
    "manager": "type(_layer_spec(_group_of(layer)[0][0])).__name__ in expected",
    "group-block-size": "_layer_spec(_group_of(layer)[0][0]).block_size",
    "group-page": "sorted({PAGE for n in _group_of(layer)[0]})",
    "num-blocks": "num_blocks",
    "tensor-layers": "sum(layer in t[0] for t in tensors)",
    "tensor-size": "_placement(layer)[0]",
    "tensor-offset": "_placement(layer)[1]",
    "tensor-stride": "_placement(layer)[2]",
    "tensor-bounds": "_placement(layer)[3]",
}
"""Per difference class (:mod:`kvcontract.conformance.contract.plan_compare`), the snippet
expression of what the engine's plan says about ``layer`` (``PAGE``: the page of ``n``)."""


@dataclasses.dataclass(frozen=True)
class PlanMatches(Expectation):
    """PLAN-MATCH-1: planning ``table`` (hybrid manager ``hybrid``, layout ``block_outermost``)
    must give what the reference's plan gives for the difference class ``what`` about
    ``layer``: ``expected`` (a refusal for ``refused``; a spec, compared in kind and ``fields``,
    for ``group-spec`` and ``layer-spec``; the kinds its manager serves for ``manager``)."""

    memory: int
    hybrid: bool
    block_outermost: bool
    what: str
    layer: str = ""
    expected: Any = None
    fields: tuple[str, ...] = ()

    @property
    def uses_table(self) -> bool:
        return True

    def lines(self, ctx: Context) -> list[str]:
        setup = plan_setup(self.memory, self.hybrid, self.block_outermost)
        if self.what == "refused":
            return ["try:", *indent(setup), "except Exception as exc:",
                    "    print('no violation: refused as the reference does:', type(exc).__name__, exc)",
                    "    raise SystemExit(0)", ctx.fail("f'planned {len(pairs)} groups; the reference refuses them'")]
        helpers = [f"layer = {self.layer!r}",
                   "def _group_of(n):", "    return next((names, spec) for names, spec in pairs if n in names)",
                   "def _placement(n):",
                   "    for names, size, offset, layer_stride, block_stride in tensors:",
                   "        if n in names and offset is not None:",
                   "            start = offset + list(names).index(n) * layer_stride",
                   f"            return (size, start, block_stride, start + max(num_blocks - 1, 0) * block_stride "
                   f"+ {ctx.page('_layer_spec(n)')})",
                   "    return (None, None, None, None)"]
        if self.what in ("group-spec", "layer-spec"):
            subject = "_group_of(layer)[1]" if self.what == "group-spec" else "_layer_spec(layer)"
            check = [f"got, expected = {subject}, {ctx.spec(self.expected)}",
                     "if type(got).__name__ != type(expected).__name__:",
                     "    " + ctx.fail("f'{layer}: {type(got).__name__} (reference: {type(expected).__name__})'"),
                     f"bad = [n for n in {[f for f in self.fields if f != 'kind']!r} "
                     "if getattr(got, n) != getattr(expected, n)]",
                     "if bad:", "    " + ctx.fail("f'{layer}: ' + ', '.join(f'{n}={getattr(got, n)!r} (reference: "
                                                   "{getattr(expected, n)!r})' for n in bad)")]
        else:
            observed = _OBSERVED[self.what].replace("PAGE", ctx.page("_layer_spec(n)"))
            if self.what == "manager":
                check = [f"expected = {self.expected!r}", f"if not ({observed}):",
                         "    " + ctx.fail("f'{layer}: its group is served by the manager of "
                                          "{type(_layer_spec(_group_of(layer)[0][0])).__name__}, not of "
                                          "{expected} (the reference)'")]
            else:
                about = "" if self.what in ("groups", "group-split", "num-blocks") else " of {layer}"
                check = [f"expected = {self.expected!r}", f"got = {observed}", "if got != expected:",
                         "    " + ctx.fail(f"f'{esc(self.what)}{about}: {{got}} (reference: {{expected}})'")]
        return [*setup, *helpers, *check, f"print('no violation: {esc(self.what)} as the reference plans')"]
