"""The spec kinds: per-layer descriptions of a KV cache (chapters ROLE and SPEC).

Each kind is a frozen, plain dataclass whose fields carry their role in field
metadata (:mod:`kvcontract.reference.roles`). Field names follow vLLM 0.34.0's
``vllm/v1/kv_cache_interface.py`` where the concept is the same. Construction
validates values (SPEC-VALID-1) and raises :class:`InvalidSpec` for bad ones.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

from kvcontract.reference import citations as cite
from kvcontract.reference.dtypes import KVDtype, KVQuantMode, MambaType, SparseCacheRole
from kvcontract.reference.roles import (
    AnnotationRule,
    allocation,
    annotation,
    capability,
    layout,
)


class InvalidSpec(ValueError):
    """A spec value that no cache can have: a non-positive size, a page padding
    smaller than the page, or fields that exclude each other (SPEC-VALID-1).

    ``kind`` names the spec's kind and ``fields`` the fields at fault, where the rule
    names them (a finding's signature is built from both)."""

    def __init__(self, message: str, kind: str = "", fields: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.kind = kind
        self.fields = fields


def round_up(value: int, multiple: int) -> int:
    """The least multiple of ``multiple`` that is >= ``value``."""
    return -(-value // multiple) * multiple


def _require(condition: bool, spec: object, message: str | Callable[[], str], fields: tuple[str, ...] = ()) -> None:
    """Raise :class:`InvalidSpec` unless ``condition``. A message that shows values is passed as
    a function, built only on failure: a symbolic value (the symbolic search's) is then never
    formatted, so never made concrete, by a check that holds."""
    if not condition:
        text = message() if callable(message) else message
        raise InvalidSpec(f"{type(spec).__name__}: {text} (SPEC-VALID-1)", type(spec).__name__, fields)


def _positive(spec: object, *names: str) -> None:
    for name in names:
        value = getattr(spec, name)
        if not (value is None or value >= 1):
            _require(False, spec, f"{name} must be >= 1, got {value!r}", (name,))


def _is_base(cls: type) -> bool:
    return cls.__name__ in ("KVCacheSpec", "AttentionSpec") and cls.__module__ == __name__


@dataclasses.dataclass(frozen=True, kw_only=True)
class KVCacheSpec:
    """Base of every spec kind: the fields all caches share (ROLE-TABLE-1)."""

    block_size: int = layout(relied_on_by=cite.KVCACHESPEC_BLOCK_SIZE)
    """Tokens per block; with the per-token bytes it sizes a page."""
    dcp_sharded: bool = allocation(False, relied_on_by=cite.KVCACHESPEC_DCP_SHARDED)
    """Whether decode-context parallelism shards token positions across ranks;
    it changes blocks per request."""
    block_stride_alignment: int | None = layout(None,
        relied_on_by=cite.KVCACHESPEC_BLOCK_STRIDE_ALIGNMENT)
    """Required byte alignment between physical blocks."""
    is_draft: bool = annotation(False, AnnotationRule.ANY, advisory=cite.KVCACHESPEC_IS_DRAFT)
    """Whether a draft (speculative) model owns the layer; a group holds draft
    layers when any member does."""

    mutually_exclusive: ClassVar[tuple[tuple[str, ...], ...]] = ()
    """Groups of optional fields of which at most one may be set (SPEC-VALID-1)."""

    def __post_init__(self) -> None:
        _require(not _is_base(type(self)), self,
                 "is an abstract base; construct one of the spec kinds")
        _positive(self, "block_size", "block_stride_alignment")
        for names in self.mutually_exclusive:
            set_names = [n for n in names if getattr(self, n) is not None]
            _require(len(set_names) <= 1, self, f"at most one of {', '.join(names)} may be set", tuple(set_names))

    @property
    def page_size_bytes(self) -> int:
        """Bytes of one block of one layer (SPEC-PAGE-1)."""
        raise NotImplementedError(f"{type(self).__name__} is not a concrete spec kind")


@dataclasses.dataclass(frozen=True, kw_only=True)
class AttentionSpec(KVCacheSpec):
    """Fields of every attention cache; not a kind of its own (SPEC-PAGE-1)."""

    dcp_sharded: bool = allocation(True, relied_on_by=cite.ATTENTIONSPEC_DCP_SHARDED)
    max_tp_shards: int | None = layout(None, relied_on_by=cite.ATTENTIONSPEC_MAX_TP_SHARDS)
    """Distinct shards of the page's heads across tensor parallelism; ranks
    beyond hold replicas of the same bytes."""
    num_kv_heads: int = layout(relied_on_by=cite.ATTENTIONSPEC_NUM_KV_HEADS)
    head_size: int = layout(relied_on_by=cite.ATTENTIONSPEC_HEAD_SIZE)
    dtype: KVDtype = layout(relied_on_by=cite.ATTENTIONSPEC_DTYPE)
    head_size_v: int | None = layout(None, relied_on_by=cite.ATTN_PAGE)
    """Value head size; None means equal to ``head_size``."""
    kv_quant_mode: KVQuantMode = layout(KVQuantMode.NONE,
        relied_on_by=cite.ATTENTIONSPEC_KV_QUANT_MODE)
    page_size_padded: int | None = layout(None, relied_on_by=cite.ATTENTIONSPEC_PAGE_SIZE_PADDED)
    """Physical page size when padded beyond the content."""
    num_head_slots: int | None = layout(None, relied_on_by=cite.ATTENTIONSPEC_NUM_HEAD_SLOTS)
    """Head slots per page when packing differs from one slot per KV head."""
    state_content_bytes: int | None = layout(None,
        relied_on_by=cite.ATTENTIONSPEC_STATE_CONTENT_BYTES)
    """Bytes per (head slot, state) cell when packed; None: dense K and V."""
    kv_head_major_slots: bool = layout(False, relied_on_by=cite.ATTENTIONSPEC_KV_HEAD_MAJOR_SLOTS)
    tokens_per_state: int = layout(1, relied_on_by=cite.ATTENTIONSPEC_TOKENS_PER_STATE)
    """Tokens compressed into one stored state."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.head_size_v is None:
            object.__setattr__(self, "head_size_v", self.head_size)
        _positive(
            self, "max_tp_shards", "num_kv_heads", "head_size", "num_head_slots",
            "state_content_bytes", "tokens_per_state",
        )
        _require(self.head_size_v is not None and self.head_size_v >= 0, self,
                 lambda: f"head_size_v must be >= 0, got {self.head_size_v!r}")
        _apply_alignment(self)
        if self.page_size_padded is not None:
            _require(self.page_size_padded >= self.unpadded_page_size_bytes, self,
                     lambda: f"page_size_padded {self.page_size_padded} is smaller than the "
                     f"page content {self.unpadded_page_size_bytes}", ("page_size_padded",))

    @property
    def num_heads(self) -> int:
        """Head slots of a page."""
        return self.num_kv_heads if self.num_head_slots is None else self.num_head_slots

    @property
    def num_states(self) -> int:
        """States stored per block."""
        return self.block_size // self.tokens_per_state

    @property
    def state_content_size_bytes(self) -> int:
        """Bytes per (head slot, state) cell."""
        if self.state_content_bytes is not None:
            return self.state_content_bytes
        head_size_v = self.head_size if self.head_size_v is None else self.head_size_v
        itemsize: int = self.dtype.itemsize
        return (self.head_size + head_size_v) * itemsize

    @property
    def unpadded_page_size_bytes(self) -> int:
        """Content bytes of a page: heads x states x cell bytes (SPEC-PAGE-1)."""
        return self.num_heads * self.num_states * self.state_content_size_bytes

    @property
    def page_size_bytes(self) -> int:
        """SPEC-PAGE-1: the padded page if padded, else the content."""
        if self.page_size_padded is not None:
            return self.page_size_padded
        return self.unpadded_page_size_bytes


@dataclasses.dataclass(frozen=True, kw_only=True)
class FullAttentionSpec(AttentionSpec):
    """Full (global) attention: blocks for every token (ROLE-TABLE-1)."""

    sliding_window: int | None = annotation(None, AnnotationRule.COMMON,
        relied_on_by=cite.FULLATTENTIONSPEC_SLIDING_WINDOW)
    """Mask window of a local layer allocated as full attention."""
    attention_chunk_size: int | None = annotation(None, AnnotationRule.COMMON,
        advisory=cite.FULLATTENTIONSPEC_ATTENTION_CHUNK_SIZE)
    """Mask chunk of a chunked-local layer allocated as full attention."""
    non_causal: bool = capability(advisory=cite.FULLATTENTIONSPEC_NON_CAUSAL)
    """The group serves non-causal (e.g. prefix-LM) attention."""

    mutually_exclusive: ClassVar[tuple[tuple[str, ...], ...]] = (
        ("sliding_window", "attention_chunk_size"),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        _positive(self, "sliding_window", "attention_chunk_size")


def _apply_alignment(spec: AttentionSpec) -> None:
    """SPEC-PAGE-2: with ``alignment`` set (MLA kinds), ``page_size_padded`` is
    derived: the content rounded up to the alignment, or None when aligned."""
    alignment = getattr(spec, "alignment", None)
    if alignment is None:
        return
    _require(alignment >= 1, spec, lambda: f"alignment must be >= 1, got {alignment!r}")
    content = spec.unpadded_page_size_bytes
    padded = round_up(content, alignment)
    object.__setattr__(spec, "page_size_padded", None if padded == content else padded)


@dataclasses.dataclass(frozen=True, kw_only=True)
class MLAAttentionSpec(FullAttentionSpec):
    """Multi-head latent attention: one latent vector per token (ROLE-TABLE-1)."""

    head_size_v: int | None = layout(0, relied_on_by=cite.ATTN_PAGE)
    cache_dtype_str: str | None = layout(None, relied_on_by=cite.MLAATTENTIONSPEC_CACHE_DTYPE_STR)
    """The cache's storage format name (e.g. ``fp8_ds_mla``)."""
    topk_buffer_width: int | None = layout(None, advisory=cite.MLAATTENTIONSPEC_TOPK_BUFFER_WIDTH)
    """Width of the sparse top-k index buffer the group shares."""
    alignment: int | None = layout(None, relied_on_by=cite.ALIGNMENT)
    """Byte multiple a page is padded to (SPEC-PAGE-2)."""
    model_version: str | None = layout(None, relied_on_by=cite.MLAATTENTIONSPEC_MODEL_VERSION)
    """Model family tag; one merged spec has one, but it does not keep layers out of a group."""
    cache_role: SparseCacheRole = layout(SparseCacheRole.SPARSE,
        relied_on_by=cite.MLAATTENTIONSPEC_CACHE_ROLE)
    """What the cache holds (sparse-attention latents or the indexer's keys); layers of
    different roles keep their own specs but may share a group's block table."""
    is_index_group_leader: bool = layout(False,
        advisory=cite.MLAATTENTIONSPEC_IS_INDEX_GROUP_LEADER)
    """Whether the layer computes the top-k its index-group followers reuse."""
    non_causal_multi_token_decode: bool = capability(advisory=cite.NON_CAUSAL_MTD)
    """The group flattens a non-causal query block into decode rows (DSpark drafts)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        _positive(self, "topk_buffer_width")


@dataclasses.dataclass(frozen=True, kw_only=True)
class HiddenStateCacheSpec(MLAAttentionSpec):
    """A layer's hidden-state cache (hidden-state extraction), stored in an MLA
    page: a kind of its own, never merged with MLA attention layers (MERGE-KIND-1,
    ERROR-KIND-1); a per-member group may hold both (PLAN-TYPE-1), and with several
    groups it is alone (PLAN-HIDDEN-1). No fields beyond MLA's."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class RSWASpec(FullAttentionSpec):
    """Reference sliding window: the prompt stays, generated tokens slide."""

    rswa_window: int = allocation(relied_on_by=cite.RSWASPEC_RSWA_WINDOW)

    def __post_init__(self) -> None:
        super().__post_init__()
        _positive(self, "rswa_window")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SinkFullAttentionSpec(FullAttentionSpec):
    """Full attention with static sink tokens held in reserved blocks."""

    sink_len: int | None = allocation(None, relied_on_by=cite.SINKFULLATTENTIONSPEC_SINK_LEN)
    """Sink tokens; the group's block manager reserves blocks for them."""

    def __post_init__(self) -> None:
        super().__post_init__()
        _positive(self, "sink_len")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SlidingWindowSpec(AttentionSpec):
    """Sliding-window attention: blocks below the window are freed."""

    sliding_window: int = allocation(relied_on_by=cite.SLIDINGWINDOWSPEC_SLIDING_WINDOW)
    extra_retained_tokens: int = allocation(0,
        relied_on_by=cite.SLIDINGWINDOWSPEC_EXTRA_RETAINED_TOKENS)
    """Tokens kept below the window for multi-module speculative decoding."""

    def __post_init__(self) -> None:
        super().__post_init__()
        _positive(self, "sliding_window")
        _require(self.extra_retained_tokens >= 0, self,
                 lambda: f"extra_retained_tokens must be >= 0, got {self.extra_retained_tokens!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class CircularBufferSpec(AttentionSpec):
    """A ring of raw keys still being compressed: one block per request whose
    ``block_size`` is the ring capacity. No fields beyond attention's; its
    manager (one block per request, never prefix-cached) is what sets it apart."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class SlidingWindowMLASpec(SlidingWindowSpec):
    """Sliding-window attention over an MLA latent cache."""

    head_size_v: int | None = layout(0, relied_on_by=cite.ATTN_PAGE)
    cache_dtype_str: str | None = layout(None, advisory=cite.SLIDINGWINDOWMLASPEC_CACHE_DTYPE_STR)
    alignment: int | None = layout(None, relied_on_by=cite.ALIGNMENT)
    model_version: str | None = layout(None, advisory=cite.SLIDINGWINDOWMLASPEC_MODEL_VERSION)
    bounded_replay: bool = allocation(False, relied_on_by=cite.SLIDINGWINDOWMLASPEC_BOUNDED_REPLAY)
    """Prefix reuse replays a bounded window instead of caching it."""
    non_causal_multi_token_decode: bool = capability(advisory=cite.NON_CAUSAL_MTD)

    def __post_init__(self) -> None:
        super().__post_init__()



@dataclasses.dataclass(frozen=True, kw_only=True)
class ChunkedLocalAttentionSpec(AttentionSpec):
    """Chunked local attention: a token sees its own chunk only."""

    attention_chunk_size: int = allocation(relied_on_by=cite.CHUNKEDLOCALATTENTIONSPEC_ATTENTION_CHUNK_SIZE)

    def __post_init__(self) -> None:
        super().__post_init__()
        _positive(self, "attention_chunk_size")


@dataclasses.dataclass(frozen=True, kw_only=True)
class CrossAttentionSpec(AttentionSpec):
    """Decoder-to-encoder attention: the cache holds encoder states."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class EncoderOnlyAttentionSpec(AttentionSpec):
    """Encoder self-attention: described, but needs no cache memory."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class MambaSpec(KVCacheSpec):
    """State-space layer: one fixed-size state per request (SPEC-PAGE-3)."""

    shapes: tuple[tuple[int, ...], ...] = layout(relied_on_by=cite.MAMBASPEC_SHAPES)
    dtypes: tuple[KVDtype, ...] = layout(relied_on_by=cite.MAMBASPEC_DTYPES)
    state_alignment: int = layout(1, relied_on_by=cite.MAMBASPEC_STATE_ALIGNMENT)
    """Byte alignment of each state within a page."""
    page_size_padded: int | None = layout(None, relied_on_by=cite.MAMBASPEC_PAGE_SIZE_PADDED)
    mamba_type: MambaType = layout(MambaType.MAMBA2, relied_on_by=cite.MAMBASPEC_MAMBA_TYPE)
    mamba_cache_mode: str = allocation("none", relied_on_by=cite.MAMBASPEC_MAMBA_CACHE_MODE)
    num_speculative_blocks: int = allocation(0, relied_on_by=cite.MAMBASPEC_NUM_SPECULATIVE_BLOCKS)
    num_prefill_checkpoint_blocks: int = allocation(0,
        relied_on_by=cite.MAMBASPEC_NUM_PREFILL_CHECKPOINT_BLOCKS)
    """Extra state blocks a request holds for prefill checkpoints (align mode)."""
    prefill_checkpoint_alignment: int | None = allocation(None,
        relied_on_by=cite.MAMBASPEC_PREFILL_CHECKPOINT_ALIGNMENT)
    """Token granularity at which a prefill may export a reusable state
    checkpoint; None: no checkpoints."""
    num_heads: int = layout(1, advisory=cite.MAMBASPEC_NUM_HEADS)
    """Head slots of the page's logical ``[blocks, heads, states, bytes]`` view."""
    tokens_per_state: int = layout(-1, advisory=cite.MAMBASPEC_TOKENS_PER_STATE)
    """Tokens per stored state in that view; -1 (the default): one state per block."""
    tp_replicated: bool = allocation(False, relied_on_by=cite.MAMBASPEC_TP_REPLICATED)

    def __post_init__(self) -> None:
        super().__post_init__()
        _positive(self, "state_alignment", "num_heads", "prefill_checkpoint_alignment")
        _require(self.tokens_per_state == -1 or self.tokens_per_state >= 1, self,
                 lambda: f"tokens_per_state must be -1 or >= 1, got {self.tokens_per_state!r}")
        _require(self.num_prefill_checkpoint_blocks >= 0, self,
                 lambda: "num_prefill_checkpoint_blocks must be >= 0, got "
                 f"{self.num_prefill_checkpoint_blocks!r}")
        _require(len(self.shapes) == len(self.dtypes) and len(self.shapes) >= 1, self,
                 lambda: f"shapes and dtypes must be non-empty and of equal length, got "
                 f"{len(self.shapes)} and {len(self.dtypes)}")
        _require(all(d >= 1 for shape in self.shapes for d in shape), self,
                 lambda: f"state dimensions must be >= 1, got {self.shapes!r}")
        _require(self.num_speculative_blocks >= 0, self,
                 lambda: f"num_speculative_blocks must be >= 0, got {self.num_speculative_blocks!r}")
        if self.page_size_padded is not None:
            _require(self.page_size_padded >= self.unpadded_page_size_bytes, self,
                     lambda: f"page_size_padded {self.page_size_padded} is smaller than the "
                     f"page content {self.unpadded_page_size_bytes}", ("page_size_padded",))
            _require(self.page_size_padded % self.state_alignment == 0, self,
                     "page_size_padded must be a multiple of state_alignment")

    @property
    def unpadded_page_size_bytes(self) -> int:
        """SPEC-PAGE-3: each state rounded up to ``state_alignment``, summed."""
        total = 0
        for shape, dtype in zip(self.shapes, self.dtypes, strict=True):
            elements = 1
            for dim in shape:
                elements *= dim
            total += round_up(elements * dtype.itemsize, self.state_alignment)
        return total

    @property
    def page_size_bytes(self) -> int:
        """SPEC-PAGE-3: the padded page if padded, else the content."""
        if self.page_size_padded is not None:
            return self.page_size_padded
        return self.unpadded_page_size_bytes


@dataclasses.dataclass(frozen=True, kw_only=True)
class HiSparseHotSpec(KVCacheSpec):
    """HiSparse's per-request hot cache on the device: a fixed number of pages
    of a fixed size per request, never prefix-cached (SPEC-PAGE-4)."""

    page_size: int = layout(relied_on_by=cite.HISPARSEHOTSPEC_PAGE_SIZE)
    """Bytes of one page, given, not derived from ``block_size``."""
    blocks_per_request: int = allocation(relied_on_by=cite.HISPARSEHOTSPEC_BLOCKS_PER_REQUEST)
    """Blocks every request holds, whatever its length."""

    def __post_init__(self) -> None:
        super().__post_init__()
        _positive(self, "page_size", "blocks_per_request")

    @property
    def page_size_bytes(self) -> int:
        """SPEC-PAGE-4: the given page size."""
        return self.page_size


@dataclasses.dataclass(frozen=True, kw_only=True)
class HiSparseResidentSpec(KVCacheSpec):
    """Reclaimable device-resident pages of a host-backed HiSparse cache: blocks
    for the tokens in flight, of a fixed page size (SPEC-PAGE-4)."""

    page_size: int = layout(relied_on_by=cite.HISPARSERESIDENTSPEC_PAGE_SIZE)
    """Bytes of one page, given, not derived from ``block_size``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        _positive(self, "page_size")

    @property
    def page_size_bytes(self) -> int:
        """SPEC-PAGE-4: the given page size."""
        return self.page_size


SPEC_KINDS: tuple[type[KVCacheSpec], ...] = (
    FullAttentionSpec,
    MLAAttentionSpec,
    SlidingWindowSpec,
    SlidingWindowMLASpec,
    ChunkedLocalAttentionSpec,
    RSWASpec,
    SinkFullAttentionSpec,
    CrossAttentionSpec,
    EncoderOnlyAttentionSpec,
    MambaSpec,
    HiddenStateCacheSpec,
    CircularBufferSpec,
    HiSparseHotSpec,
    HiSparseResidentSpec,
)
"""Every concrete spec kind, in catalogue order (ROLE-TABLE-1)."""

BASE_KINDS: tuple[type[KVCacheSpec], ...] = (KVCacheSpec, AttentionSpec)
"""Abstract bases: their fields are classified, they are never a layer's spec."""

CONTAINER_KINDS: dict[str, str] = {
    "UniformTypeKVCacheSpecs": (
        "a group's spec that keeps one spec per member layer (vLLM); it is what "
        "grouping returns, never a layer's spec or a merge's input, so it is outside "
        "the merge contract: GROUP-MERGED-1 checks the member specs it holds "
        "(spec/SPEC.md, 'Containers')"
    ),
}
"""Engine classes that are subclasses of the engine's base spec but not spec
kinds of the contract, by class name, with the reason (ROLE-COVER-1)."""

KINDS_BY_NAME: dict[str, type[KVCacheSpec]] = {k.__name__: k for k in SPEC_KINDS}


def spec_fields(kind: type[KVCacheSpec] | KVCacheSpec) -> tuple[dataclasses.Field[Any], ...]:
    """The fields of a spec kind, in declaration order."""
    return dataclasses.fields(kind)
