"""A deliberately defective merge whose compatibility check exists only in ``__debug__``.

This module exists only for the mutant catalogue (``kvcontract.conformance.engines.mutants``,
mutant ``bare-assert``): it imitates vLLM 0.34.0's ``FullAttentionSpec.merge`` and
``MLAAttentionSpec.merge``, which guard agreement with ``assert`` statements that
``python -O`` removes. The imitation spells out what such an assert does (raise
``AssertionError`` only while ``__debug__`` is true) instead of using one, so the
kit's library code holds no ``assert`` statement. Nothing else may import it.

The defect violates ERROR-OPTIMIZE-1 (and, under ``-O``, ERROR-DETECT-1,
ERROR-TYPE-1, ERROR-KIND-1); in the normal interpreter it behaves as the reference.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from kvcontract import reference
from kvcontract.reference import KVCacheSpec


def merge_guarded_by_assert(specs: Sequence[KVCacheSpec]) -> KVCacheSpec:
    """The reference merge, but incompatibility is reported by ``assert``.

    Normal interpreter: raises ``AssertionError`` naming the disagreeing fields,
    as the contract wants. ``python -O``: the assert is gone, and an incompatible
    list silently merges into (a copy of) its first member's spec.
    """
    specs = list(specs)
    if not specs:
        return reference.merge(specs)  # the empty-list error is not this mutant's defect
    problem = None
    try:
        merged = reference.merge(specs)
    except reference.IncompatibleSpecs as exc:
        merged, problem = dataclasses.replace(specs[0]), str(exc)
    if __debug__ and problem is not None:  # the defect under test (ERROR-OPTIMIZE-1): gone under -O
        raise AssertionError(problem)
    return merged
