#!/usr/bin/env bash
# Install a CPU-only vLLM into an existing virtual environment.
#
# usage: scripts/install-vllm.sh VERSION PYTHON
#   VERSION  a vLLM release with a pin file requirements/vllm-VERSION-cpu.txt
#   PYTHON   the virtual environment's python executable
#
# Steps: torch==2.13.0 (CPU build; skipped when already that version), then
# the pinned packages of requirements/vllm-VERSION-cpu.txt under a constraint
# that keeps torch at 2.13.0, then vllm==VERSION with --no-deps (so vLLM's
# CUDA torch and GPU stack never come in), then a smoke import.
# The vLLM wheel is kept in ${KVCONTRACT_WHEEL_DIR:-$HOME/.cache/kvcontract/wheels}
# and downloaded there only when missing. A re-run on an environment that
# already matches the pins skips every install step.
#
# Environment:
#   KVCONTRACT_WHEEL_DIR        wheel cache (default ~/.cache/kvcontract/wheels)
#   KVCONTRACT_ALLOW_NON_VENV=1 allow a PYTHON that is not inside a venv
set -euo pipefail

TORCH_VERSION=2.13.0

die() { echo "install-vllm: ERROR: $*" >&2; exit 1; }
say() { echo "install-vllm: $*"; }

