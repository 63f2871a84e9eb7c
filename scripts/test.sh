#!/usr/bin/env bash
# Set up (idempotent), then run the project's checks: ruff, mypy over the whole kvcontract
# package (strict on the reference), crosshair over the reference's contracts (bounded), and the
# test suite (every lane; pass -m "not slow" for the fast one).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export CUDA_VISIBLE_DEVICES="" VLLM_LOGGING_LEVEL=ERROR
echo "== ruff"; .venv/bin/ruff check spec reference conformance kernels tests benchmarks scripts \
  cli.py options.py usage.py reports.py __init__.py __main__.py
echo "== mypy (kvcontract.*, strict on the reference)"; .venv/bin/mypy
echo "== crosshair (reference contracts, bounded)"
timeout 900 .venv/bin/crosshair check --analysis_kind=PEP316 --per_condition_timeout=4 \
  --per_path_timeout=2 kvcontract.reference.merge kvcontract.reference.specs \
  kvcontract.reference.dispatch kvcontract.reference.planning kvcontract.reference.sizing
echo "== pytest"; .venv/bin/python -m pytest -q "$@"
