"""The mutant catalogue: the reference engine with one realistic defect each.

A conformance suite is only as good as the bugs it catches. Each mutant here is
an ordinary engine behind the :class:`~kvcontract.conformance.engines.protocol.Engine`
protocol — the :class:`~kvcontract.conformance.engines.reference.ReferenceEngine`
with one operation (``merge``, ``is_uniform``, ``group_layers``, ``page_size``,
``route``) overridden to carry one defect — so ``kvcontract check --engine
mutant:<name>`` runs the suite against it like against any engine, and
``kvcontract mutants`` (:mod:`~kvcontract.conformance.power.hunt`) runs it
against all of them and reports which clause killed each one. A user writes a
mutant the same way: subclass :class:`Mutant`, override one operation, set
``key``, register it.

Mutant names resolve in :mod:`kvcontract.conformance.engines.registry`, which only the
command lines (and their workers) import: no law knows the catalogue.

Every mutant declares ``description`` (its defect, one line), ``imitates`` (the
real-world change it reproduces, or ``""``) and ``expected_clauses`` (the
clauses its defect violates; the suite must fail at least one of them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import kvcontract
from kvcontract import reference
from kvcontract.conformance.engines.protocol import EngineGroup, Router, UnknownEngine
from kvcontract.conformance.engines.reference import ReferenceEngine
from kvcontract.reference import (
    SPEC_KINDS,
    AttentionSpec,
    Disagreement,
    IncompatibleSpecs,
    KVCacheSpec,
    KVDtype,
    MLAAttentionSpec,
    QueryLenSupport,
    Role,
    Routing,
    RoutingRequest,
    SinkFullAttentionSpec,
    SlidingWindowMLASpec,
    role_of,
)

SPEC_BLOCK_LEN = 16
"""The DSpark draft block length the threshold mutant widens the decode path to."""


def _names(spec: KVCacheSpec, role: Role) -> list[str]:
    """Fields of ``spec`` with ``role``."""
    return [f.name for f in dataclasses.fields(spec) if role_of(f) is role]


class Mutant(ReferenceEngine):
    """Base of the catalogue: the reference engine, plus the catalogue entry.

    Subclasses override one operation. Repro snippets build the mutant with
    :func:`load_mutant` and call its operations, so a killed mutant's snippet
    reproduces the finding when run.
    """

    key: ClassVar[str] = ""
    description: ClassVar[str] = ""
    """The defect, in one line."""
    imitates: ClassVar[str] = ""
    """The real-world change the defect reproduces; empty when none is on record."""
    expected_clauses: ClassVar[tuple[str, ...]] = ()
    """Clauses the defect violates; the suite must fail at least one of them."""
    gap: ClassVar[str] = ""
    """For a known survivor: why the suite misses the defect, and what would catch it."""
    version = kvcontract.__version__

    def snippet_imports(self, kinds: Sequence[type[KVCacheSpec]]) -> list[str]:
        return [*super().snippet_imports(kinds),
                "from kvcontract.conformance.engines.mutants import load_mutant",
                f"_mutant = load_mutant({self.key!r})"]

    def render_merge(self, specs_expr: str) -> str:
        return f"_mutant.merge({specs_expr})"

    def render_is_uniform(self, table_expr: str) -> str:
        return f"_mutant.is_uniform({table_expr})"

    def render_group_layers(self, table_expr: str) -> str:
        return f"_mutant.group_layers({table_expr})"

    def render_page_size(self, obj_expr: str) -> str:
        return f"_mutant.page_size({obj_expr})"

    # -- routing: a mutant's router is its ``route`` (the reference's unless overridden)
    def route(self, request: RoutingRequest) -> Routing:
        return reference.route(request)

    def router(self) -> Router | None:
        return self.route

    def router_source(self) -> list[str]:
        return ["from kvcontract.conformance.engines.mutants import load_mutant",
                f"ROUTE = load_mutant({self.key!r}).route"]


MUTANTS: dict[str, type[Mutant]] = {}
"""The catalogue: mutant name (without the ``mutant:`` prefix) -> mutant class, in
catalogue order. The default profile kills every one of them (a test guards it)."""

KNOWN_SURVIVORS: dict[str, type[Mutant]] = {}
"""Mutants of real defects that the suite does not kill yet; each says why in
``gap`` (the law or strategy that would be needed). Loadable and runnable like
the catalogue, but not in the default run."""


def _register(cls: type[Mutant]) -> type[Mutant]:
    if not cls.key or not cls.description or not cls.expected_clauses \
            or cls.key in MUTANTS or cls.key in KNOWN_SURVIVORS:
        raise TypeError(f"{cls.__name__}: a mutant needs a unique key, a description and "
                        "expected clauses")
    cls.name = f"mutant:{cls.key}"
    (KNOWN_SURVIVORS if cls.gap else MUTANTS)[cls.key] = cls
    return cls


def mutant_class(name: str) -> type[Mutant]:
    """The class of mutant ``name`` (catalogue or known survivor; ``mutant:`` prefix optional).

    Raises :class:`~kvcontract.conformance.engines.protocol.UnknownEngine` listing the names.
    """
    key = name.removeprefix("mutant:")
    cls = MUTANTS.get(key) or KNOWN_SURVIVORS.get(key)
    if cls is None:
        raise UnknownEngine(f"unknown mutant {name!r}; known: {', '.join([*MUTANTS, *KNOWN_SURVIVORS])}")
    return cls


def load_mutant(name: str) -> Mutant:
    """The mutant engine called ``name`` (with or without the ``mutant:`` prefix).

    Raises :class:`~kvcontract.conformance.engines.protocol.UnknownEngine` listing the
    catalogue for an unknown name.
    """
    return mutant_class(name)()


# -- merge ---------------------------------------------------------------------------


@_register
class CapabilityEquality(Mutant):
    """MERGE-UNION-1: capabilities must be equal instead of being unioned."""

    key = "capability-equality"
    description = "merge requires CAPABILITY fields to be equal instead of unioning them"
    imitates = ("vLLM 0.29.0 MLAAttentionSpec.merge, which required "
                "non_causal_multi_token_decode to be equal across the group")
    # Every law that merges members differing in a capability sees the error; and a
    # near miss whose members also differ in a capability gets an error naming that one.
    expected_clauses = ("MERGE-UNION-1", "MERGE-ORDER-1", "MERGE-ASSOC-1", "MERGE-KIND-1",
                        "MERGE-AGREE-1", "MERGE-ANNOTATION-1", "MERGE-PAGE-1", "MERGE-PURE-1",
                        "ERROR-MESSAGE-1")

    def merge(self, objs: Sequence[Any]) -> Any:
        specs = list(objs)
        if specs and len({type(s) for s in specs}) == 1:
            for name in _names(specs[0], Role.CAPABILITY):
                values = tuple(dict.fromkeys(getattr(s, name) for s in specs))
                if len(values) > 1:
                    raise IncompatibleSpecs([Disagreement(name, Role.CAPABILITY, values)])
        return reference.merge(specs)


@_register
class BareAssert(Mutant):
    """ERROR-OPTIMIZE-1: the compatibility check is a bare ``assert`` (gone under -O)."""

    key = "bare-assert"
    description = "merge checks compatibility with a bare assert, which python -O removes"
    imitates = ("vLLM 0.34.0 FullAttentionSpec.merge / MLAAttentionSpec.merge "
                "(assert-guarded agreement)")
    expected_clauses = ("ERROR-OPTIMIZE-1", "ERROR-DETECT-1", "ERROR-TYPE-1", "ERROR-KIND-1")

    def merge(self, objs: Sequence[Any]) -> Any:
        from kvcontract.conformance.engines.mutants_defects import merge_guarded_by_assert

        return merge_guarded_by_assert(objs)


@_register
class RaisesValueError(Mutant):
    """ERROR-TYPE-1: incompatibility raises ``ValueError``, not an ``AssertionError``."""

    key = "value-error"
    description = "merge raises ValueError for incompatible specs instead of the contract's error"
    imitates = ("vLLM 0.34.0 FullAttentionSpec.merge_window_sizes "
                "(ValueError for differing sliding windows)")
    expected_clauses = ("ERROR-TYPE-1", "ERROR-KIND-1", "ERROR-EMPTY-1")

    def merge(self, objs: Sequence[Any]) -> Any:
        try:
            return reference.merge(list(objs))
        except IncompatibleSpecs as exc:
            raise ValueError(str(exc)) from None


@_register
class EmptyIndexError(Mutant):
    """ERROR-EMPTY-1: ``merge([])`` fails with ``IndexError`` (reads ``specs[0]`` first)."""

    key = "empty-index-error"
    description = "merge reads specs[0] before checking the list, so merge([]) raises IndexError"
    imitates = ""
    expected_clauses = ("ERROR-EMPTY-1",)

    def merge(self, objs: Sequence[Any]) -> Any:
        specs = list(objs)
        _ = type(specs[0])  # the defect: the kind of the first member, before any check
        return reference.merge(specs)


@_register
class DropsCapability(Mutant):
    """MERGE-UNION-1, MERGE-IDENTITY-1: MLA merges drop the inherited ``non_causal``."""

    key = "drops-capability"
    description = "MLA merge rebuilds the spec without the inherited non_causal capability"
    imitates = "vLLM 0.34.0 MLAAttentionSpec.merge (non_causal not passed to cls(...))"
    expected_clauses = ("MERGE-IDENTITY-1", "MERGE-UNION-1")

    def merge(self, objs: Sequence[Any]) -> Any:
        merged = reference.merge(list(objs))
        if isinstance(merged, MLAAttentionSpec):
            merged = dataclasses.replace(merged, non_causal=False)
        return merged


@_register
class DropsAlignment(Mutant):
    """MERGE-AGREE-1, MERGE-IDENTITY-1: MLA merges drop the ``alignment`` layout field."""

    key = "drops-alignment"
    description = "MLA merge rebuilds the spec without alignment (a LAYOUT field)"
    imitates = "vLLM 0.34.0 MLAAttentionSpec.merge (alignment not passed to cls(...))"
    expected_clauses = ("MERGE-IDENTITY-1", "MERGE-AGREE-1")

    def merge(self, objs: Sequence[Any]) -> Any:
        merged = reference.merge(list(objs))
        if isinstance(merged, MLAAttentionSpec):
            merged = dataclasses.replace(merged, alignment=None)
        return merged


@_register
class DropsAnnotation(Mutant):
    """MERGE-ANNOTATION-2: merge resets the advisory ``is_draft``."""

    key = "drops-annotation"
    description = "merge rebuilds the spec without is_draft (an advisory ANNOTATION field), resetting it"
    imitates = ("vLLM 0.34.0 FullAttentionSpec.merge and its MLA/RSWA/sink/sliding-window-MLA "
                "variants (is_draft not passed to cls(...))")
    expected_clauses = ("MERGE-ANNOTATION-2",)

    def merge(self, objs: Sequence[Any]) -> Any:
        return dataclasses.replace(reference.merge(list(objs)), is_draft=False)


@_register
class FirstAnnotation(Mutant):
    """MERGE-ORDER-1, MERGE-ANNOTATION-1: ``is_draft`` is the first member's."""

    key = "first-annotation"
    description = "merge takes is_draft (advisory) from specs[0] instead of its rule (any)"
    imitates = "vLLM 0.34.0 KVCacheSpec.merge (deepcopy(specs[0]); is_draft is compare=False)"
    expected_clauses = ("MERGE-ANNOTATION-2",)

    def merge(self, objs: Sequence[Any]) -> Any:
        specs = list(objs)
        merged = reference.merge(specs)
        return dataclasses.replace(merged, is_draft=specs[0].is_draft)


