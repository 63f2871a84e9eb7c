"""Tensor-parallel sizes a model's layer rule depends on, stood in on one process.

A layer reads its tensor-parallel size and rank from the TP group
(``get_tensor_model_parallel_world_size()``/``_rank()``) and the config's
``parallel_config.tensor_parallel_size`` (``ModelConfig.get_num_kv_heads`` divides the KV
heads by it, replicating them when the size exceeds them). The corpus builds a model at TP=N
with ``parallel_config.tensor_parallel_size = N`` and the TP group's size stood in as N,
rank 0 (the world stays one process over gloo: nothing is communicated while a model is
initialised, and a collective called in ``__init__`` fails the build with its reason).

Which models: those whose specs change with TP beyond the KV heads divided evenly
(:func:`depends_on_tp`): an MLA spec (its latent cache is replicated, not divided, and
``max_tp_shards`` bounds the shards), or fewer KV heads than the largest size (heads
replicated across ranks). Tables are named ``<Arch>+tp<N>``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

SIZES = (2, 8)
"""The tensor-parallel sizes built besides 1."""


@contextlib.contextmanager
def tensor_parallel(size: int) -> Iterator[None]:
    """The TP group answers ``size`` (rank 0) inside; the world is untouched."""
    if size == 1:
        yield
        return
    from vllm.distributed import parallel_state

    group = parallel_state.get_tp_group()
    saved = (group.world_size, group.rank_in_group)
    group.world_size, group.rank_in_group = size, 0
    try:
        yield
    finally:
        group.world_size, group.rank_in_group = saved


def depends_on_tp(layers: Sequence[tuple[str, Any]]) -> str | None:
    """Why a table's specs depend on the TP size beyond even division (None: they do not).
    ``layers``: (name, contract spec as JSON) pairs of its TP=1 build."""
    kinds = {str(spec.get("kind", "")) for _, spec in layers}
    if any("mla" in kind.lower() for kind in kinds):
        return "MLA: the latent cache is replicated across TP ranks (max_tp_shards bounds them)"
    heads = {int(spec["num_kv_heads"]) for _, spec in layers
             if isinstance(spec.get("num_kv_heads"), int) and spec["num_kv_heads"] > 0}
    if heads and min(heads) < max(SIZES):
        return f"{min(heads)} KV heads < TP {max(SIZES)}: heads replicated across ranks"
    return None
