"""Mutants for the strengthened oracles and the new kinds (issue 11)."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from typing import Any

from kvcontract import reference
from kvcontract.conformance.engines.mutants.base import Mutant, _names, _register
from kvcontract.conformance.engines.protocol import EngineGroup
from kvcontract.reference import AttentionSpec, IncompatibleSpecs, MLAAttentionSpec, Role


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


@_register
class IdentityCompare(Mutant):
    """Equal values that are other objects: a string field compared with ``is``."""

    key = "identity-compare"
    description = ("merge compares string fields (cache_dtype_str, model_version, mamba_cache_mode) with "
                   "`is`, so equal strings read back from a config count as a disagreement")
    imitates = ""
    expected_clauses = ("MERGE-ORDER-1", "MERGE-KIND-1", "MERGE-AGREE-1")

    def merge(self, objs: Sequence[Any]) -> Any:
        first = objs[0] if objs else None
        for obj in objs[1:]:
            for f in dataclasses.fields(obj):
                mine, theirs = getattr(first, f.name, None), getattr(obj, f.name)
                if isinstance(theirs, str) and not isinstance(theirs, enum.Enum) and mine is not theirs:
                    raise IncompatibleSpecs((reference.Disagreement(f.name, None, (mine, theirs)),))
        return reference.merge(list(objs))


@_register
class MessageFirstTwoValues(Mutant):
    """ERROR-MESSAGE-1 over three members: the error names the first member's value and the first
    that differs from it, not every distinct value."""

    key = "message-first-two-values"
    description = ("the incompatibility error names each disagreeing field with the first member's value and "
                   "the first other value (\"block_size: 64 vs 32\"), so a third member's value is never named")
    imitates = ("the pairwise messages of vLLM 0.34.0's merges, which compare each member with specs[0] and "
                "stop at the first that differs")
    expected_clauses = ("ERROR-MESSAGE-1",)

    def merge(self, objs: Sequence[Any]) -> Any:
        try:
            return reference.merge(list(objs))
        except IncompatibleSpecs as exc:
            if not exc.disagreements:
                raise  # merge([]): its own message
            parts = [f"{d.field}: {' vs '.join(repr(v) for v in d.values[:2])}" for d in exc.disagreements]
            raise AssertionError("incompatible KV cache specs: " + "; ".join(parts)) from None
