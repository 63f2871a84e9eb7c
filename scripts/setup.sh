#!/usr/bin/env bash
# Set up .venv with kvcontract (editable, with dev tools) and the pinned CPU-only vLLM.
# Usage: scripts/setup.sh [VLLM_VERSION]   (default 0.34.0, the release CI checks)
set -euo pipefail
cd "$(dirname "$0")/.."
version="${1:-0.34.0}"
python="${KVCONTRACT_PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $("$python" --version)"
  "$python" -m venv .venv
fi
# torch first, from the CPU build this machine carries, so nothing pulls a CUDA build.
if ! .venv/bin/python -c 'import torch, sys; sys.exit(torch.__version__.split("+")[0] != "2.13.0")' 2>/dev/null; then
  .venv/bin/pip install --quiet torch==2.13.0
fi
.venv/bin/pip install --quiet -e ".[dev]"
bash scripts/install-vllm.sh "$version" .venv/bin/python
# The headless browser of the report's browser test (Debian's chromium, where apt-get and root are).
bash scripts/install-browser.sh || echo "setup: the browser did not install (the report's browser test will skip)" >&2
# The kit's own modules compiled for both interpreter modes: a check runs three interpreters
# (its own, a normal and a python -O worker), and where PYTHONDONTWRITEBYTECODE is set (these
# machines set it) each compiled the kit's modules afresh on every run. A stale file is
# recompiled in memory, never trusted.
for flag in "" -O; do
  .venv/bin/python $flag -m compileall -q kvcontract/ spec/ reference/ conformance/ kernels/ >/dev/null
done
echo "setup: done; activate with: source .venv/bin/activate"