@_register
class DropsTokensPerState(Mutant):
    """MERGE-IDENTITY-1 and others: the sink merge drops ``tokens_per_state``, then
    rejects its own (identical) members."""

    key = "drops-tokens-per-state"
    description = ("sink-attention merge rebuilds the spec without tokens_per_state, then "
                   "checks the members against it and rejects identical members")
    imitates = "vLLM 0.34.0 SinkFullAttentionSpec.merge"
    # Every law that merges such members sees the error.
    expected_clauses = ("MERGE-IDENTITY-1", "MERGE-ORDER-1", "MERGE-ASSOC-1", "MERGE-KIND-1",
                        "MERGE-AGREE-1", "MERGE-UNION-1", "MERGE-ANNOTATION-1", "MERGE-PAGE-1",
                        "MERGE-PURE-1")

    def merge(self, objs: Sequence[Any]) -> Any:
        specs = list(objs)
        merged = reference.merge(specs)
        if isinstance(merged, SinkFullAttentionSpec):
            merged = dataclasses.replace(merged, tokens_per_state=1)
            reference.merge([*specs, merged])  # "every member must equal the merged spec"
        return merged


SWA_MLA_UNCHECKED = ("block_size", "num_kv_heads", "head_size", "dtype", "page_size_padded",
                     "num_head_slots", "state_content_bytes", "kv_head_major_slots")
