"""Per-release environments of vLLM for the release history and matrix.

An environment per release (``<env-root>/vllm-<release>/``, default
``~/.cache/kvcontract/envs``) is three layers, outermost first:

1. ``tree/vllm``: the release's Python files, unpacked from its wheel (kept in
   ``~/.cache/kvcontract/wheels``, downloaded by pip when missing); compiled
   extensions are left out — the KV-cache code does not need them on the CPU;
2. ``extras/``: the light packages this release imports and the base lacks,
   found by importing the modules the kit drives and installing one package per
   ``ModuleNotFoundError`` (``pip install --target --no-deps``, version range from
   the release's own ``Requires-Dist``) until everything imports;
3. the base: the Python given by ``--base-python`` (torch 2.13.0 CPU and the
   pins of ``requirements/vllm-0.34.0-cpu.txt``, as ``scripts/setup.sh`` builds it).

The extras found are pinned in ``requirements/vllm-<release>-cpu.txt`` together
with the base's pins, so ``scripts/install-vllm.sh <release> PY`` can build a
standalone environment from the same file. A release whose
``vllm.v1.kv_cache_interface`` does not import after that has no environment,
with the reason.
"""

from __future__ import annotations

import email.parser
import json
import os
import re
import shutil
import subprocess
import time
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
"""The repository (the package's root): ``docs/``, ``requirements/``."""
WHEELS = Path(os.environ.get("KVCONTRACT_WHEEL_DIR", Path.home() / ".cache" / "kvcontract" / "wheels"))
ENV_ROOT = Path(os.environ.get("KVCONTRACT_HISTORY_ENVS", Path.home() / ".cache" / "kvcontract" / "envs"))
BASE_PINS = REPO / "requirements" / "vllm-0.34.0-cpu.txt"
NOT_NEEDED = re.compile(r"\.(so|h|hpp|cuh|cu|inl|cpp|c|js|cubin)$|/__pycache__/|^vllm/vllm-rs$")
"""Wheel members a source tree leaves out: compiled code, C++/CUDA sources, JavaScript."""
PROBE_MODULES = (
    "vllm.v1.kv_cache_interface",
    "vllm.v1.core.kv_cache_planning|vllm.v1.core.kv_cache_utils",
    "vllm.model_executor.layers.attention.mla_attention|vllm.v1.attention.backends.mla.common",
)
"""What the kit drives: specs, grouping (either module), the MLA metadata builder (optional)."""
REQUIRED_PROBES = 2
"""The first probes must import for a release to be checked; the rest are optional."""
MODULE_TO_PACKAGE = {
    "cv2": "opencv-python-headless", "yaml": "pyyaml", "zmq": "pyzmq", "cpuinfo": "py-cpuinfo",
    "PIL": "pillow", "google": "protobuf", "openai_harmony": "openai-harmony", "jwt": "pyjwt",
    "dateutil": "python-dateutil", "sklearn": "scikit-learn", "jose": "python-jose", "dotenv": "python-dotenv",
    "multipart": "python-multipart", "pythonjsonlogger": "python-json-logger", "rpds": "rpds-py",
    "opentelemetry": "opentelemetry-api", "importlib_metadata": "importlib-metadata",
}
"""Import name -> distribution name where they differ (else ``_`` and ``-`` are equivalent)."""
MAX_EXTRAS = 40


def say(message: str) -> None:
    print(f"vllm-history: {message}", flush=True)


def version_key(version: str) -> tuple[int, ...]:
    """Release order: every number of the version (0.8.5 < 0.8.5.post1 < 0.8.6; 0.10.1 < 0.10.1.1)."""
    return tuple(int(p) for p in re.findall(r"\d+", version))


# -- environments -------------------------------------------------------------------------------

def wheel_for(version: str, python: str) -> Path:
    found = sorted(WHEELS.glob(f"vllm-{version}-*.whl"))
    if found:
        return found[0]
    WHEELS.mkdir(parents=True, exist_ok=True)
    say(f"{version}: downloading the wheel into {WHEELS}")
    subprocess.run([python, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                    "-d", str(WHEELS), f"vllm=={version}"], check=True)
    found = sorted(WHEELS.glob(f"vllm-{version}-*.whl"))
    if not found:
        raise RuntimeError(f"pip did not leave a vllm {version} wheel in {WHEELS}")
    return found[0]


