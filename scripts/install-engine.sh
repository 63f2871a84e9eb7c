#!/usr/bin/env bash
# Install an engine built on vLLM's spec layer (a fork or a plugin) into an engine environment of
# its own, for `kvcontract check --engine NAME`; the kit's .venv (and its pinned vLLM) is not touched.
#
# usage: bash scripts/install-engine.sh NAME     (NAME: aphrodite, vllm-ascend)
#
# Needs the kit's environment first (bash scripts/setup.sh). The environment is built under
# ${KVCONTRACT_ENGINE_ENVS:-~/.cache/kvcontract/engines}/NAME: the engine's distribution (pinned
# version), a plugin's base vLLM release (its Python files and light packages, pinned in
# requirements/vllm-<release>-cpu.txt) and the light packages the engine imports (pinned in
# requirements/<distribution>-<version>-cpu.txt). What it does: conformance/reports/releases/engines.py.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 1 ] || { echo "usage: $0 NAME  (aphrodite, vllm-ascend)" >&2; exit 2; }
[ -x .venv/bin/python ] || { echo "install-engine: no .venv here; run bash scripts/setup.sh first" >&2; exit 2; }
export PIP_DISABLE_PIP_VERSION_CHECK=1
exec .venv/bin/python -m kvcontract.conformance.reports.releases.engines "$1"
