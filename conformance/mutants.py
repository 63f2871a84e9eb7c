"""The mutant catalogue: the reference engine with one realistic defect each.

A conformance suite is only as good as the bugs it catches. Each mutant here is
an ordinary engine behind the :class:`~kvcontract.conformance.engine.Engine`
protocol — the :class:`~kvcontract.conformance.reference_engine.ReferenceEngine`
with one operation (``merge``, ``is_uniform``, ``group_layers``, the spec
objects' page size) overridden to carry one defect — so ``kvcontract check
--engine mutant:<name>`` runs the suite against it like against any engine, and
``kvcontract mutants`` runs it against all of them and reports which clause
killed each one (:func:`hunt`). A user writes a mutant the same way: subclass
``ReferenceEngine``, override one operation, set ``name``.

The kill run hunts each mutant to its first failing clause, in SPEC.md order,
after a control run of the unmutated reference. A law that calls none of the
operations a mutant overrides is not rerun on it: there the mutant is the
reference, with the same seed, so the law passes as on the control
(:func:`mutated_operations`; ``--exhaustive`` runs every law regardless).

Every mutant declares ``description`` (its defect, one line), ``imitates`` (the
real-world change it reproduces, or ``""``) and ``expected_clauses`` (the
clauses its defect violates; the suite must fail at least one of them).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Literal

import pydantic

import kvcontract
from kvcontract import reference
from kvcontract.conformance.engine import Engine, EngineGroup, UnknownEngine
from kvcontract.conformance.reference_engine import ReferenceEngine
from kvcontract.reference import (
    SPEC_KINDS,
    AttentionSpec,
    Disagreement,
    IncompatibleSpecs,
    KVCacheSpec,
    MLAAttentionSpec,
    Role,
    SinkFullAttentionSpec,
    SlidingWindowMLASpec,
    role_of,
)


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
                "from kvcontract.conformance.mutants import load_mutant",
                f"_mutant = load_mutant({self.key!r})"]

    def render_merge(self, specs_expr: str) -> str:
        return f"_mutant.merge({specs_expr})"

    def render_is_uniform(self, table_expr: str) -> str:
        return f"_mutant.is_uniform({table_expr})"

    def render_group_layers(self, table_expr: str) -> str:
        return f"_mutant.group_layers({table_expr})"


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

    Raises :class:`~kvcontract.conformance.engine.UnknownEngine` listing the names.
    """
    key = name.removeprefix("mutant:")
    cls = MUTANTS.get(key) or KNOWN_SURVIVORS.get(key)
    if cls is None:
        raise UnknownEngine(f"unknown mutant {name!r}; known: {', '.join([*MUTANTS, *KNOWN_SURVIVORS])}")
    return cls


def load_mutant(name: str) -> Mutant:
    """The mutant engine called ``name`` (with or without the ``mutant:`` prefix).

    Raises :class:`~kvcontract.conformance.engine.UnknownEngine` listing the
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
        from kvcontract.conformance.mutants_defects import merge_guarded_by_assert

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
    """MERGE-ANNOTATION-1, MERGE-IDENTITY-1: merge resets ``is_draft``."""

    key = "drops-annotation"
    description = "merge rebuilds the spec without is_draft (an ANNOTATION field), resetting it"
    imitates = ("vLLM 0.34.0 FullAttentionSpec.merge and its MLA/RSWA/sink/sliding-window-MLA "
                "variants (is_draft not passed to cls(...))")
    expected_clauses = ("MERGE-IDENTITY-1", "MERGE-ANNOTATION-1")

    def merge(self, objs: Sequence[Any]) -> Any:
        return dataclasses.replace(reference.merge(list(objs)), is_draft=False)


@_register
class FirstAnnotation(Mutant):
    """MERGE-ORDER-1, MERGE-ANNOTATION-1: ``is_draft`` is the first member's."""

    key = "first-annotation"
    description = "merge takes is_draft from specs[0] instead of its rule (any)"
    imitates = "vLLM 0.34.0 KVCacheSpec.merge (deepcopy(specs[0]); is_draft is compare=False)"
    expected_clauses = ("MERGE-ORDER-1", "MERGE-ANNOTATION-1")

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
    page: int = kind.page_size_bytes.__get__(spec)  # type: ignore[attr-defined]
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


from kvcontract.conformance.dispatch_mutants import DISPATCH_MUTANTS  # noqa: E402 - needs _register

for _cls in DISPATCH_MUTANTS.values():
    _register(_cls)  # type: ignore[arg-type]


# -- the kill run: the suite against each mutant, to its first failure ----------------------

Mode = Literal["normal", "optimized"]
Verdict = Literal["killed", "survived", "error"]
Progress = Callable[[str], None]