def unpack_tree(wheel: Path, tree: Path) -> None:
    """The wheel's ``vllm/`` package without compiled code, into ``tree`` (atomically), and beside
    it the list of the compiled extensions left out (the corpus build stands in for them)."""
    if (tree / "vllm" / "__init__.py").exists():
        list_compiled(wheel, tree)
        return
    partial = tree.with_name(tree.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    with zipfile.ZipFile(wheel) as whl:
        members = [m for m in whl.namelist() if m.startswith("vllm/") and not NOT_NEEDED.search(m)]
        whl.extractall(partial, members)
    shutil.rmtree(tree, ignore_errors=True)
    partial.rename(tree)
    list_compiled(wheel, tree)


def list_compiled(wheel: Path, tree: Path) -> None:
    from kvcontract.conformance.engines.vllm.corpus.standin import COMPILED_LIST

    target = tree / COMPILED_LIST.format(package="vllm")
    if target.exists():
        return
    with zipfile.ZipFile(wheel) as whl:
        names = sorted(m.removeprefix("vllm/") for m in whl.namelist() if m.startswith("vllm/") and m.endswith(".so"))
    target.write_text("".join(f"{n}\n" for n in names))


def requirements_of(wheel: Path) -> dict[str, str]:
    """The release's own ``Requires-Dist`` (no extras, no markers): normalized name -> requirement."""
    with zipfile.ZipFile(wheel) as whl:
        meta = next(m for m in whl.namelist() if m.endswith(".dist-info/METADATA"))
        message = email.parser.Parser().parsestr(whl.read(meta).decode())
    out = {}
    for req in message.get_all("Requires-Dist") or []:
        if "extra ==" in req:
            continue
        spec = req.split(";", 1)[0].strip()
        name = re.split(r"[\s\[<>=!~(]", spec, maxsplit=1)[0]
        out[normalize(name)] = re.sub(r"\[[^\]]*\]", "", spec).replace(" ", "")
    return out


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def env_vars(env_dir: Path, extra_path: Sequence[str] = ()) -> dict[str, str]:
    path = [*extra_path, str(env_dir / "extras")]
    return dict(os.environ, CUDA_VISIBLE_DEVICES="", VLLM_LOGGING_LEVEL="ERROR", TRITON_INTERPRET="1",
                PYTHONPATH=os.pathsep.join(path), PYTHONDONTWRITEBYTECODE="1")


PROBE = """
import importlib, json, sys, traceback
out = []
for alternatives in sys.argv[1:]:
    problem = None
    for name in alternatives.split("|"):
        try:
            importlib.import_module(name)
            problem = None
            break
        except ModuleNotFoundError as exc:
            problem = {"missing": exc.name, "error": f"{type(exc).__name__}: {exc}"}
            if exc.name and (exc.name == name or name.startswith(exc.name + ".")):
                continue  # this alternative is absent from the release; try the next
            break
        except Exception as exc:  # noqa: BLE001
            problem = {"missing": None, "error": f"{type(exc).__name__}: {exc}",
                       "where": traceback.format_exc().strip().splitlines()[-3]}
            break
    out.append(problem)
print(json.dumps(out))
"""


def probe(python: str, env_dir: Path) -> list[dict[str, Any] | None]:
    env = env_vars(env_dir, [str(env_dir / "tree")])
    proc = subprocess.run([python, "-c", PROBE, *PROBE_MODULES], capture_output=True, text=True, env=env,
                          cwd=str(env_dir), timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"the import probe crashed:\n{proc.stderr[-2000:]}")
    result: list[dict[str, Any] | None] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def installed_extras(extras: Path) -> dict[str, str]:
    found = {}
    for info in extras.glob("*.dist-info"):
        meta = info / "METADATA"
        if meta.exists():
            message = email.parser.Parser().parsestr(meta.read_text(errors="replace"))
            found[str(message["Name"])] = str(message["Version"])
    return dict(sorted(found.items(), key=lambda kv: normalize(kv[0])))


Problems = list[dict[str, Any] | None]
"""Per probed module: None (it imports), or ``missing`` (a module name) and ``error``."""


def pinned(path: Path) -> dict[str, str]:
    """A pin file's ``name==version`` lines (normalized name -> version); empty when there is none."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    out = {}
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = (p.strip() for p in line.split("==", 1))
            out[normalize(name)] = version
    return out


def recorded_extras(path: Path) -> list[str]:
    """The ``name==version`` extras a pin file written by :func:`write_pins` records (its
    ``# extras:`` line); empty for a hand-made pin file or none."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    line = next((x for x in lines if x.startswith("# extras:")), "")
    return [e.strip() for e in line.removeprefix("# extras:").split(",") if "==" in e]


def neighbour_pins(version: str, requirements: Path) -> Path | None:
    """The pin file of the nearest release before ``version`` that records its extras (a release
    between two checked ones mostly needs its predecessor's: they are installed in one go, and the
    probe finds what differs); None when there is none."""
    prefix = "vllm-"
    earlier = []
    for path in requirements.glob(f"{prefix}[0-9]*-cpu.txt"):
        other = path.name.removeprefix(prefix).removesuffix("-cpu.txt")
        if version_key(other) < version_key(version) and recorded_extras(path):
            earlier.append((version_key(other), path))
    return max(earlier)[1] if earlier else None


def install_missing(label: str, python: str, run_probe: Callable[[], Problems], target: Path,
                    wanted: Mapping[str, str], pins: Mapping[str, str], never: set[str]) -> Problems:
    """Install one light package (``--no-deps --target``) per module the probe finds missing, until
    everything imports; a package pinned in ``pins`` at its pin, else within the engine's own
    requirement (``wanted``). Never a package of ``never`` (the engine itself, its base). The
    probe's last answer."""
    tried: set[str] = set()
    problems: Problems = []
    for _ in range(MAX_EXTRAS):
        problems = run_probe()
        missing = [p["missing"] for p in problems if p and p.get("missing")]
        # A package that checks for its own optional dependency says which: "pip install X".
        hinted = [m.group(1) for p in problems if p and not p.get("missing")
                  for m in [re.search(r"pip install ([A-Za-z0-9_.\-]+)", p.get("error", ""))] if m]
        if not missing and not hinted:
            break
        module = (missing[0] if missing else hinted[0]).split(".")[0]
        package = MODULE_TO_PACKAGE.get(module, module)
        if package in tried or normalize(package) in {normalize(n) for n in never}:
            break  # never the engine or its base: the tree given is what is checked
        tried.add(package)
        pin = pins.get(normalize(package))
        requirement = f"{package}=={pin}" if pin else wanted.get(normalize(package), package)
        say(f"{label}: {module} is missing; installing {requirement} (--no-deps) into {target}")
        proc = subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                               requirement], capture_output=True, text=True)
        if proc.returncode != 0:
            say(f"{label}: pip could not install {requirement}: {proc.stderr.strip()[-300:]}")
    return problems


