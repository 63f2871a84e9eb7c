#!/usr/bin/env bash
# The whole GPU check of kvcontract.kernels, in under 10 minutes on one GPU; writes JSON.
#
#   bash scripts/gpu_kernels_check.sh [OUT_DIR]      (default: gpu-kernels-results/)
#
# Runs, on --device cuda: the reference (float32, bfloat16), vLLM's Triton MLA kernels compiled
# for the GPU (vllm-triton and vllm-triton-mla-impl in float16 and bfloat16; vllm-triton in
# float32 declares TF32), NUM-ACCUM-1 at width 576 with one head in float16 and bfloat16, and the
# mutant power table. Without a GPU it prints why and exits 0 without running anything.
set -u
cd "$(dirname "$0")/.."
OUT="${1:-gpu-kernels-results}"
PY="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python )}"
export PYTHONPATH="${PYTHONPATH:-$PWD}"
mkdir -p "$OUT"
if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "skipped: torch.cuda.is_available() is False here (no GPU or a CPU-only torch build)"
    echo '{"skipped": "no CUDA device"}' > "$OUT/skipped.json"
    exit 0
fi
status=0
run() {  # run NAME ARGS...: one kernels run with its own time limit, JSON into $OUT/NAME.json
    local name="$1"; shift
    echo "== $name: kvcontract kernels $*"
    timeout 150 "$PY" -m kvcontract kernels --device cuda --json "$OUT/$name.json" "$@" \
        > "$OUT/$name.txt" 2>&1
    local rc=$?
    tail -n 12 "$OUT/$name.txt"
    echo "   exit $rc"
    [ "$rc" -le 1 ] || status=1
}
"$PY" -c 'import torch; print("GPU:", torch.cuda.get_device_name())' | tee "$OUT/device.txt"
run reference-float32 --backend reference --dtype float32
run reference-bfloat16 --backend reference --dtype bfloat16
run vllm-triton-float16 --backend vllm-triton --dtype float16
run vllm-triton-bfloat16 --backend vllm-triton --dtype bfloat16
run vllm-triton-float32 --backend vllm-triton --dtype float32
run vllm-triton-mla-impl-bfloat16 --backend vllm-triton-mla-impl --dtype bfloat16
# NUM-ACCUM-1 at width 576: one query head takes vLLM's MHA path (q.k summed in the storage dtype).
run accum-one-head-float16 --backend vllm-triton --dtype float16 --heads 1
run accum-one-head-bfloat16 --backend vllm-triton --dtype bfloat16 --heads 1
run accum-sixteen-heads-bfloat16 --backend vllm-triton --dtype bfloat16 --heads 16
echo "== mutants"
timeout 240 "$PY" -m kvcontract kernels --mutants --json "$OUT/mutants.json" > "$OUT/mutants.txt" 2>&1
tail -n 16 "$OUT/mutants.txt"
echo "results in $OUT/"
exit $status
