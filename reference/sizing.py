"""Sizing a plan: blocks, tensors and block tables (chapter PLAN of ``spec/SPEC.md``).

:func:`size_plan` turns the groups of :func:`kvcontract.reference.planning.plan_groups` and a
memory budget into a block count and the tensors that back every layer (PLAN-SIZE-1,
PLAN-TENSOR-1); :func:`plan` groups and sizes at once. What one request holds and how wide
its block tables are under decode-context parallelism are informative figures of the same
planner (``kvcontract plan`` prints them).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from kvcontract.reference.merge import GroupingError
from kvcontract.reference.planning import PlanGroup, plan_groups
from kvcontract.reference.roles import AnnotationRule, Role, role_of, rule_of
from kvcontract.reference.specs import (
    AttentionSpec,
    ChunkedLocalAttentionSpec,
    CircularBufferSpec,
    HiSparseHotSpec,
    HiSparseResidentSpec,
    KVCacheSpec,
    MambaSpec,
    SlidingWindowSpec,
    round_up,
)

# -- PLAN-SIZE-1, PLAN-TENSOR-1: blocks and tensors --------------------------------------


@dataclasses.dataclass(frozen=True)
class PlanTensor:
    """The placement of same-spec layers in the one backing allocation of ``size_bytes``:
    layer ``l``'s page of block ``b`` starts at ``offset + l * layer_stride + b * block_stride``
    (layer-outermost: each layer a contiguous run of blocks)."""

    layer_names: tuple[str, ...]
    size_bytes: int
    page_size_bytes: int
    offset: int
    layer_stride: int
    block_stride: int

    def end(self, num_blocks: int) -> int:
        """One past the last byte of the last layer's last page (PLAN-SIZE-1)."""
        if not self.layer_names or num_blocks == 0:
            return self.offset
        return (self.offset + (len(self.layer_names) - 1) * self.layer_stride
                + (num_blocks - 1) * self.block_stride + self.page_size_bytes)


@dataclasses.dataclass(frozen=True)
class KVCachePlan:
    """A model's KV cache: groups, the bytes one block costs across a group's layers, the
    number of blocks the budget buys, and the tensors backing every layer."""

    groups: tuple[PlanGroup, ...]
    memory_bytes: int
    bytes_per_block: int
    num_blocks: int
    tensors: tuple[PlanTensor, ...]

    @property
    def used_bytes(self) -> int:
        return self.bytes_per_block * self.num_blocks

    def tokens_per_group(self) -> list[int]:
        """Tokens the blocks hold in each group (every group draws from one block pool)."""
        return [self.num_blocks * g.block_size for g in self.groups]


def bytes_per_block(groups: Sequence[PlanGroup], block_outermost: bool = False) -> int:
    """PLAN-SIZE-1: the bytes one block ID costs: the largest group's pages, since every group's
    tensors start at the same byte and a block ID belongs to one group at a time; layer-outermost,
    each page rounded up to its block-stride alignment; block-outermost, the packed block
    rounded up to every alignment at once."""
    if not block_outermost:
        return max((sum(round_up(s.page_size_bytes, s.block_stride_alignment or 1) for _, s in g.layer_specs)
                    for g in groups), default=0)
    largest = max((sum(s.page_size_bytes for _, s in g.layer_specs) for g in groups), default=0)
    alignment = math.lcm(*(s.block_stride_alignment or 1 for g in groups for _, s in g.layer_specs))
    return round_up(largest, alignment) if largest else 0


def layout_key(spec: KVCacheSpec) -> tuple[object, ...]:
    """What decides whether two layers of a group share a tensor: their spec, up to the flags a
    group unions over its members (ANNOTATION fields merged by ``ANY``: ``is_draft``), which say
    who owns a layer, not what it holds (vLLM 0.34.0 leaves ``is_draft`` out of its specs'
    equality, which keys its tensors)."""
    kind = type(spec)
    names = _KEYED.get(kind)
    if names is None:
        names = _KEYED[kind] = tuple(f.name for f in dataclasses.fields(spec)
                                     if not (role_of(f) is Role.ANNOTATION and rule_of(f) is AnnotationRule.ANY))
    return (kind, *(getattr(spec, n) for n in names))


_KEYED: dict[type, tuple[str, ...]] = {}


def size_plan(groups: Sequence[PlanGroup], memory_bytes: int, block_outermost: bool = False) -> KVCachePlan:
    """PLAN-SIZE-1 and PLAN-TENSOR-1: as many blocks as the budget buys, and per group one
    tensor per distinct layer layout (:func:`layout_key`), holding those layers.

    raises: GroupingError
    post: __return__.used_bytes <= memory_bytes
    """
    if memory_bytes < 0:
        raise GroupingError(f"the memory budget must be >= 0 bytes, got {memory_bytes}")
    if any(not g.layer_specs for g in groups):
        raise GroupingError("a group needs at least one layer (PLAN-TENSOR-1)")
    per_block = bytes_per_block(groups, block_outermost)
    if not groups:
        return KVCachePlan((), memory_bytes, 0, 1, ())  # attention-free: the pool's null block only
    if per_block <= 0:
        raise GroupingError(f"the groups' pages add up to {per_block} bytes a block; a block needs some")
    num_blocks = memory_bytes // per_block
    tensors = []
    for g in groups:  # every group's tensors start at byte 0: a block ID has one owner
        by_layout: dict[tuple[object, ...], tuple[KVCacheSpec, list[str]]] = {}
        for name, spec in g.layer_specs:
            by_layout.setdefault(layout_key(spec), (spec, []))[1].append(name)
        offset = 0
        for spec, names in by_layout.values():
            page = spec.page_size_bytes
            if block_outermost:  # each block: every layer's page side by side
                tensors.append(PlanTensor(tuple(names), per_block * num_blocks, page, offset, page, per_block))
                offset += len(names) * page
                continue
            stride = round_up(page, spec.block_stride_alignment or 1)
            tensors.append(PlanTensor(tuple(names), per_block * num_blocks, page, offset, stride * num_blocks, stride))
            offset += len(names) * stride * num_blocks
    return KVCachePlan(tuple(groups), memory_bytes, per_block, num_blocks, tuple(tensors))