[ $# -eq 2 ] || die "usage: $0 VERSION PYTHON  (e.g. $0 0.34.0 .venv/bin/python)"
VERSION=$1
PYTHON=$2

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REQ="$REPO/requirements/vllm-$VERSION-cpu.txt"
if [ ! -f "$REQ" ]; then
    avail=$(cd "$REPO/requirements" 2>/dev/null && ls vllm-*-cpu.txt 2>/dev/null \
        | sed -e 's/^vllm-//' -e 's/-cpu\.txt$//' | paste -sd' ')
    die "no pin file $REQ for vLLM $VERSION (pinned versions: ${avail:-none})"
fi

command -v "$PYTHON" >/dev/null 2>&1 || [ -x "$PYTHON" ] \
    || die "PYTHON '$PYTHON' is not an executable"
"$PYTHON" -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null \
    || die "$PYTHON is not a working Python >= 3.11"
if [ "${KVCONTRACT_ALLOW_NON_VENV:-0}" != 1 ] \
    && "$PYTHON" -c 'import sys; sys.exit(sys.prefix != sys.base_prefix)'; then
    die "$PYTHON is not inside a virtual environment (create one with" \
        "'python3 -m venv DIR' and pass DIR/bin/python, or set KVCONTRACT_ALLOW_NON_VENV=1)"
fi

WHEEL_DIR=${KVCONTRACT_WHEEL_DIR:-$HOME/.cache/kvcontract/wheels}
export PIP_DISABLE_PIP_VERSION_CHECK=1
pip_() { "$PYTHON" -m pip "$@"; }

# Installed version of a distribution, empty when absent.
installed() {
    "$PYTHON" -c 'import importlib.metadata as m, sys
try: print(m.version(sys.argv[1]))
except m.PackageNotFoundError: pass' "$1"
}

# Pins of $REQ not satisfied in the environment, one "name: want X, have Y" a line.
pin_mismatches() {
    "$PYTHON" - "$REQ" <<'EOF'
import importlib.metadata as m, re, sys
for line in open(sys.argv[1]):
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    name, want = (s.strip() for s in line.split("==", 1))
    try:
        have = m.version(name)
    except m.PackageNotFoundError:
        have = "none"
    if have != want:
        print(f"{name}: want {want}, have {have}")
EOF
}

torch_ok() { [ "$(installed torch | cut -d+ -f1)" = "$TORCH_VERSION" ]; }

START=$(date +%s)
say "vLLM $VERSION (CPU) into $("$PYTHON" -c 'import sys; print(sys.prefix)')"

have_vllm=$(installed vllm)
mismatches=$(pin_mismatches)
if [ "$have_vllm" = "$VERSION" ] && torch_ok && [ -z "$mismatches" ]; then
    say "already installed (vllm $VERSION, torch $TORCH_VERSION, all pins match); skipping installs"
else
    # 1. torch
    if torch_ok; then
        say "torch $(installed torch) already present"
    else
        was=$(installed torch); say "installing torch==$TORCH_VERSION (was: ${was:-none})"
        pip_ install "torch==$TORCH_VERSION" || die "pip could not install torch==$TORCH_VERSION"
        torch_ok || die "torch is $(installed torch), expected $TORCH_VERSION"
    fi

    # 2. pinned packages, torch held where it is
    CONSTRAINT=$(mktemp "${TMPDIR:-/tmp}/kvcontract-torch-XXXXXX.txt")
    trap 'rm -f "$CONSTRAINT"' EXIT
    echo "torch==$(installed torch)" >"$CONSTRAINT"
    if [ -n "$mismatches" ]; then
        say "installing $(grep -c '^[^#[:space:]]' "$REQ") pinned packages from ${REQ#"$REPO"/} ($(echo "$mismatches" | wc -l) to change)"
        pip_ install --constraint "$CONSTRAINT" -r "$REQ" || die "pip could not install $REQ"
        left=$(pin_mismatches)
        [ -z "$left" ] || die "pins still unmet after install:"$'\n'"$left"
        torch_ok || die "torch changed to $(installed torch) while installing pins"
    else
        say "pinned packages already match ${REQ#"$REPO"/}"
    fi

    # 3. vllm itself, from the wheel cache, without its dependencies
    if [ "$have_vllm" = "$VERSION" ]; then
        say "vllm $VERSION already present"
    else
        mkdir -p "$WHEEL_DIR"
        if compgen -G "$WHEEL_DIR/vllm-$VERSION-*.whl" >/dev/null; then
            say "using cached wheel $(ls "$WHEEL_DIR"/vllm-"$VERSION"-*.whl | head -1)"
        else
            say "downloading the vllm $VERSION wheel (~250-320 MB) into $WHEEL_DIR"
            pip_ download --no-deps --only-binary=:all: -d "$WHEEL_DIR" "vllm==$VERSION" \
                || die "pip could not download vllm==$VERSION"
        fi
        say "installing vllm==$VERSION --no-deps (was: ${have_vllm:-none})"
        pip_ install --no-deps --no-index --find-links "$WHEEL_DIR" \
            --constraint "$CONSTRAINT" "vllm==$VERSION" \
            || die "pip could not install vllm==$VERSION from $WHEEL_DIR"
        [ "$(installed vllm)" = "$VERSION" ] || die "vllm is '$(installed vllm)' after install, expected $VERSION"
    fi
fi

# 4. smoke import
say "smoke import"
CUDA_VISIBLE_DEVICES="" TRITON_INTERPRET=1 VLLM_LOGGING_LEVEL=WARNING "$PYTHON" - <<'EOF' \
    || die "smoke import failed (see the traceback above)"
import importlib, importlib.util, importlib.metadata as m, platform
import vllm.v1.kv_cache_interface  # noqa: F401
planning = "vllm.v1.core.kv_cache_planning"  # vLLM >= 0.34; older: kv_cache_utils
if importlib.util.find_spec(planning) is None:
    planning = "vllm.v1.core.kv_cache_utils"
importlib.import_module(planning)
import torch
print(f"  imported vllm.v1.kv_cache_interface, {planning}")
print(f"  python {platform.python_version()}  vllm {m.version('vllm')}  "
      f"torch {torch.__version__} (cuda: {torch.version.cuda})  "
      f"triton {m.version('triton')}  transformers {m.version('transformers')}")
EOF
# 5. bytecode for python -O: every check runs one pass under -O, which reads .opt-1.pyc files
# that pip never writes; without them that pass compiles torch, transformers and vLLM on every
# start (about 7 s on 2 cores, and more when PYTHONDONTWRITEBYTECODE is set). Up-to-date files
# are skipped. compileall exits 1 for the few vendored files that are not Python 3 (never
# imported); that is not a failure of the install.
site=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
say "compiling $site for python -O"
"$PYTHON" -O -m compileall -q -j 0 "$site" >/dev/null 2>&1 || true
say "done in $(( $(date +%s) - START ))s"