"""Fields vLLM 0.34.0's ``SlidingWindowMLASpec.merge`` takes from ``specs[0]`` unchecked."""


@_register
class UncheckedFirstFields(Mutant):
    """ERROR-DETECT-1: sliding-window MLA merge takes layout fields from ``specs[0]``
    without checking the other members."""

    key = "unchecked-first-fields"
    description = ("sliding-window MLA merge takes block_size, head_size, dtype and other "
                   "layout fields from specs[0] without checking the others")
    imitates = "vLLM 0.34.0 SlidingWindowMLASpec.merge (never checks block_size, head_size, dtype)"
    expected_clauses = ("ERROR-DETECT-1", "ERROR-TYPE-1")

    def merge(self, objs: Sequence[Any]) -> Any:
        specs = list(objs)
        if specs and all(type(s) is SlidingWindowMLASpec for s in specs):
            first = {n: getattr(specs[0], n) for n in SWA_MLA_UNCHECKED}
            specs = [dataclasses.replace(s, **first) for s in specs]
        return reference.merge(specs)


@_register
class AcceptsSubclass(Mutant):
    """ERROR-KIND-1: merge accepts members of a subclass kind and coerces them.

    Killed by the mixed-kind strategy whose second member shares every field with
    the first (``strategies.mixed_kind_pairs``)."""

    key = "accepts-subclass"
    description = ("merge accepts members whose kind is a subclass of the first member's "
                   "(e.g. RSWASpec with FullAttentionSpec) and keeps only the base's fields")
    imitates = "vLLM 0.34.0 FullAttentionSpec.merge (isinstance check, which RSWASpec passes)"
    expected_clauses = ("ERROR-KIND-1",)

    def merge(self, objs: Sequence[Any]) -> Any:
        specs = list(objs)
        if specs and all(isinstance(s, type(specs[0])) for s in specs):
            kind = type(specs[0])
            specs = [kind(**{f.name: getattr(s, f.name) for f in dataclasses.fields(kind)})
                     for s in specs]
        return reference.merge(specs)


