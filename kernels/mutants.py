"""Kernel mutants: wrong attention backends with one defect each, and the power table (NUM-TOL-1).

Each mutant is a straightforward float32 MLA kernel (declared arithmetic
``float32``) with one realistic defect. :func:`power_table` runs the default
``kvcontract kernels`` cases (hypothesis-drawn small cases plus the
production-shaped ones) against every mutant in each dtype and records which
modes killed it. A mutant is *killed* in a dtype when at least one row of
every mode its defect touches fails; the table is the evidence that the
tolerance model and the cases have teeth.

The ground truth and the allowance of a case are computed once and shared by
all mutants (they declare the same arithmetic).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

import kvcontract
from kvcontract.reports import ReportHeader, text_table, write_atomic

from .arithmetic import get_arithmetic, round_to_tf32
from .cases import DTYPES, MODES, CaseSpec, MLABatch, build_batch
from .dense import visibility_mask
from .generation import default_case_specs
from .harness import judge_outputs, poisoned_outputs
from .mla import mla_reference
from .tolerance import tolerance

__all__ = [
    "MUTANTS",
    "KernelMutant",
    "MutantBackend",
    "MutantOutcome",
    "PowerTable",
    "default_specs",
    "format_power_table",
    "power_table",
    "write_power_json",
]

ALL_MODES = frozenset(MODES)
CAUSAL_BLOCK_MODES = frozenset({"verify", "prefill", "window-causal"})
WINDOW_MODES = frozenset({"window-causal", "window-noncausal"})
ROW_MODES = ALL_MODES - {"padding"}


@dataclasses.dataclass(frozen=True)
class KernelMutant:
    """One defect: its name, what it does, and the report modes it touches."""

    name: str
    description: str
    touches: frozenset[str]


MUTANTS: tuple[KernelMutant, ...] = (
    KernelMutant(
        "causal-off-by-one-at-block-boundary",
        "a causal row whose last visible key ends a page also sees the first key of the next page",
        CAUSAL_BLOCK_MODES,
    ),
    KernelMutant("oldest-key-missed", "every row skips its oldest visible key", ROW_MODES),
    KernelMutant(
        "page-last-slot-missed", "keys in the last slot of a page are never read", ROW_MODES
    ),
    KernelMutant(
        "wrong-softmax-scale", "softmax scale 1/sqrt(R) instead of 1/sqrt(R + P)", ROW_MODES
    ),
    KernelMutant(
        "value-columns-shifted", "value channel c read from cache channel c + 1", ROW_MODES
    ),
    KernelMutant(
        "value-from-rope", "the last value channel is read from the first rope channel", ROW_MODES
    ),
    KernelMutant("window-keeps-w-plus-1", "a sliding window keeps W + 1 keys", WINDOW_MODES),
    KernelMutant("zeros", "output all zero (LSE correct)", ROW_MODES),
    KernelMutant(
        "uniform-weights", "uniform softmax weights over the visible keys (LSE correct)", ROW_MODES
    ),
    KernelMutant(
        "heads-beyond-16-unwritten",
        "only the first 16 query heads are written (a kernel tiled for 16 heads; MLA has 128, 16-64 per GPU)",
        ROW_MODES,
    ),
    KernelMutant(
        "softmax-without-max",
        "exp of the raw scores, no row maximum subtracted: large logits overflow to inf",
        ROW_MODES,
    ),
    KernelMutant(
        "qk-in-storage-dtype",
        "q.k products rounded to the storage dtype and summed pairwise in it (16-bit storage; "
        "float32 storage: operands silently rounded to TF32 while declaring IEEE float32)",
        ROW_MODES,
    ),
)

_BY_NAME = {m.name: m for m in MUTANTS}


def _pairwise_sum_in(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Sum the last axis pairwise, rounding every partial sum to ``dtype`` (a GPU tree reduction)."""
    x = x.to(dtype)
    while x.shape[-1] > 1:
        if x.shape[-1] % 2:
            x = torch.cat([x, torch.zeros_like(x[..., :1])], dim=-1)
        x = x[..., 0::2] + x[..., 1::2]
    return x[..., 0]