def build_env(version: str, python: str, root: Path) -> dict[str, Any]:
    """Unpack the release, find and install its extras; what imports and what does not."""
    env_dir = root / f"vllm-{version}"
    env_dir.mkdir(parents=True, exist_ok=True)
    state_file = env_dir / "kvcontract-env.json"
    if state_file.exists():
        state: dict[str, Any] = json.loads(state_file.read_text())
        if state.get("ok"):
            found = sorted(WHEELS.glob(f"vllm-{version}-*.whl"))
            if found and (env_dir / "tree" / "vllm").is_dir():
                list_compiled(found[0], env_dir / "tree")  # trees unpacked before the list was kept
            return state
    start = time.monotonic()
    wheel = wheel_for(version, python)
    unpack_tree(wheel, env_dir / "tree")
    wanted = requirements_of(wheel)
    extras = env_dir / "extras"
    extras.mkdir(exist_ok=True)
    pin_file = REPO / "requirements" / f"vllm-{version}-cpu.txt"
    recorded, source = recorded_extras(pin_file), pin_file
    if not recorded and not installed_extras(extras):  # no pins of its own: its predecessor's
        source = neighbour_pins(version, pin_file.parent) or pin_file
        recorded = recorded_extras(source)
    if recorded and not installed_extras(extras):  # found before: in one go, then the probe finds none missing
        say(f"{version}: installing the {len(recorded)} extras recorded in {source.name}")
        subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(extras), *recorded],
                       capture_output=True, text=True)
    problems = install_missing(f"vllm {version}", python, lambda: probe(python, env_dir), extras, wanted,
                               pinned(pin_file), {"vllm"})
    required_ok = all(p is None for p in problems[:REQUIRED_PROBES])
    state = {
        "version": version, "ok": required_ok, "wheel": wheel.name, "extras": installed_extras(extras),
        "problems": {m: p for m, p in zip(PROBE_MODULES, problems, strict=True) if p},
        "build_s": round(time.monotonic() - start, 1),
    }
    state_file.write_text(json.dumps(state, indent=2) + "\n")
    if required_ok:
        write_pins(version, state["extras"])
    return state


def write_pins(version: str, extras: Mapping[str, str]) -> None:
    """``requirements/vllm-<release>-cpu.txt``: the base pins plus this release's extras."""
    path = REPO / "requirements" / f"vllm-{version}-cpu.txt"
    if version == "0.34.0" or (path.exists() and "vllm_history.py" not in path.read_text()):
        return  # a hand-made pin file (the bundled range) is kept
    base = [line for line in BASE_PINS.read_text().splitlines() if line and not line.startswith("#")]
    names = {normalize(line.split("==")[0]) for line in base}
    added = [f"{n}=={v}" for n, v in extras.items() if normalize(n) not in names]
    lines = [f"# CPU-only environment for vLLM {version}, written by scripts/vllm_history.py:",
             "# the pins of requirements/vllm-0.34.0-cpu.txt (torch 2.13.0 held) plus the packages",
             f"# vLLM {version} imports and that base lacks, found by importing the modules the kit",
             "# drives and installing one package per ModuleNotFoundError (versions within the",
             "# release's own Requires-Dist). Install with scripts/install-vllm.sh "
             f"{version} PYTHON.",
             f"# extras: {', '.join(added) or 'none'}", *sorted(base + added, key=lambda s: normalize(s.split('==')[0]))]
    path.write_text("\n".join(lines) + "\n")