@_register
class LastCapability(Mutant):
    """MERGE-ORDER-1, MERGE-UNION-1: capabilities are overwritten by each member in turn."""

    key = "last-capability"
    description = ("merge folds capabilities by assignment instead of or: the group gets "
                   "the last member's flags, so the result depends on input order")
    imitates = ""
    expected_clauses = ("MERGE-ORDER-1", "MERGE-UNION-1")

    def merge(self, objs: Sequence[Any]) -> Any:
        specs = list(objs)
        merged = reference.merge(specs)
        return dataclasses.replace(
            merged, **{n: getattr(specs[-1], n) for n in _names(merged, Role.CAPABILITY)})


@_register
class SortsInput(Mutant):
    """MERGE-PURE-1: merge sorts the caller's list in place."""

    key = "sorts-input"
    description = "merge canonicalises member order by sorting the caller's list in place"
    imitates = ""
    expected_clauses = ("MERGE-PURE-1",)

    def merge(self, objs: Sequence[Any]) -> Any:
        if isinstance(objs, list):
            objs.sort(key=lambda s: s.is_draft)  # targets first, drafts last
        return reference.merge(list(objs))


# -- page size --------------------------------------------------------------------------

_K_EQUALS_V_KINDS: dict[type[KVCacheSpec], type[KVCacheSpec]] = {}


def _k_equals_v_page(spec: KVCacheSpec, kind: type[KVCacheSpec]) -> int:
    if isinstance(spec, AttentionSpec) and spec.page_size_padded is None \
            and spec.state_content_bytes is None:
        itemsize: int = spec.dtype.itemsize
        return spec.num_heads * spec.num_states * 2 * spec.head_size * itemsize
    page: int = kind.page_size_bytes.__get__(spec)
    return page


