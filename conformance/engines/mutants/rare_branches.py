"""Defects behind rare branches: what the symbolic mode is for
(``docs/symbolic-vs-property.md``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from kvcontract import reference
from kvcontract.conformance.engines.mutants.base import Mutant, _names, _register
from kvcontract.reference import IncompatibleSpecs, KVDtype, Role


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
