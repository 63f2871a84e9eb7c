"""vLLM's Triton MLA kernels behind the harness's backend interface (NUM-DISPATCH-1).

Two kernels of ``vllm.v1.attention.ops.triton_decode_attention``:

* ``decode_attention_fwd`` runs one program per query row and reads that
  row's key extent from its ``seq_lens`` entry. It serves single-token decode
  and non-causal draft blocks (every row of the block gets the request's
  ``L``), and, as vLLM's ``TritonMLAImpl`` does, causal rows as per-row
  extents ``L - n + 1 + t`` (used here for windowed batches, since the
  window is applied to each row's extent).
* ``decode_attention_fwd_verify`` runs causal verification blocks of a
  uniform ``qlen``; the adapter launches it once per distinct ``qlen``.

Without a GPU both run under Triton's interpreter: :func:`load_kernels` sets
``TRITON_INTERPRET=1`` and ``CUDA_VISIBLE_DEVICES=""`` (so that vLLM keeps
Triton enabled) around the import of vLLM, and restores them after. bfloat16
storage runs there through :func:`~kvcontract.kernels.triton_bf16.bfloat16_interpreter`,
which gives the interpreter bfloat16 arithmetic. On a GPU the kernels are
compiled, and the declared arithmetic is TF32 (``tl.dot`` takes float32
operands as TF32 by default).

Trailing padding requests are launched as CUDA-graph padding is: scratch
rows with a sequence length of 0 whose outputs are dropped. Split-KV
workspaces are NaN-poisoned, as a reused shared workspace holds stale data.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import math
import os
import sys
import warnings
from types import ModuleType

import torch

from .cases import Kind, MLABatch

__all__ = [
    "BackendUnavailable",
    "VllmTritonBackend",
    "load_kernels",
    "prepare_triton_environment",
    "restore_environment",
]

KERNEL_MODULE = "vllm.v1.attention.ops.triton_decode_attention"
# Keys per split-KV program: far below vLLM's 512 so that small test cases
# exercise the split merge (stage 2) too.
MIN_KEYS_PER_SPLIT = 32
MAX_KV_SPLITS = 8
MLA_IMPL_KEYS_PER_SPLIT = 512  # vllm/v1/attention/backends/mla/triton_mla.py
VERIFY_MIN_SPLIT_LEN = 128  # the verify kernel's own minimum split length
MAX_VERIFY_SPLITS = 4

_WARMED: set[tuple[bool, bool, bool]] = set()

ROUTE_CAUSAL_AS_NONCAUSAL = "causal-as-noncausal"
ROUTE_NONCAUSAL_AS_CAUSAL = "noncausal-as-causal"


class BackendUnavailable(RuntimeError):
    """The backend cannot run here: vLLM or Triton missing, or mis-initialised (NUM-DISPATCH-1)."""


def prepare_triton_environment() -> dict[str, str | None]:
    """Select Triton's interpreter when there is no GPU (NUM-DISPATCH-1).

    Call before vLLM is first imported: Triton decides between compiling and
    interpreting when a kernel is decorated, and vLLM disables Triton at
    import when it sees no active driver unless ``CUDA_VISIBLE_DEVICES`` is
    empty. Returns the previous values, for :func:`restore_environment`.
    """
    wanted = {"VLLM_LOGGING_LEVEL": os.environ.get("VLLM_LOGGING_LEVEL", "WARNING")}
    if not torch.cuda.is_available():
        wanted.update(TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="")
    previous = {name: os.environ.get(name) for name in wanted}
    os.environ.update(wanted)
    return previous


def restore_environment(previous: dict[str, str | None]) -> None:
    """Undo :func:`prepare_triton_environment` (NUM-DISPATCH-1)."""
    for name, value in previous.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@functools.cache
def load_kernels() -> ModuleType:
    """vLLM's ``triton_decode_attention`` module, interpreted without a GPU (NUM-DISPATCH-1).

    The interpreter environment is set only around the import, so it does not
    leak into the rest of the process. Raises :class:`BackendUnavailable`
    when vLLM cannot be imported, or was imported earlier in a way that leaves
    its Triton kernels unusable here.
    """
    already_imported = KERNEL_MODULE in sys.modules
    previous = prepare_triton_environment()
    try:
        module = importlib.import_module(KERNEL_MODULE)
        triton_utils = importlib.import_module("vllm.triton_utils")
    except Exception as exc:  # any import failure makes the backend unavailable
        raise BackendUnavailable(f"cannot import {KERNEL_MODULE}: {type(exc).__name__}: {exc}") from exc
    finally:
        restore_environment(previous)
    if not getattr(triton_utils, "HAS_TRITON", False):
        raise BackendUnavailable(
            "vLLM disabled Triton when it was first imported (no active driver, and "
            "CUDA_VISIBLE_DEVICES was not empty); run in a fresh process"
        )
    if not torch.cuda.is_available():
        kernel = module._fwd_grouped_kernel_stage1
        if type(kernel).__name__ != "InterpretedFunction":
            when = "before" if already_imported else "without"
            raise BackendUnavailable(
                f"no GPU, and vLLM's Triton kernels were set up {when} TRITON_INTERPRET=1; "
                "run in a fresh process"
            )
    return module


def _next_power_of_2(value: int) -> int:
    return 1 << max(0, value - 1).bit_length()


def decode_kv_splits(max_keys: int) -> int:
    """Split count for ``decode_attention_fwd``, a power of 2 as vLLM picks it (NUM-POISON-1: merges are exercised)."""
    return min(MAX_KV_SPLITS, _next_power_of_2(max(1, max_keys // MIN_KEYS_PER_SPLIT)))


def mla_impl_kv_splits(max_keys: int) -> int:
    """Split count as ``TritonMLAImpl`` picks it: a power of 2 of ``max_keys // 512``, capped by 2 per SM.

    Without a GPU there is no SM count; the cap is then not applied.
    """
    ideal = _next_power_of_2(max(1, max_keys // MLA_IMPL_KEYS_PER_SPLIT))
    if torch.cuda.is_available():
        return min(ideal, 2 * torch.cuda.get_device_properties(0).multi_processor_count)
    return ideal


def verify_kv_splits(max_keys: int) -> int:
    """Split cap for ``decode_attention_fwd_verify``, whose splits hold at least 128 keys (NUM-POISON-1)."""
    return max(1, min(MAX_VERIFY_SPLITS, math.ceil(max_keys / VERIFY_MIN_SPLIT_LEN)))


class VllmTritonBackend:
    """vLLM's Triton MLA kernels, routed per request kind (NUM-DISPATCH-1).

    ``route="kernels"``: decode and draft rows through ``decode_attention_fwd``,
    verify blocks through ``decode_attention_fwd_verify``; ``route="rows"``:
    every row through ``decode_attention_fwd`` with per-row extents (vLLM's
    ``TritonMLAImpl``). ``misroute`` deliberately dispatches causal blocks to
    the non-causal path (``"causal-as-noncausal"``) or draft blocks to the
    causal verify kernel (``"noncausal-as-causal"``), for NUM-DISPATCH-1's
    misrouting check. Prefill is not served: vLLM runs it elsewhere.
    """

    modes = frozenset(
        {"decode", "verify", "draft", "window-causal", "window-noncausal", "padding"}
    )

    def __init__(
        self,
        name: str,
        *,
        route: str = "kernels",
        misroute: str | None = None,
        mla_impl: bool = False,
        upcast: bool = False,
        gpu_sums: bool = False,
    ) -> None:
        if route not in ("kernels", "rows"):
            raise ValueError(f"unknown route {route!r}")
        if misroute not in (None, ROUTE_CAUSAL_AS_NONCAUSAL, ROUTE_NONCAUSAL_AS_CAUSAL):
            raise ValueError(f"unknown misroute {misroute!r}")
        self.name = name
        self.route = "rows" if mla_impl else route
        self.misroute = misroute
        self.mla_impl = mla_impl
        self.upcast = upcast
        self.gpu_sums = gpu_sums
        self.description = "vLLM Triton MLA kernels" + (
            " driven as TritonMLAImpl.forward_mqa (per-row extents, 512 keys per split, "
            "LSE in the query dtype)" if mla_impl else
            " (per-row extents)" if route == "rows" else ""
        ) + (", inputs upcast to float32 (a float32-accumulating copy)" if upcast else "") + (
            ", 16-bit tl.sum as a rounded tree (GPU-faithful)" if gpu_sums else ""
        ) + (f", deliberately misrouted {misroute}" if misroute else "")

    @property
    def arithmetic(self) -> str:
        """Declared arithmetic (NUM-TOL-1): tensor cores take float32 as TF32 on a GPU."""
        base = "tf32" if torch.cuda.is_available() else ("float32" if self.upcast else "mixed")
        return base + ("+lse-storage" if self.mla_impl else "")

    def unavailable_reason(self, dtype: str) -> str | None:
        """Why the backend cannot run ``dtype`` here, or None."""
        try:
            load_kernels()
        except BackendUnavailable as exc:
            return str(exc)
        return None

    def run(self, batch: MLABatch, out: torch.Tensor, lse: torch.Tensor) -> None:
        """Compute ``batch`` into ``out`` ``[T, H, R]`` and ``lse`` ``[T, H]``."""
        interpreted = batch.device.type != "cuda"
        emulate = interpreted and (batch.dtype == torch.bfloat16 or self.gpu_sums)
        if self.upcast and batch.dtype != torch.float32:
            wide = batch.with_query(batch.q.float())
            wide = dataclasses.replace(wide, kv_cache=batch.kv_cache.float())
            wide_out = torch.full_like(out, float("nan"), dtype=torch.float32)
            self._run(wide, wide_out, lse)
            out.copy_(wide_out.to(out.dtype))
            return
        if emulate:
            from .triton_bf16 import bfloat16_interpreter

            self._warm_up(batch)
            with bfloat16_interpreter(sixteen_bit_sums=self.gpu_sums):
                self._run(batch, out, lse)
            return
        self._run(batch, out, lse)

    def _warm_up(self, batch: MLABatch) -> None:
        """Run the batch's kernels once, unpatched, in float32.

        Triton's interpreter prepares a kernel's jit'd callees (``tl.cdiv``) on
        its first launch, and that preparation fails while the bfloat16
        emulation is active; a first launch outside it avoids that.
        """
        key = (batch.num_heads == 1, Kind.VERIFY in batch.kinds, batch.sliding_window is not None)
        if key in _WARMED:
            return
        wide = dataclasses.replace(
            batch.with_query(batch.q.float()), kv_cache=batch.kv_cache.float()
        )
        out = torch.empty(batch.num_tokens, batch.num_heads, batch.kv_lora_rank, device=batch.device)
        self._run(wide, out, torch.empty(batch.num_tokens, batch.num_heads, device=batch.device))
        _WARMED.add(key)

    def _run(self, batch: MLABatch, out: torch.Tensor, lse: torch.Tensor) -> None:
        kernels = load_kernels()
        if any(k is Kind.PREFILL for k in batch.kinds):
            raise NotImplementedError("vllm-triton does not serve prefill")
        row_requests: list[tuple[int, bool]] = []  # (request, causal) via decode_attention_fwd
        verify_requests: dict[int, list[int]] = {}  # qlen -> requests via the verify kernel
        for r, kind in enumerate(batch.kinds):
            if kind is Kind.PADDING:
                continue
            causal, use_verify_kernel = kind.causal, kind is Kind.VERIFY
            if self.misroute == ROUTE_CAUSAL_AS_NONCAUSAL and kind is Kind.VERIFY:
                causal, use_verify_kernel = False, False
            if self.misroute == ROUTE_NONCAUSAL_AS_CAUSAL and kind is Kind.DRAFT:
                causal, use_verify_kernel = True, True
            if self.route == "rows" or batch.sliding_window is not None:
                use_verify_kernel = False  # the verify kernel has no window
            if use_verify_kernel:
                verify_requests.setdefault(len(batch.rows(r)), []).append(r)
            else:
                row_requests.append((r, causal))
        padding = [r for r, kind in enumerate(batch.kinds) if kind is Kind.PADDING]
        with warnings.catch_warnings():
            # The interpreter evaluates masked lanes too (-inf - -inf); their
            # NaNs are discarded by the kernels, as on a GPU.
            warnings.simplefilter("ignore", RuntimeWarning)
            if row_requests:
                self._run_rows(kernels, batch, row_requests, padding, out, lse)
            for qlen, requests in verify_requests.items():
                self._run_verify(kernels, batch, qlen, requests, padding, out, lse)

    def _run_rows(
        self,
        kernels: ModuleType,
        batch: MLABatch,
        requests: list[tuple[int, bool]],
        padding: list[int],
        out: torch.Tensor,
        lse: torch.Tensor,
    ) -> None:
        device = batch.device
        row_index: list[int] = []
        table_index: list[int] = []
        extents: list[int] = []
        for r, causal in requests:
            rows, length = batch.rows(r), batch.seq_len(r)
            for t, row in enumerate(rows):
                row_index.append(row)
                table_index.append(r)
                extents.append(length - len(rows) + 1 + t if causal else length)
        real = len(row_index)
        # CUDA-graph padding: one scratch row per padding request, extent 0.
        table_index += padding
        extents += [batch.seq_len(r) for r in padding]
        q = _gather_queries(batch, row_index, len(padding))
        block_table = batch.block_table[torch.tensor(table_index, device=device)].contiguous()
        seq_lens = torch.tensor(extents, dtype=torch.int32, device=device)
        max_keys = max(extents)
        if batch.sliding_window is not None:
            max_keys = min(max_keys, batch.sliding_window)
        if self.mla_impl:
            splits = mla_impl_kv_splits(max_keys)
            lse_dtype = batch.dtype  # TritonMLAImpl: lse = torch.zeros(..., dtype=q.dtype)
        else:
            splits, lse_dtype = decode_kv_splits(max_keys), torch.float32
        o, row_lse, workspace = _poisoned_buffers(batch, len(extents), splits, lse_dtype)
        paged = batch.kv_cache.unsqueeze(2)
        kernels.decode_attention_fwd(
            q,
            paged,
            paged[..., : batch.kv_lora_rank],
            o,
            row_lse,
            block_table,
            seq_lens,
            workspace,
            splits,
            batch.scale,
            batch.block_size,
            is_mla=True,
            sliding_window=batch.sliding_window,
        )
        _scatter(out, lse, row_index, o[:real], row_lse[:real])

    def _run_verify(
        self,
        kernels: ModuleType,
        batch: MLABatch,
        qlen: int,
        requests: list[int],
        padding: list[int],
        out: torch.Tensor,
        lse: torch.Tensor,
    ) -> None:
        device = batch.device
        row_index = [row for r in requests for row in batch.rows(r)]
        launched = requests + padding
        q = _gather_queries(batch, row_index, qlen * len(padding))
        block_table = batch.block_table[torch.tensor(launched, device=device)].contiguous()
        seq_lens = batch.seq_lens[torch.tensor(launched, device=device)].contiguous()
        splits = verify_kv_splits(int(seq_lens.max()))
        o, row_lse, workspace = _poisoned_buffers(batch, q.shape[0], splits)
        paged = batch.kv_cache.unsqueeze(2)
        kernels.decode_attention_fwd_verify(
            q,
            paged,
            paged[..., : batch.kv_lora_rank],
            o,
            row_lse,
            block_table,
            seq_lens,
            None,
            qlen,
            workspace if splits > 1 else None,  # one split writes o / lse directly
            splits,
            batch.scale,
            batch.block_size,
        )
        real = len(row_index)
        _scatter(out, lse, row_index, o[:real], row_lse[:real])


def _poisoned_buffers(
    batch: MLABatch, rows: int, splits: int, lse_dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """NaN-filled kernel output, LSE (float32 unless told) and split-KV workspace (NUM-POISON-1)."""
    heads, rank, device = batch.num_heads, batch.kv_lora_rank, batch.device
    nan = float("nan")
    return (
        torch.full((rows, heads, rank), nan, dtype=batch.dtype, device=device),
        torch.full((rows, heads), nan, dtype=lse_dtype, device=device),
        torch.full((rows, heads, splits, rank + 1), nan, dtype=torch.float32, device=device),
    )


def _gather_queries(batch: MLABatch, row_index: list[int], scratch_rows: int) -> torch.Tensor:
    """Contiguous query rows ``row_index`` plus ``scratch_rows`` rows of ones."""
    index = torch.tensor(row_index, dtype=torch.int64, device=batch.device)
    q = batch.q.index_select(0, index)
    if scratch_rows:
        scratch = torch.ones(
            scratch_rows, batch.num_heads, batch.head_dim, dtype=batch.dtype, device=batch.device
        )
        q = torch.cat([q, scratch])
    return q.contiguous()


def _scatter(
    out: torch.Tensor, lse: torch.Tensor, row_index: list[int], o: torch.Tensor, row_lse: torch.Tensor
) -> None:
    index = torch.tensor(row_index, dtype=torch.int64, device=out.device)
    out.index_copy_(0, index, o.to(out.dtype))
    lse.index_copy_(0, index, row_lse.to(lse.dtype))
