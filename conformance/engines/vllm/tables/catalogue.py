"""Every family the builders drive, and those they do not (with the reason)."""

from __future__ import annotations

from kvcontract.conformance.engines.vllm.tables import (
    families_deepseek,
    families_dense,
    families_hybrid,
    families_mamba,
    families_spec_decode,
)
from kvcontract.conformance.engines.vllm.tables.build import Family


def families() -> list[Family]:
    return [*families_dense.FAMILIES, *families_deepseek.FAMILIES,
            *families_mamba.FAMILIES, *families_hybrid.FAMILIES,
            *families_spec_decode.FAMILIES]


def skipped_families() -> list[dict[str, str]]:
    """Families of the release the builders do not drive, with the reason."""
    return list(families_hybrid.NOT_BUILT)