OPERATIONS: tuple[str, ...] = ("to_engine", "from_engine", "merge", "is_uniform", "group_layers",
                               "page_size", "route")
"""The engine operations the laws call; what a mutant may override."""

CONTROL_NAME = "reference"
CONTROL_DESCRIPTION = "the reference, unmutated (control: no clause may fail on it)"


class _TracedReference(ReferenceEngine):
    """The reference engine, recording which operations each law calls (the control)."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def to_engine(self, spec: KVCacheSpec) -> Any:
        self.used.add("to_engine")
        return super().to_engine(spec)

    def from_engine(self, obj: Any) -> KVCacheSpec:
        self.used.add("from_engine")
        return super().from_engine(obj)

    def merge(self, objs: Sequence[Any]) -> Any:
        self.used.add("merge")
        return super().merge(objs)

    def is_uniform(self, objs_by_layer: Mapping[str, Any]) -> bool:
        self.used.add("is_uniform")
        return super().is_uniform(objs_by_layer)

    def group_layers(self, objs_by_layer: Mapping[str, Any]) -> list[EngineGroup]:
        self.used.add("group_layers")
        return super().group_layers(objs_by_layer)

    def page_size(self, obj: Any) -> int:
        self.used.add("page_size")
        return super().page_size(obj)


def mutated_operations(engine: Engine) -> frozenset[str] | None:
    """The operations in which ``engine`` differs from the reference engine, or
    None when that cannot be told (not a ``ReferenceEngine``, or it changes what
    the laws draw or skip)."""
    if not isinstance(engine, ReferenceEngine) or any(op in vars(engine) for op in OPERATIONS):
        return None
    cls = type(engine)
    if engine.supports_empty_merge != ReferenceEngine.supports_empty_merge or any(
            getattr(cls, n) is not getattr(ReferenceEngine, n)
            for n in ("unsupported_kinds", "unsupported_fields")):
        return None
    return frozenset(op for op in OPERATIONS
                     if getattr(cls, op, None) is not getattr(ReferenceEngine, op, None))


class ModeOutcome(pydantic.BaseModel):
    """The suite against one engine in one interpreter mode."""

    mode: Mode
    status: Verdict
    clauses: list[str] = []
    """Failing clauses: the first one (every one, when exhaustive)."""
    seconds: float = 0.0
    """Time to the first failure; the whole pass when nothing failed."""
    laws_run: int = 0
    passed: list[str] = []
    """Clauses that held (or were skipped by their law), including the unaffected ones."""
    unaffected: list[str] = []
    """Clauses not rerun: their law calls no mutated operation, and the control passes it."""
    message: str = ""
    snippet: str = ""
    witness: dict[str, Any] | None = None
    errors: list[str] = []
    """``CLAUSE: message`` of laws that could not judge (status error)."""


def _mode_name() -> Mode:
    return "optimized" if sys.flags.optimize else "normal"


def hunt(engine: Engine, *, profile: str = "default", seed_value: int = 0, exhaustive: bool = False,
         baseline: Mapping[str, frozenset[str]] | None = None,
         trace: dict[str, frozenset[str]] | None = None) -> ModeOutcome:
    """Run the laws against ``engine`` in this interpreter, in SPEC.md order, to
    the first failing clause (every clause when ``exhaustive``).

    ``baseline`` (clause -> operations its law called on the control, for the
    clauses the control passed) lets the hunt skip a law that calls none of the
    operations the mutant changes: there the mutant *is* the reference, with the
    same seed, so the law passes as on the control. ``trace``, when given, is
    filled with that map for ``engine`` (an engine that records ``used``).
    """
    from kvcontract.conformance.laws import LAWS
    from kvcontract.conformance.runner import run_law

    mutated = None if exhaustive or baseline is None else mutated_operations(engine)
    start = time.perf_counter()
    failed, passed, unaffected, errors = [], [], [], []
    first_failure: float | None = None
    for law in LAWS:
        if mutated is not None and baseline is not None and law.clause in baseline \
                and not baseline[law.clause] & mutated:
            unaffected.append(law.clause)
            continue
        if trace is not None:
            engine.used = set()  # type: ignore[attr-defined]
        record = run_law(engine, law, profile, seed_value, None)
        if record.status == "fail":
            failed.append(record)
            if first_failure is None:
                first_failure = time.perf_counter() - start
        elif record.status == "error":
            errors.append(record)
        else:
            passed.append(law.clause)
            if trace is not None:
                trace[law.clause] = frozenset(engine.used)  # type: ignore[attr-defined]
        if (failed or errors) and not exhaustive:
            break
    total = time.perf_counter() - start
    status: Verdict = "killed" if failed else "error" if errors else "survived"
    head = failed[0] if failed else errors[0] if errors else None
    return ModeOutcome(
        mode=_mode_name(), status=status, clauses=[r.clause for r in failed],
        seconds=round(first_failure if first_failure is not None else total, 3),
        laws_run=len(failed) + len(passed) + len(errors),
        passed=sorted([*passed, *unaffected], key=[law.clause for law in LAWS].index),
        unaffected=unaffected,
        message=head.message if head else "", snippet=head.snippet if head else "",
        witness=head.witness if head else None,
        errors=[f"{r.clause}: {r.message}" for r in errors])


def hunt_all(names: Sequence[str], *, profile: str = "default", seed_value: int = 0,
             exhaustive: bool = False, progress: Progress | None = None) -> dict[str, ModeOutcome]:
    """The control, then every mutant in ``names``, in this interpreter.

    The control (the reference) runs every law; the laws it passes, with the
    operations each called, are the baseline that lets each mutant's hunt skip
    the laws its defect cannot reach (:func:`hunt`).
    """
    trace: dict[str, frozenset[str]] = {}
    control = hunt(_TracedReference(), profile=profile, seed_value=seed_value, exhaustive=True,
                   trace=trace)
    outcomes = {CONTROL_NAME: control}
    if progress:
        progress(_progress_line(CONTROL_NAME, control))
    for name in names:
        outcome = hunt(load_mutant(name), profile=profile, seed_value=seed_value,
                       exhaustive=exhaustive, baseline=trace)
        outcomes[name] = outcome
        if progress:
            progress(_progress_line(name, outcome))
    return outcomes


def _progress_line(name: str, o: ModeOutcome) -> str:
    what = f"{o.status} by {', '.join(o.clauses)}" if o.clauses else o.status
    return f"[{o.mode}] {name}: {what} ({o.seconds:.2f}s, {o.laws_run} laws run)"


class MutantResult(pydantic.BaseModel):
    """One mutant (or the control) across the modes."""

    mutant: str
    engine: str
    description: str
    imitates: str
    expected_clauses: list[str]
    known_gap: str = ""
    verdict: Verdict
    killed_by: list[str]
    """Clauses that failed, in SPEC.md order (ERROR-OPTIMIZE-1 too when a clause
    held normally but failed under -O)."""
    killed_in: list[Mode]
    seconds: float | None
    """Time to the first failure, in the first mode that killed it."""
    outcomes: list[ModeOutcome]


def combine(name: str, outcomes: Sequence[ModeOutcome]) -> MutantResult:
    """One result from the per-mode outcomes of mutant ``name`` (or the control)."""
    from kvcontract.conformance.laws import DERIVED, LAWS

    by_mode = {o.mode: o for o in outcomes}
    normal, optimized = by_mode.get("normal"), by_mode.get("optimized")
    if normal is not None and optimized is not None and optimized.status == "killed":
        for derived, sources in DERIVED.items():
            if any(c in sources and c in normal.passed for c in optimized.clauses) \
                    and derived not in optimized.clauses:
                by_mode["optimized"] = optimized.model_copy(
                    update={"clauses": [*optimized.clauses, derived]})
    ordered = [by_mode[m] for m in ("normal", "optimized") if m in by_mode]
    order = {law.clause: i for i, law in enumerate(LAWS)}
    killing = [o for o in ordered if o.status == "killed"]
    verdict: Verdict = ("killed" if killing else
                        "error" if any(o.status == "error" for o in ordered) else "survived")
    if name == CONTROL_NAME:
        engine, description, imitates, expected, gap = CONTROL_NAME, CONTROL_DESCRIPTION, "", [], ""
    else:
        cls = mutant_class(name)
        engine, description, imitates, gap = cls.name, cls.description, cls.imitates, cls.gap
        expected = list(cls.expected_clauses)
    return MutantResult(
        mutant=name, engine=engine, description=description, imitates=imitates,
        expected_clauses=expected, known_gap=gap, verdict=verdict,
        killed_by=sorted({c for o in killing for c in o.clauses},
                         key=lambda c: order.get(c, len(order))),
        killed_in=[o.mode for o in killing],
        seconds=killing[0].seconds if killing else None, outcomes=ordered)


class MutantsReport(pydantic.BaseModel):
    """A whole ``kvcontract mutants`` run (``schema_version`` "1")."""

    schema_version: str = "1"
    kvcontract_version: str
    profile: str
    seed: int
    modes: list[Mode]
    exhaustive: bool
    mutants: list[MutantResult]
    control: MutantResult
    seconds: float

    @property
    def survivors(self) -> list[str]:
        return [m.mutant for m in self.mutants if m.verdict == "survived"]

    @property
    def ok(self) -> bool:
        """Every mutant killed, and the control not."""
        return all(m.verdict == "killed" for m in self.mutants) and self.control.verdict == "survived"