def _k_equals_v_kind(kind: type[KVCacheSpec]) -> type[KVCacheSpec]:
    """``kind`` with the defective page-size formula (same name, fields and merge)."""
    if kind not in _K_EQUALS_V_KINDS:
        _K_EQUALS_V_KINDS[kind] = type(kind.__name__, (kind,), {
            "__module__": __name__, "__qualname__": kind.__qualname__,
            "page_size_bytes": property(lambda self: _k_equals_v_page(self, kind)),
        })
    return _K_EQUALS_V_KINDS[kind]


@_register
class WrongPageSize(Mutant):
    """MERGE-PAGE-1, GROUP-PAGE-1: the page size assumes K and V heads of equal size."""

    key = "wrong-page-size"
    description = ("the specs' page size is 2 x head_size per token (K = V), ignoring "
                   "head_size_v; grouping unifies pages with that formula")
    imitates = ("vLLM's early v1 AttentionSpec.page_size_bytes "
                "(2 * block_size * num_kv_heads * head_size * dtype_size), before head_size_v")
    expected_clauses = ("MERGE-PAGE-1", "GROUP-PAGE-1")

    def to_engine(self, spec: KVCacheSpec) -> Any:
        kind = _k_equals_v_kind(type(spec))
        return kind(**{f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)})

    def from_engine(self, obj: Any) -> KVCacheSpec:
        kind = next(k for k in type(obj).__mro__ if k in SPEC_KINDS)
        spec: KVCacheSpec = kind(**{f.name: getattr(obj, f.name) for f in dataclasses.fields(kind)})
        return spec

    def group_layers(self, objs_by_layer: Mapping[str, Any]) -> list[EngineGroup]:
        return [EngineGroup(g.layer_names, self.from_engine(g.spec))
                for g in reference.group_layers(objs_by_layer)]

    def render_spec(self, spec: KVCacheSpec) -> str:
        return f"_mutant.to_engine({super().render_spec(spec)})"


# -- uniformity ---------------------------------------------------------------------------


@_register
class UniformRaises(Mutant):
    """UNIFORM-NORAISE-1: the uniformity check lets merge's error escape."""

    key = "uniform-raises"
    description = "is_uniform calls merge without catching its error: it raises instead of answering False"
    imitates = ""
    expected_clauses = ("UNIFORM-NORAISE-1",)

    def is_uniform(self, objs_by_layer: Mapping[str, Any]) -> bool:
        if objs_by_layer:
            reference.merge(list(objs_by_layer.values()))
        return True


@_register
class UniformWindowValueError(Mutant):
    """UNIFORM-NORAISE-1: uniformity raises ValueError when mask windows disagree.

    Killed by near misses stratified over (kind, field) pairs."""

    key = "uniform-window-value-error"
    description = ("is_uniform raises ValueError, instead of answering False, when layers "
                   "disagree on a mask window (a common annotation)")
    imitates = ("vLLM 0.34.0 is_kv_cache_spec_uniform (catches only AssertionError) with "
                "FullAttentionSpec.merge_window_sizes (raises ValueError)")
    expected_clauses = ("UNIFORM-NORAISE-1",)

    def is_uniform(self, objs_by_layer: Mapping[str, Any]) -> bool:
        try:
            if objs_by_layer:
                reference.merge(list(objs_by_layer.values()))
        except IncompatibleSpecs as exc:
            windows = [d.describe() for d in exc.disagreements if d.role is Role.ANNOTATION]
            if windows:  # what merge_window_sizes raises, and the check does not catch
                raise ValueError(f"window sizes must match: {'; '.join(windows)}") from None
            return False
        return True


@_register
class UniformByKind(Mutant):
    """UNIFORM-MERGE-1: uniformity compares kinds only."""

    key = "uniform-by-kind"
    description = "is_uniform answers True whenever all layers have the same kind"
    imitates = ""
    expected_clauses = ("UNIFORM-MERGE-1",)

    def is_uniform(self, objs_by_layer: Mapping[str, Any]) -> bool:
        return len({type(s) for s in objs_by_layer.values()}) <= 1


# -- grouping ----------------------------------------------------------------------------


