#!/usr/bin/env bash
# Set up (idempotent), then run the project's checks: ruff, mypy (strict on reference/),
# crosshair over the reference's contracts (bounded), and the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export CUDA_VISIBLE_DEVICES="" VLLM_LOGGING_LEVEL=ERROR
echo "== ruff"; .venv/bin/ruff check spec reference conformance kernels tests benchmarks scripts
echo "== mypy (strict on reference/)"; .venv/bin/mypy reference
echo "== crosshair (reference contracts, bounded)"
timeout 900 .venv/bin/crosshair check --analysis_kind=PEP316 --per_condition_timeout=4 \
  --per_path_timeout=2 kvcontract.reference.merge kvcontract.reference.specs \
  kvcontract.reference.dispatch
echo "== pytest"; .venv/bin/python -m pytest -q "$@"
