"""Cost of the ground truth (NUM-MEMORY-1): bandwidth against a plain copy, and peak memory.

Run: ``python benchmarks/bench_kernels.py [--repeats N] [--threads N] [--skip-peak]``.

* Effective bandwidth: bytes of KV cache the reference reads per second for
  decode over an 8k context (batch of requests, DeepSeek MLA widths R=512,
  P=64, bfloat16 cache), next to a plain ``Tensor.copy_`` of the same number
  of bytes on the same device, as a ratio. float32 accumulation is the
  figure asked for; float64 (the default ground truth) is printed beside it.
* Peak memory of a 32k-context case (64-token extend; 8k beside it, to show
  that it does not grow with the context), measured in a fresh
  process (CPU: peak RSS ``VmHWM``, reset just before the call, over the RSS
  before it, an upper bound as it counts allocator slack; GPU:
  ``torch.cuda.max_memory_allocated`` over the allocation before the call),
  next to the size of the ``[tokens, heads, context]`` score tensor a dense
  formulation would materialise.

The CUDA section runs when a GPU is present. Numbers on a shared 2-core
machine are noisy; the median of ``--repeats`` runs is printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import torch

from kvcontract.kernels import Kind, MLABatch, mla_reference
from kvcontract.reports import text_table

RANK, ROPE, HEADS = 512, 64, 16
DECODE_REQUESTS, DECODE_CONTEXT = 4, 8192
PEAK_CONTEXT, PEAK_QUERY_TOKENS = 32768, 64
BLOCK_SIZE = 64


def make_batch(
    kinds: list[Kind], query_lens: list[int], seq_lens: list[int], device: str, seed: int = 0
) -> MLABatch:
    """A batch with random pages in a shuffled pool, built without large temporaries."""
    gen = torch.Generator().manual_seed(seed)
    pages_per_request = [-(-length // BLOCK_SIZE) for length in seq_lens]
    total_pages = sum(pages_per_request)
    cache = torch.empty(total_pages, BLOCK_SIZE, RANK + ROPE, dtype=torch.bfloat16, device=device)
    for page in range(total_pages):  # page by page: no float32 copy of the whole cache
        cache[page] = torch.randn(BLOCK_SIZE, RANK + ROPE, generator=gen).to(torch.bfloat16)
    order = torch.randperm(total_pages, generator=gen).to(torch.int32)
    table = torch.zeros(len(seq_lens), max(pages_per_request), dtype=torch.int32)
    start = 0
    for r, count in enumerate(pages_per_request):
        table[r, :count] = order[start : start + count]
        start += count
    q = torch.randn(sum(query_lens), HEADS, RANK + ROPE, generator=gen).to(torch.bfloat16)
    starts = torch.tensor([0, *query_lens]).cumsum(0).to(torch.int32)
    return MLABatch(
        q=q.to(device),
        kv_cache=cache,
        block_table=table.to(device),
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=device),
        query_start_loc=starts.to(device),
        kinds=tuple(kinds),
        kv_lora_rank=RANK,
        scale=(RANK + ROPE) ** -0.5,
    )


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def median_seconds(run, device: str, repeats: int) -> float:  # type: ignore[no-untyped-def]
    run()  # warm-up
    _sync(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        _sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def matmul_ratios(device: str, repeats: int) -> list[tuple[str, float, float]]:
    """(label, reference time / same-FLOP matmul time, reference time / copy time), decode over 8k."""
    batch = make_batch(
        [Kind.DECODE] * DECODE_REQUESTS, [1] * DECODE_REQUESTS,
        [DECODE_CONTEXT] * DECODE_REQUESTS, device,
    )
    bytes_read = DECODE_REQUESTS * DECODE_CONTEXT * (RANK + ROPE) * batch.kv_cache.element_size()
    source = torch.randn(bytes_read // 2, device=device).to(torch.bfloat16)
    target = torch.empty_like(source)
    copy_s = median_seconds(lambda: target.copy_(source), device, repeats)
    rows = []
    for accumulate in (torch.float32, torch.float64):
        # The same FLOPs as the reference's two products (q.k over D, p.v over R), as plain
        # matmuls of [heads, width] x [width, keys] per request, in the accumulation dtype.
        q = torch.randn(HEADS, RANK + ROPE, dtype=accumulate, device=device)
        keys = torch.randn(RANK + ROPE, DECODE_CONTEXT, dtype=accumulate, device=device)
        p = torch.randn(HEADS, DECODE_CONTEXT, dtype=accumulate, device=device)
        values = torch.randn(DECODE_CONTEXT, RANK, dtype=accumulate, device=device)

        def matmuls(q=q, keys=keys, p=p, values=values) -> None:  # type: ignore[no-untyped-def]
            for _ in range(DECODE_REQUESTS):
                q @ keys
                p @ values

        mm_s = median_seconds(matmuls, device, repeats)
        ref_s = median_seconds(
            lambda acc=accumulate: mla_reference(batch, accumulate=acc), device, repeats
        )
        name = str(accumulate).removeprefix("torch.")
        rows.append((f"{name} reference", ref_s / mm_s, ref_s / copy_s))
    return rows


def bandwidth_rows(device: str, repeats: int) -> list[tuple[str, float, float, float]]:
    """(label, reference GB/s, copy GB/s, ratio) for decode over an 8k context."""
    batch = make_batch(
        [Kind.DECODE] * DECODE_REQUESTS,
        [1] * DECODE_REQUESTS,
        [DECODE_CONTEXT] * DECODE_REQUESTS,
        device,
    )
    bytes_read = DECODE_REQUESTS * DECODE_CONTEXT * (RANK + ROPE) * batch.kv_cache.element_size()
    source = torch.randn(bytes_read // 2, device=device).to(torch.bfloat16)
    target = torch.empty_like(source)
    copy_s = median_seconds(lambda: target.copy_(source), device, repeats)
    rows = []
    for accumulate in (torch.float32, torch.float64):
        ref_s = median_seconds(
            lambda acc=accumulate: mla_reference(batch, accumulate=acc), device, repeats
        )
        name = str(accumulate).removeprefix("torch.")
        rows.append((f"{name} reference", bytes_read / ref_s / 1e9, bytes_read / copy_s / 1e9,
                     copy_s / ref_s))
    return rows


def status_bytes(field: str) -> int:
    """A ``/proc/self/status`` memory field (``VmRSS``, ``VmHWM``) in bytes."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def reset_peak_rss() -> None:
    """Reset this process's peak RSS (VmHWM) to its current RSS (Linux >= 4.0)."""
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