@_register
class MixesKinds(Mutant):
    """GROUP-COMPAT-1, GROUP-MERGED-1: groups are buckets of one kind, not of mergeable specs."""

    key = "groups-by-kind"
    description = ("grouping puts all layers of one kind in one group, with the first "
                   "group's spec, even when their specs do not merge")
    imitates = ""
    expected_clauses = ("GROUP-COMPAT-1", "GROUP-MERGED-1", "GROUP-UNION-1")

    def group_layers(self, objs_by_layer: Mapping[str, Any]) -> list[EngineGroup]:
        buckets: dict[type, list[EngineGroup]] = {}
        for g in super().group_layers(objs_by_layer):
            buckets.setdefault(type(g.spec), []).append(g)
        return [EngineGroup(tuple(n for g in gs for n in g.layer_names), gs[0].spec)
                for gs in buckets.values()]


@_register
class InvertedTable(Mutant):
    """GROUP-PARTITION-1: grouping inverts the layer table and loses layers."""

    key = "inverted-table"
    description = ("grouping indexes layers by spec ({spec: name}), so of layers with "
                   "identical specs only the last one gets a group")
    imitates = ""
    expected_clauses = ("GROUP-PARTITION-1",)

    def group_layers(self, objs_by_layer: Mapping[str, Any]) -> list[EngineGroup]:
        by_spec = {spec: name for name, spec in objs_by_layer.items()}
        return super().group_layers({name: spec for spec, name in by_spec.items()})


@_register
class FirstLayerSpec(Mutant):
    """GROUP-UNION-1, GROUP-MERGED-1: a group's spec is its first layer's, not the merge."""

    key = "first-layer-spec"
    description = "a group's spec is its first layer's (page-unified) spec instead of the merge"
    imitates = ""
    expected_clauses = ("GROUP-UNION-1", "GROUP-MERGED-1")

    def group_layers(self, objs_by_layer: Mapping[str, Any]) -> list[EngineGroup]:
        groups = super().group_layers(objs_by_layer)
        unified = reference.unify_page_sizes(objs_by_layer) if len(groups) > 1 else objs_by_layer
        return [EngineGroup(g.layer_names, unified[g.layer_names[0]]) for g in groups]


# -- routing (chapter DISPATCH) ------------------------------------------------------

@_register
class CapabilityThreshold(Mutant):
    """DISPATCH-CAUSAL-1: the group's capability widens the causal decode path."""

    key = "dispatch-capability-threshold"
    description = ("the router raises its decode threshold to the spec block length when the group has "
                   "the non_causal_multi_token_decode capability, for causal invocations too")
    imitates = ("the engine commit after the seed: MLAAttentionSpec.merge ORs non_causal_multi_token_decode, "
                "so the target's group got the capability and TritonMLA raised reorder_batch_threshold to "
                "the spec block length; short prefills and verify blocks went to the one-row decode path "
                "(NaN logits)")
    expected_clauses = ("DISPATCH-CAUSAL-1", "DISPATCH-ROWS-1", "DISPATCH-SPLIT-1")

    def route(self, request: RoutingRequest) -> Routing:
        if not (request.causal and request.capability):
            return reference.route(request)
        threshold = max(reference.decode_threshold_of(request), SPEC_BLOCK_LEN)
        support = request.query_len_support
        if support is QueryLenSupport.SINGLE_ONLY:
            support = QueryLenSupport.UNIFORM  # a one-row path widened: same-length requests only
        return reference.route(dataclasses.replace(request, decode_threshold=threshold,
                                                   query_len_support=support))


@_register
class NonTrailingPadding(Mutant):
    """DISPATCH-UNIFORM-1: zero-length requests are accepted anywhere in a non-causal block."""

    key = "dispatch-nontrailing-padding"
    description = "a non-causal block's uniformity is checked over its non-empty requests only"
    imitates = ""
    expected_clauses = ("DISPATCH-UNIFORM-1",)

    def route(self, request: RoutingRequest) -> Routing:
        if not request.causal and request.capability and request.backend_non_causal:
            active = {n for n in request.query_lens if n > 0}
            if len(active) == 1:
                return Routing(request.num_reqs, 0, request.num_tokens, 0)
        return reference.route(request)


