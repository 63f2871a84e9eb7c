"""Mutants of ``merge``: what a hand-written merge gets wrong (capabilities, annotations,
layout fields, member kinds, the caller's list)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from kvcontract import reference
from kvcontract.conformance.engines.mutants.base import Mutant, _names, _register
from kvcontract.reference import (
    Disagreement,
    IncompatibleSpecs,
    MLAAttentionSpec,
    Role,
    SinkFullAttentionSpec,
    SlidingWindowMLASpec,
)


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
class EmptyMergeMute(Mutant):
    """ERROR-EMPTY-1: ``merge([])`` raises the right error with no reason."""

    key = "empty-merge-mute"
    description = "merge([]) raises a bare AssertionError() that does not say a group needs a layer"
    imitates = ""
    expected_clauses = ("ERROR-EMPTY-1",)

    def merge(self, objs: Sequence[Any]) -> Any:
        if not objs:
            raise AssertionError()
        return reference.merge(list(objs))


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