def peak_memory_child(device: str, accumulate_name: str, context: int) -> None:
    """Measure one 32k-context extend in this fresh process; print JSON."""
    accumulate = getattr(torch, accumulate_name)
    # Warm up on a small case first, so that loading math libraries and
    # growing thread pools is not counted as the reference's memory.
    mla_reference(make_batch([Kind.PREFILL], [8], [2048], device, seed=1), accumulate=accumulate)
    batch = make_batch([Kind.PREFILL], [PEAK_QUERY_TOKENS], [context], device)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        mla_reference(batch, accumulate=accumulate)
        torch.cuda.synchronize()
        extra = torch.cuda.max_memory_allocated() - before
    else:
        reset_peak_rss()
        before = status_bytes("VmRSS")
        mla_reference(batch, accumulate=accumulate)
        extra = max(0, status_bytes("VmHWM") - before)
    print(json.dumps({"extra_bytes": extra}))


def peak_memory(device: str, accumulate_name: str, context: int, threads: int) -> int:
    """Extra bytes one extend over ``context`` keys needs, measured in a fresh process."""
    done = subprocess.run(
        [sys.executable, __file__, "--peak-child", device, accumulate_name, str(context),
         "--threads", str(threads)],
        capture_output=True, text=True, check=True,
    )
    return int(json.loads(done.stdout.strip().splitlines()[-1])["extra_bytes"])


def report(device: str, repeats: int, skip_peak: bool, threads: int) -> None:
    if device.startswith("cuda"):
        label = torch.cuda.get_device_name()
    else:
        label = f"{torch.get_num_threads()} thread(s)"
    print(f"\n== {device} ({label}) ==")
    print(f"decode, {DECODE_REQUESTS} requests x {DECODE_CONTEXT} keys, heads {HEADS}, "
          f"R={RANK} P={ROPE}, bfloat16 cache, block size {BLOCK_SIZE}; median of {repeats}")
    bandwidth = [[name, f"{ref_bw:.3f}", f"{copy_bw:.3f}", f"{ratio:.4f}"]
                 for name, ref_bw, copy_bw, ratio in bandwidth_rows(device, repeats)]
    print("\n".join(text_table(["", "reference GB/s", "copy GB/s", "ratio"], bandwidth, align="<>>>")))
    print("time ratios: same-FLOP matmul, same-byte copy")
    ratios = [[name, f"{vs_matmul:.2f}", f"{vs_copy:.1f}"]
              for name, vs_matmul, vs_copy in matmul_ratios(device, repeats)]
    print("\n".join(text_table(["", "ref/matmul", "ref/copy"], ratios, align="<>>")))
    if skip_peak:
        return
    print(f"peak memory above the inputs, {PEAK_QUERY_TOKENS}-token extend, heads {HEADS}:")
    peaks = []
    for context in (PEAK_CONTEXT // 4, PEAK_CONTEXT):
        single = peak_memory(device, "float32", context, threads)
        double = peak_memory(device, "float64", context, threads)
        dense = PEAK_QUERY_TOKENS * HEADS * context * 8  # one float64 score tensor
        peaks.append([context, f"{single / 2**20:.1f}", f"{double / 2**20:.1f}", f"{dense / 2**20:.0f}"])
    print("\n".join(text_table(["context", "float32 ref MiB", "float64 ref MiB", "dense f64 scores MiB"], peaks,
                                align=">>>>")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--skip-peak", action="store_true")
    parser.add_argument(
        "--threads", type=int, default=1,
        help="CPU threads for both the reference and the copy (default 1: on a small shared "
        "machine a second thread mostly measures contention)",
    )
    parser.add_argument("--peak-child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.peak_child:
        device, accumulate_name, context = args.peak_child
        peak_memory_child(device, accumulate_name, int(context))
        return
    report("cpu", args.repeats, args.skip_peak, args.threads)
    if torch.cuda.is_available():
        report("cuda", args.repeats, args.skip_peak, args.threads)
    else:
        print("\n(no GPU here: CUDA section skipped)")


if __name__ == "__main__":
    main()