@_register
class IgnoresCapability(Mutant):
    """DISPATCH-NONCAUSAL-1: a non-causal invocation is served when only the backend supports it."""

    key = "dispatch-ignores-capability"
    description = "a non-causal invocation is routed when the backend supports it, whatever the group advertises"
    imitates = ""
    expected_clauses = ("DISPATCH-NONCAUSAL-1",)

    def route(self, request: RoutingRequest) -> Routing:
        if not request.causal and request.backend_non_causal:
            return reference.route(dataclasses.replace(request, capability=True))
        return reference.route(request)


@_register
class NonCausalSplit(Mutant):
    """DISPATCH-BLOCK-1: a non-causal invocation is split by the causal threshold."""

    key = "dispatch-noncausal-split"
    description = "a valid non-causal block is split like a causal batch (long blocks go to the prefill path)"
    imitates = ""
    expected_clauses = ("DISPATCH-BLOCK-1",)

    def route(self, request: RoutingRequest) -> Routing:
        routing = reference.route(request)
        if not request.causal:
            return reference.route(dataclasses.replace(request, causal=True))
        return routing


@_register
class PaddingUncounted(Mutant):
    """DISPATCH-PARTITION-1: trailing padding requests are routed nowhere."""

    key = "dispatch-padding-uncounted"
    description = "trailing zero-length padding requests are counted neither as decodes nor as prefills"
    imitates = ""
    expected_clauses = ("DISPATCH-PARTITION-1", "DISPATCH-BLOCK-1")

    def route(self, request: RoutingRequest) -> Routing:
        routing = reference.route(request)
        lens = request.query_lens
        padding = len(lens) - max((r + 1 for r, n in enumerate(lens) if n > 0), default=0)
        if routing.num_prefills:
            return dataclasses.replace(routing, num_prefills=routing.num_prefills - padding)
        return dataclasses.replace(routing, num_decodes=routing.num_decodes - padding)


# -- defects behind rare branches (what the symbolic mode is for; docs/symbolic-vs-property.md) ------


@_register
class UncheckedBeyondSecond(Mutant):
    """ERROR-DETECT-1: only the first two members are checked against each other; a
    later member that disagrees is left out of the merge without an error."""

    key = "unchecked-beyond-second"
    description = ("merge checks the first two members against each other and silently leaves out "
                   "any later member that disagrees with the first")
    imitates = ""
    expected_clauses = ("ERROR-DETECT-1", "ERROR-TYPE-1")
    def merge(self, objs: Sequence[Any]) -> Any:
        specs = list(objs)
        rest = []
        for spec in specs[2:]:
            try:
                reference.merge([specs[0], spec])
            except IncompatibleSpecs:
                continue  # the defect: never compared with the group
            rest.append(spec)
        return reference.merge([*specs[:2], *rest])


@_register
class UnionOfThree(Mutant):
    """MERGE-UNION-1: capabilities are unioned over the first three members only."""

    key = "union-of-three"
    description = ("merge unions capabilities over the first three members only (an unrolled loop), "
                   "so a fourth member's capability is lost")
    imitates = ""
    expected_clauses = ("MERGE-UNION-1", "MERGE-ORDER-1", "MERGE-ASSOC-1")

    def merge(self, objs: Sequence[Any]) -> Any:
        specs = list(objs)
        merged = reference.merge(specs)
        if len(specs) > 3:
            merged = dataclasses.replace(merged, **{
                n: any(getattr(s, n) for s in specs[:3]) for n in _names(merged, Role.CAPABILITY)})
        return merged


@_register
class E5M2LargeBlockPage(Mutant):
    """MERGE-PAGE-1, GROUP-PAGE-1: one dtype at large blocks gets half its page."""

    key = "e5m2-large-block-page"
    description = ("page size of a float8_e5m2 cache with 64 or more tokens per block is computed "
                   "as if two values shared a byte (half the page)")
    imitates = ""
    expected_clauses = ("MERGE-PAGE-1", "GROUP-PAGE-1")

    def page_size(self, obj: Any) -> int:
        page: int = obj.page_size_bytes
        if getattr(obj, "dtype", None) is KVDtype.FLOAT8_E5M2 and obj.block_size >= 64:
            return page // 2
        return page


# -- the strengthened oracles and the new kinds (issue 11) --------------------------------