class MutantBackend:
    """A straightforward float32 MLA backend with the defect ``mutant`` (NUM-TOL-1's power check)."""

    modes = ALL_MODES
    arithmetic = "float32"

    def __init__(self, mutant: KernelMutant | str) -> None:
        self.mutant = _BY_NAME[mutant] if isinstance(mutant, str) else mutant
        self.name = f"mutant-{self.mutant.name}"
        self.description = f"kernel mutant: {self.mutant.description}"

    def unavailable_reason(self, dtype: str) -> str | None:
        """Always available."""
        return None

    def _ranges(self, batch: MLABatch, r: int) -> torch.Tensor:
        """``[n, L]`` boolean visibility of request ``r`` after the defect."""
        rows, length, bs = batch.rows(r), batch.seq_len(r), batch.block_size
        causal, window = batch.kinds[r].causal, batch.sliding_window
        name = self.mutant.name
        if name == "window-keeps-w-plus-1" and window is not None:
            window += 1
        mask = visibility_mask(causal, len(rows), length, window)
        keys = torch.arange(length)
        if name == "causal-off-by-one-at-block-boundary" and causal:
            hi = mask.long().cumsum(-1).argmax(-1) + 1  # one past the last visible key
            boundary = (hi % bs == 0) & (hi < length)
            extra = (keys[None, :] == hi[:, None]) & boundary[:, None]
            mask |= extra
        if name == "oldest-key-missed":
            lo = mask.long().argmax(-1)
            several = mask.sum(-1) >= 2
            mask &= ~((keys[None, :] == lo[:, None]) & several[:, None])
        if name == "page-last-slot-missed" and bs > 1:
            last_slot = (keys % bs == bs - 1)[None, :]
            dropped = mask & ~last_slot
            mask = torch.where(dropped.any(-1, keepdim=True), dropped, mask)
        return mask

    def run(self, batch: MLABatch, out: torch.Tensor, lse: torch.Tensor) -> None:
        """Compute ``batch`` with the defect into ``out`` / ``lse``."""
        storage, rank, name = batch.dtype, batch.kv_lora_rank, self.mutant.name
        flat = batch.kv_cache.reshape(-1, batch.head_dim)
        scale = batch.scale if name != "wrong-softmax-scale" else rank**-0.5
        for r in range(batch.num_requests):
            rows = batch.rows(r)
            if len(rows) == 0:
                continue
            length = batch.seq_len(r)
            positions = torch.arange(length, device=batch.device)
            pages = batch.block_table[r].to(torch.int64)
            slots = pages[positions // batch.block_size] * batch.block_size + positions % batch.block_size
            keys = flat.index_select(0, slots)
            mask = self._ranges(batch, r).to(batch.device)
            if name == "value-columns-shifted":
                values = keys[:, 1 : rank + 1].float()
            elif name == "value-from-rope":
                values = keys[:, :rank].float().clone()
                values[:, -1] = keys[:, rank].float()
            else:
                values = keys[:, :rank].float()
            for t0 in range(0, len(rows), 4):
                t1 = min(t0 + 4, len(rows))
                q = batch.q[rows.start + t0 : rows.start + t1]
                scores = self._scores(q, keys, storage) * scale
                scores = scores.masked_fill(~mask[t0:t1, None, :], float("-inf"))
                peak = scores.amax(-1, keepdim=True)
                if name == "softmax-without-max":
                    peak = torch.zeros_like(peak)
                p = torch.exp(scores - peak)
                total = p.sum(-1, keepdim=True)
                span = slice(rows.start + t0, rows.start + t1)
                lse[span] = (peak[..., 0] + torch.log(total[..., 0])).to(lse.dtype)
                if name == "uniform-weights":
                    p = mask[t0:t1, None, :].float().expand_as(p)
                    total = p.sum(-1, keepdim=True)
                o = torch.einsum("nhl,lr->nhr", p / total, values)
                if name == "zeros":
                    o = torch.zeros_like(o)
                if name == "heads-beyond-16-unwritten":
                    out[span, :16] = o[:, :16].to(out.dtype)
                    continue
                out[span] = o.to(out.dtype)

    def _scores(self, q: torch.Tensor, keys: torch.Tensor, storage: torch.dtype) -> torch.Tensor:
        if self.mutant.name != "qk-in-storage-dtype":
            return torch.einsum("nhd,ld->nhl", q.float(), keys.float())
        if storage == torch.float32:
            return torch.einsum("nhd,ld->nhl", round_to_tf32(q), round_to_tf32(keys))
        parts = []
        for c0 in range(0, keys.shape[0], 256):  # bounded [n, H, 256, D] products
            chunk = keys[c0 : c0 + 256]
            products = (q[:, :, None, :] * chunk[None, None, :, :]).to(storage)
            parts.append(_pairwise_sum_in(products, storage).float())
        return torch.cat(parts, dim=-1)


@dataclasses.dataclass(frozen=True)
class MutantOutcome:
    """One mutant in one dtype: the modes that killed it and how far over its tolerance it went."""

    mutant: str
    dtype: str
    touches: tuple[str, ...]
    killed_modes: tuple[str, ...]
    worst_ratio: dict[str, float]
    example: str | None

    @property
    def killed(self) -> bool:
        """Every touched mode (among those the cases contain) killed it."""
        return bool(self.touches) and set(self.touches) <= set(self.killed_modes)


@dataclasses.dataclass(frozen=True)
class PowerTable:
    """All outcomes, the case counts, and the seconds the run took."""

    outcomes: tuple[MutantOutcome, ...]
    cases: dict[str, int]
    seconds: float
    seed: int

    @property
    def all_killed(self) -> bool:
        """Whether every mutant is killed in every dtype."""
        return all(o.killed for o in self.outcomes)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (``docs/kernels-mutants.md`` is generated from it)."""
        return {
            **ReportHeader(schema_version="2", kind="kernel-mutants", kit_version=kvcontract.__version__,
                           engine="kernel mutant catalogue", engine_version=kvcontract.__version__,
                           profile="default", seed=self.seed).model_dump(),
            "schema": "kvcontract-kernel-mutants/1",
            "seed": self.seed,
            "seconds": round(self.seconds, 1),
            "cases": self.cases,
            "all_killed": self.all_killed,
            "mutants": [
                {
                    "mutant": o.mutant,
                    "description": _BY_NAME[o.mutant].description,
                    "dtype": o.dtype,
                    "touches": list(o.touches),
                    "killed_modes": list(o.killed_modes),
                    "killed": o.killed,
                    "worst_ratio": {
                        m: (v if v != float("inf") else "inf") for m, v in o.worst_ratio.items()
                    },
                    "example": o.example,
                }
                for o in self.outcomes
            ],
        }


def default_specs(
    dtype: str, *, cases_per_mode: int = 6, seed: int = 0, max_seq_len: int = 8192
) -> list[CaseSpec]:
    """The cases of a default ``kvcontract kernels`` run for a backend serving every mode."""
    return default_case_specs(
        ALL_MODES, dtype, cases_per_mode=cases_per_mode, seed=seed, max_seq_len=max_seq_len
    )


def power_table(
    dtypes: Sequence[str] = ("float32", "bfloat16"),
    *,
    mutants: Iterable[KernelMutant] = MUTANTS,
    cases_per_mode: int = 6,
    seed: int = 0,
    max_seq_len: int = 8192,
    progress: Callable[[str], None] | None = None,
) -> PowerTable:
    """Run every mutant on the default cases in every dtype (NUM-TOL-1's power check)."""
    start = time.perf_counter()
    chosen = list(mutants)
    backends = [MutantBackend(m) for m in chosen]
    arithmetic = get_arithmetic("float32")
    outcomes: list[MutantOutcome] = []
    counts: dict[str, int] = {}
    for dtype in dtypes:
        if dtype not in DTYPES:
            raise ValueError(f"unknown dtype {dtype!r}")
        specs = default_specs(dtype, cases_per_mode=cases_per_mode, seed=seed, max_seq_len=max_seq_len)
        counts[dtype] = len(specs)
        present = set().union(*(spec.modes for spec in specs)) if specs else set()
        killed: dict[str, set[str]] = {m.name: set() for m in chosen}
        worst: dict[str, dict[str, float]] = {m.name: {} for m in chosen}
        example: dict[str, str | None] = {m.name: None for m in chosen}
        for index, spec in enumerate(specs):
            if progress is not None:
                progress(f"{dtype}: case {index + 1}/{len(specs)}")
            batch = build_batch(spec)
            reference = mla_reference(batch, with_scales=True)
            out_tol, lse_tol = tolerance(batch, reference, arithmetic)
            for backend in backends:
                out, lse = poisoned_outputs(batch)
                backend.run(batch, out, lse)
                records = judge_outputs(batch, (out, lse), reference, out_tol, lse_tol, index)
                name = backend.mutant.name
                for record in records:
                    if record.mode == "padding":
                        continue  # mutants ignore padding; NUM-PAD-1 is the harness's own check
                    ratios = worst[name]
                    ratios[record.mode] = max(ratios.get(record.mode, 0.0), record.worst_ratio)
                    if not record.passed:
                        killed[name].add(record.mode)
                        if example[name] is None:
                            example[name] = f"case {index}: {record.message}"
        for mutant in chosen:
            touched = tuple(m for m in MODES if m in mutant.touches and m in present)
            outcomes.append(
                MutantOutcome(
                    mutant.name,
                    dtype,
                    touched,
                    tuple(m for m in MODES if m in killed[mutant.name]),
                    {m: worst[mutant.name][m] for m in MODES if m in worst[mutant.name]},
                    example[mutant.name],
                )
            )
    return PowerTable(tuple(outcomes), counts, time.perf_counter() - start, seed)


def format_power_table(table: PowerTable) -> str:
    """One line per mutant: per dtype, killed modes over touched modes."""
    dtypes = list(table.cases)
    names = [o.mutant for o in table.outcomes if o.dtype == dtypes[0]] if dtypes else []
    by_key = {(o.mutant, o.dtype): o for o in table.outcomes}
    rows = []
    for name in names:
        cells, status = [], "killed"
        for dtype in dtypes:
            o = by_key[(name, dtype)]
            low = min((o.worst_ratio.get(m, 0.0) for m in o.touches), default=0.0)
            cells.append(f"{len(set(o.killed_modes) & set(o.touches))}/{len(o.touches)} (min {_ratio(low)})")
            if not o.killed:
                status = "SURVIVED"
        rows.append([name, *cells, status])
    lines = text_table(["mutant", *dtypes, "status"], rows)
    lines.append(
        "cells: touched modes killed / touched modes (smallest, over the touched modes, of the "
        "worst error-to-tolerance ratio; > 1 fails)"
    )
    lines.append(
        f"cases: {', '.join(f'{d} {n}' for d, n in table.cases.items())}; {table.seconds:.0f} s; "
        + ("every mutant killed" if table.all_killed else "SOME MUTANT SURVIVED")
    )
    return "\n".join(lines)


def _ratio(value: float) -> str:
    return "inf" if value == float("inf") else f"{value:.3g}"


def write_power_json(table: PowerTable, path: str | os.PathLike[str]) -> None:
    """Write the power table as JSON, atomically (:func:`kvcontract.reports.write_atomic`)."""
    write_atomic(path, json.dumps(table.to_json(), indent=2, allow_nan=False) + "\n")
