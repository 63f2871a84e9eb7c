"""Element types of cache tensors, by name and byte size (SPEC-PAGE-1)."""

from __future__ import annotations

import enum


class KVDtype(enum.Enum):
    """A cache element type: its canonical name and its size in bytes."""

    FLOAT32 = ("float32", 4)
    FLOAT16 = ("float16", 2)
    BFLOAT16 = ("bfloat16", 2)
    FLOAT8_E4M3 = ("float8_e4m3fn", 1)
    FLOAT8_E5M2 = ("float8_e5m2", 1)
    UINT8 = ("uint8", 1)
    INT8 = ("int8", 1)

    @property
    def type_name(self) -> str:
        """The canonical name, as torch spells it (``torch.<name>``)."""
        return self.value[0]

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self.value[1]

    @classmethod
    def from_name(cls, name: str) -> KVDtype:
        """Look a dtype up by its canonical name; ``ValueError`` names the choices."""
        for member in cls:
            if member.type_name == name:
                return member
        choices = ", ".join(m.type_name for m in cls)
        raise ValueError(f"unknown dtype {name!r}; expected one of: {choices}")

    def __repr__(self) -> str:
        return f"KVDtype.{self.name}"


class KVQuantMode(enum.Enum):
    """Quantization mode of an attention cache (a LAYOUT field; names as vLLM's).

    Every distinct mode of vLLM 0.34.0's ``KVQuantMode``; its ``CUSTOM`` has the
    value of ``OCTAVE_K3V4`` there, so it is that member, not a mode of its own."""

    NONE = "none"
    FP8_PER_TENSOR = "fp8_per_tensor"
    INT8_PER_TOKEN_HEAD = "int8_per_token_head"
    FP8_PER_TOKEN_HEAD = "fp8_per_token_head"
    INT4_PER_TOKEN_HEAD = "int4_per_token_head"
    NVFP4 = "nvfp4"
    TURBOQUANT_K8V4 = "turboquant_k8v4"
    TURBOQUANT_4BIT_NC = "turboquant_4bit_nc"
    TURBOQUANT_K3V4_NC = "turboquant_k3v4_nc"
    TURBOQUANT_3BIT_NC = "turboquant_3bit_nc"
    NVFP4_DS_MLA = "nvfp4_ds_mla"
    ULTRAQUANT_4BIT = "ultraquant_4bit"
    OCTAVE_K3V4 = "octave_k3v4"
    OCTAVE_K3V3 = "octave_k3v3"
    OCTAVE_K3V3_COMPACT = "octave_k3v3_compact"

    def __repr__(self) -> str:
        return f"KVQuantMode.{self.name}"


class SparseCacheRole(enum.Enum):
    """Which cache of a sparse-attention pair an MLA layer holds (ALLOCATION)."""

    SPARSE = "sparse"
    INDEXER = "indexer"

    def __repr__(self) -> str:
        return f"SparseCacheRole.{self.name}"


class MambaType(enum.Enum):
    """The state-space layer family of a Mamba cache (LAYOUT)."""

    MAMBA1 = "mamba1"
    MAMBA2 = "mamba2"
    SHORT_CONV = "short_conv"
    LINEAR = "linear"
    GDN_ATTN = "gdn_attn"

    def __repr__(self) -> str:
        return f"MambaType.{self.name}"