def plan(table: Mapping[str, KVCacheSpec], memory_bytes: int, *, hybrid: bool = True,
         block_outermost: bool = False) -> KVCachePlan:
    """The reference's plan of ``table`` within ``memory_bytes`` (chapter PLAN).

    raises: GroupingError
    post: sorted(n for t in __return__.tensors for n in t.layer_names) == sorted(table)
    """
    return size_plan(plan_groups(table, hybrid=hybrid, block_outermost=block_outermost), memory_bytes,
                     block_outermost)


# -- capacity: what one request holds (informative; chapter PLAN's introduction) ------------


def blocks_per_request(spec: KVCacheSpec, max_model_len: int, in_flight_tokens: int,
                       dcp_world_size: int = 1) -> int:
    """Blocks one request of ``max_model_len`` tokens holds at most in a layer of ``spec``, with
    ``in_flight_tokens`` scheduled but not yet computed: a full-attention layer every token's
    block; a sliding window its window, the tokens kept below it and those in flight, plus one
    block for a window that starts mid-block; a chunked-local layer one chunk and those in
    flight; a state (Mamba, circular buffer) its state blocks; an encoder-only layer none
    (vLLM 0.34.0's ``max_memory_usage_bytes`` of each kind, on one of ``dcp_world_size`` ranks:
    a DCP-sharded full-attention layer holds its share of the tokens)."""
    def blocks(tokens: int) -> int:
        return -(-tokens // spec.block_size)

    if isinstance(spec, SlidingWindowSpec):
        held = spec.sliding_window - 1 + spec.extra_retained_tokens + in_flight_tokens
        return blocks(min(held, max_model_len)) + 1
    if isinstance(spec, ChunkedLocalAttentionSpec):
        return blocks(min(spec.attention_chunk_size + in_flight_tokens, max_model_len))
    if isinstance(spec, CircularBufferSpec):
        return 1
    if isinstance(spec, MambaSpec):
        if spec.mamba_cache_mode == "align":
            return 2 + spec.num_speculative_blocks + spec.num_prefill_checkpoint_blocks
        return 1 + spec.num_speculative_blocks
    if isinstance(spec, HiSparseHotSpec):
        return spec.blocks_per_request
    if isinstance(spec, HiSparseResidentSpec):
        return blocks(min(in_flight_tokens, max_model_len))
    if isinstance(spec, AttentionSpec) and type(spec).__name__ == "EncoderOnlyAttentionSpec":
        return 0
    share = -(-max_model_len // dcp_world_size) if spec.dcp_sharded else max_model_len
    return blocks(share)


def request_blocks(groups: Sequence[PlanGroup], max_model_len: int, in_flight_tokens: int,
                   dcp_world_size: int = 1) -> list[int]:
    """Per group, the blocks one request holds at most: the most any of its layers needs
    (every layer of a group shares its block IDs)."""
    return [max(blocks_per_request(s, max_model_len, in_flight_tokens, dcp_world_size) for _, s in g.layer_specs)
            for g in groups]


# -- block tables under decode-context parallelism (informative) ----------------------------


def tokens_per_block(spec: KVCacheSpec, dcp_world_size: int = 1) -> int:
    """Tokens one block spans when DCP shards token positions over ``dcp_world_size`` ranks: a
    DCP-sharded layer's block holds every rank's share (vLLM 0.34.0's
    ``resolve_dcp_kv_block_size``); a replicated one (state layers) its own block size."""
    return spec.block_size * (dcp_world_size if spec.dcp_sharded else 1)


def block_table_width(spec: KVCacheSpec, max_model_len: int, dcp_world_size: int = 1) -> int:
    """Block-table entries one request of ``max_model_len`` tokens needs in a layer of ``spec``
    (vLLM 0.34.0's ``max_num_blocks_per_req``): a block per ``tokens_per_block`` tokens; a
    Mamba layer its resident states (every position's in ``align`` mode, plus the speculative
    ones); a ring one block; a HiSparse hot cache its fixed blocks. Members of one group need
    one width (PLAN-TYPE-1 keeps them so)."""
    if isinstance(spec, MambaSpec):
        if spec.mamba_cache_mode == "align":
            return -(-max_model_len // spec.block_size) + spec.num_speculative_blocks
        return 1 + spec.num_speculative_blocks
    if isinstance(spec, CircularBufferSpec):
        return 1
    if isinstance(spec, HiSparseHotSpec):
        return spec.blocks_per_request
    return -(-max_model_len // tokens_per_block(spec, dcp_world_size))


def scheduler_block_size(groups: Sequence[PlanGroup], dcp_world_size: int = 1) -> int:
    """The token granularity every group's blocks align to: the least common multiple of the
    groups' tokens per block (vLLM 0.34.0's ``resolve_kv_cache_block_sizes``)."""
    sizes = [tokens_per_block(g.layer_specs[0][1], dcp_world_size) for g in groups]
    return math.lcm(*sizes) if sizes else 0