@_register
class MutatesInputs(Mutant):
    """MERGE-PURE-1 by value: the merge writes the merged capability back into its inputs."""

    key = "mutates-inputs"
    description = "merge sets every member's capabilities to the group's union, in place"
    imitates = ""
    expected_clauses = ("MERGE-PURE-1",)

    def merge(self, objs: Sequence[Any]) -> Any:
        merged = reference.merge(list(objs))
        for obj in objs:
            for name in _names(obj, Role.CAPABILITY):
                object.__setattr__(obj, name, getattr(merged, name))
        return merged


@_register
class MessageWithoutValues(Mutant):
    """ERROR-MESSAGE-1: the error names the field but not the values."""

    key = "message-without-values"
    description = "the incompatibility error names the disagreeing fields but not their values"
    imitates = ""
    expected_clauses = ("ERROR-MESSAGE-1",)

    def merge(self, objs: Sequence[Any]) -> Any:
        try:
            return reference.merge(list(objs))
        except IncompatibleSpecs as exc:
            raise AssertionError(f"incompatible KV cache specs in {', '.join(exc.fields)}") from None


@_register
class PadsInsteadOfGrowing(Mutant):
    """GROUP-PAGE-1: a smaller page is padded to the largest instead of growing its block size."""

    key = "pads-instead-of-growing"
    description = ("page-size unification pads every smaller attention page to the largest page "
                   "instead of multiplying its block size (more memory per token, equal pages)")
    imitates = ""
    expected_clauses = ("GROUP-PAGE-1",)

    def group_layers(self, objs_by_layer: Mapping[str, Any]) -> list[EngineGroup]:
        table = dict(objs_by_layer)
        out = []
        for g in reference.group_layers(table):
            own = table[g.layer_names[0]]
            spec = g.spec
            if isinstance(spec, AttentionSpec) and not isinstance(spec, MLAAttentionSpec) \
                    and spec.block_size != own.block_size:
                spec = dataclasses.replace(spec, block_size=own.block_size, page_size_padded=spec.page_size_bytes)
            out.append(EngineGroup(g.layer_names, spec))
        return out


@_register
class HiddenStateFirstKind(Mutant):
    """ERROR-KIND-1, MERGE-ORDER-1: MLA merges admit hidden-state members; the first decides the kind."""

    key = "hidden-state-first-kind"
    description = ("MLA merge admits any MLA subclass and rebuilds with the first member's class "
                   "(HiddenStateCacheSpec and MLAAttentionSpec layers merge)")
    imitates = "vLLM 0.34.0 MLAAttentionSpec.merge (isinstance check, cls(...) of specs[0])"
    expected_clauses = ("ERROR-KIND-1",)

    def merge(self, objs: Sequence[Any]) -> Any:
        objs = list(objs)
        if objs and all(isinstance(o, MLAAttentionSpec) for o in objs) and len({type(o) for o in objs}) > 1:
            first = type(objs[0])
            converted = [first(**{f.name: getattr(o, f.name) for f in dataclasses.fields(first)})
                         for o in objs]
            return reference.merge(converted)
        return reference.merge(objs)


@_register
class HiSparseIgnoresPageSize(Mutant):
    """ERROR-DETECT-1 on a HiSparse kind: the fixed page size is not compared."""

    key = "hisparse-ignores-page-size"
    description = "HiSparse merges take page_size from the first member without comparing it"
    imitates = ""
    expected_clauses = ("ERROR-DETECT-1",)

    def merge(self, objs: Sequence[Any]) -> Any:
        objs = list(objs)
        if objs and type(objs[0]).__name__.startswith("HiSparse"):
            objs = [dataclasses.replace(o, page_size=objs[0].page_size) for o in objs]
        return reference.merge(objs)


@_register
class MambaDropsCheckpoints(Mutant):
    """MERGE-IDENTITY-1 on MambaSpec's 0.34 fields: the merge rebuilds without the checkpoints."""

    key = "mamba-drops-checkpoints"
    description = "MambaSpec merge rebuilds the spec without num_prefill_checkpoint_blocks"
    imitates = "a field added to MambaSpec and forgotten in a hand-written merge"
    expected_clauses = ("MERGE-IDENTITY-1", "MERGE-AGREE-1")

    def merge(self, objs: Sequence[Any]) -> Any:
        merged = reference.merge(list(objs))
        if type(merged).__name__ == "MambaSpec":
            merged = dataclasses.replace(merged, num_prefill_checkpoint_blocks=0)
        return merged
