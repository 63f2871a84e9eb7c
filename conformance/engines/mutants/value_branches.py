"""Defects behind a branch on a value: what the symbolic value groups are for
(``kvcontract mutants --symbolic``, ``docs/symbolic-vs-property.md``).

Each is a known survivor of the property suite: its defect sits behind a value the strategies'
lists never hold (a block size of 48) or a pair of values the systematic phase never puts side
by side (two fp8 formats, neither the base's dtype). The routing one of this family, a block
longer than a kernel tile, is in the catalogue (``dispatch-long-block``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from kvcontract import reference
from kvcontract.conformance.engines.mutants.base import Mutant, _register
from kvcontract.reference import KVDtype

HYBRID_BLOCK = 48
"""A block size real hybrid models get when the planner aligns attention pages with Mamba
state pages; no strategy's list of block sizes holds it."""


@_register
class BlockSize48(Mutant):
    """ERROR-DETECT-1: with a 48-token first member, block sizes are not compared."""

    key = "block-size-48"
    description = (f"merge skips the block-size comparison when the first member's block size is "
                   f"{HYBRID_BLOCK} (a fast path for page-aligned hybrid layers), so members with other "
                   "block sizes are merged into a 48-token group")
    imitates = ""
    expected_clauses = ("ERROR-DETECT-1", "ERROR-TYPE-1", "UNIFORM-MERGE-1")
    gap = (f"block sizes come from value lists (1, 2, 16, 32, 64, 128); {HYBRID_BLOCK} is in none, so "
           "the property suite never takes the branch; the symbolic value groups solve it")

    def merge(self, objs: Sequence[Any]) -> Any:
        specs = list(objs)
        if specs and getattr(specs[0], "block_size", None) == HYBRID_BLOCK:
            specs = [dataclasses.replace(s, block_size=HYBRID_BLOCK) for s in specs]
        return reference.merge(specs)


FP8 = (KVDtype.FLOAT8_E4M3, KVDtype.FLOAT8_E5M2)


@_register
class Fp8Family(Mutant):
    """ERROR-DETECT-1: the two fp8 formats are compared by family, so they merge."""

    key = "fp8-family-pair"
    description = ("merge compares a float8_e4m3fn member with a float8_e5m2 one by family (both 'fp8') "
                   "and keeps the first's format: the pair shares a group whose page holds two encodings")
    imitates = ""
    expected_clauses = ("ERROR-DETECT-1", "ERROR-TYPE-1", "UNIFORM-MERGE-1")
    gap = ("near misses change one field from the base (bfloat16), so two fp8 members meet only when "
           "random draws pick both; the symbolic groups put any two values of the engine's dtypes side by side")

    def merge(self, objs: Sequence[Any]) -> Any:
        specs = list(objs)
        dtypes = {getattr(s, "dtype", None) for s in specs}
        if len(dtypes) == 2 and dtypes <= set(FP8):
            specs = [dataclasses.replace(s, dtype=specs[0].dtype) for s in specs]
        return reference.merge(specs)
