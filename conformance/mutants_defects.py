"""A deliberately defective merge whose compatibility check behaves like a bare ``assert``.

This module exists only for the mutant catalogue (``kvcontract.conformance.mutants``,
mutant ``bare-assert``): it imitates vLLM 0.34.0's ``FullAttentionSpec.merge`` and
``MLAAttentionSpec.merge``, which guard agreement with ``assert`` statements that
``python -O`` removes. The check is written as ``if __debug__: raise AssertionError``,
which the compiler drops under ``-O`` exactly as it drops an ``assert`` statement, so
the kit itself holds no ``assert``. Nothing else may import it.

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
    # The defect under test (ERROR-OPTIMIZE-1): a check that exists only while
    # __debug__ is true, exactly as an assert statement, so python -O drops it.
    if __debug__ and problem is not None:
        raise AssertionError(problem)
    return merged
