#!/usr/bin/env python3
"""The vLLM release history: every release's findings, and when each was born and fixed.

usage: python3 scripts/vllm_history.py [--versions 0.11.0,...,0.34.0] [--jobs 2] [--profile quick]
                                       [--env-root DIR] [--base-python PY] [--render-only]

One command builds (and caches) an environment per release, checks each, and
writes ``docs/vllm-history.md`` from the reports.

**An environment per release** (``<env-root>/vllm-<release>/``, default
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

**The check** of a release is ``kvcontract check --engine vllm --engine-path
<env>/tree --no-xfails --profile P --seed S --json docs/vllm-history/reports/<release>.json``
(a source-tree check: ``import vllm`` resolves to the release's tree), releases
in parallel in a process pool (``--jobs``), with a progress line per step.

**The history**: per finding subject x clause (``kvcontract.conformance.reports.diff``'s
signature, kinds and fields included), the first release that has it and the
first later release that no longer has it ("fixed in"), over the releases
checked, in order. Generated, never edited by hand: ``--render-only`` re-renders
the document from the reports.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import email.parser
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # the diff module's notion of a present finding and its subject
    sys.path.insert(0, str(REPO))
from kvcontract.conformance.reports.diff import PRESENT, subject  # noqa: E402

DOC = REPO / "docs" / "vllm-history.md"
REPORTS = REPO / "docs" / "vllm-history" / "reports"
INDEX = "index.json"
WHEELS = Path(os.environ.get("KVCONTRACT_WHEEL_DIR", Path.home() / ".cache" / "kvcontract" / "wheels"))
ENV_ROOT = Path(os.environ.get("KVCONTRACT_HISTORY_ENVS", Path.home() / ".cache" / "kvcontract" / "envs"))
BASE_PINS = REPO / "requirements" / "vllm-0.34.0-cpu.txt"
DEFAULT_VERSIONS = ("0.11.0", "0.15.1", "0.20.0", "0.25.0", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0",
                    "0.33.0", "0.34.0")
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
    return tuple(int(p) for p in re.findall(r"\d+", version)[:3])


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
    """The wheel's ``vllm/`` package without compiled code, into ``tree`` (atomically)."""
    if (tree / "vllm" / "__init__.py").exists():
        return
    partial = tree.with_name(tree.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    with zipfile.ZipFile(wheel) as whl:
        members = [m for m in whl.namelist() if m.startswith("vllm/") and not NOT_NEEDED.search(m)]
        whl.extractall(partial, members)
    shutil.rmtree(tree, ignore_errors=True)
    partial.rename(tree)


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


def build_env(version: str, python: str, root: Path) -> dict[str, Any]:
    """Unpack the release, find and install its extras; what imports and what does not."""
    env_dir = root / f"vllm-{version}"
    env_dir.mkdir(parents=True, exist_ok=True)
    state_file = env_dir / "kvcontract-env.json"
    if state_file.exists():
        state: dict[str, Any] = json.loads(state_file.read_text())
        if state.get("ok"):
            return state
    start = time.monotonic()
    wheel = wheel_for(version, python)
    unpack_tree(wheel, env_dir / "tree")
    wanted = requirements_of(wheel)
    extras = env_dir / "extras"
    extras.mkdir(exist_ok=True)
    tried: set[str] = set()
    problems: list[dict[str, Any] | None] = []
    for _ in range(MAX_EXTRAS):
        problems = probe(python, env_dir)
        missing = [p["missing"] for p in problems if p and p.get("missing")]
        # A package that checks for its own optional dependency says which: "pip install X".
        hinted = [m.group(1) for p in problems if p and not p.get("missing")
                  for m in [re.search(r"pip install ([A-Za-z0-9_.\-]+)", p.get("error", ""))] if m]
        if not missing and not hinted:
            break
        module = (missing[0] if missing else hinted[0]).split(".")[0]
        package = MODULE_TO_PACKAGE.get(module, module)
        if package in tried or normalize(package) == "vllm":
            break  # never another vLLM: the release's own tree is what is checked
        tried.add(package)
        requirement = wanted.get(normalize(package), package)
        say(f"{version}: {module} is missing; installing {requirement} (--no-deps) into {extras}")
        proc = subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(extras),
                               requirement], capture_output=True, text=True)
        if proc.returncode != 0:
            say(f"{version}: pip could not install {requirement}: {proc.stderr.strip()[-300:]}")
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


# -- checks ------------------------------------------------------------------------------------

ADAPTER_PROBE = """
import json, sys
from kvcontract.conformance.engines.vllm.engine import VllmEngine
from kvcontract.reference import SPEC_KINDS
engine = VllmEngine(sys.argv[1])
missing = engine.unsupported_kinds()
router = engine.router()
print(json.dumps({
    "grouping_module": engine.planning_module,
    "grouping": engine.grouping_unavailable() or "driven",
    "routing": "driven" if router is not None else engine.router_unavailable(),
    "missing_kinds": {k.__name__: why for k, why in missing.items()},
    "missing_fields": {k.__name__: sorted(engine.unsupported_fields(k)) for k in SPEC_KINDS
                       if k not in missing and engine.unsupported_fields(k)},
    "enums": {k: f"{e.__module__}.{e.__name__}" for k, e in engine.engine_enums().items()},
}, sort_keys=True))
"""


def adapter_shape(python: str, env_dir: Path) -> dict[str, Any]:
    """What the adapter reads from the release: kinds and fields it lacks, grouping, routing."""
    proc = subprocess.run([python, "-c", ADAPTER_PROBE, str(env_dir / "tree")], capture_output=True, text=True,
                          env=env_vars(env_dir, [str(REPO)]), cwd=str(env_dir), timeout=600)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "probe failed"}
    shape: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return shape


def check_release(version: str, python: str, root: Path, profile: str, seed: int) -> dict[str, Any]:
    """Build the environment and check the release; runs in a pool process."""
    start = time.monotonic()
    state = build_env(version, python, root)
    built = time.monotonic()
    out: dict[str, Any] = {"version": version, "env": state, "build_s": round(built - start, 1)}
    if not state.get("ok"):
        out["skipped"] = "; ".join(f"{m}: {p['error']}" for m, p in state["problems"].items())
        return out
    env_dir = root / f"vllm-{version}"
    out["adapter"] = adapter_shape(python, env_dir)
    report, problem = run_check(version, python, env_dir, profile, seed, env_dir / "check.json")
    out["check_s"] = round(time.monotonic() - built, 1)
    if report is None:
        out["skipped"] = problem
        return out
    REPORTS.mkdir(parents=True, exist_ok=True)
    (REPORTS / f"{version}.json").write_text(json.dumps(slim(report), indent=1) + "\n")
    out["counts"] = report["summary"]["counts"]
    return out


def run_check(version: str, python: str, env_dir: Path, profile: str, seed: int,
              target: Path) -> tuple[dict[str, Any] | None, str]:
    """``kvcontract check`` of the release's tree into ``target`` (the full report: snippets and
    witnesses); the report, or None and why there is none."""
    cmd = [python, "-m", "kvcontract", "check", "--engine", "vllm", "--engine-path", str(env_dir / "tree"),
           "--no-xfails", "--profile", profile, "--seed", str(seed), "--json", str(target), "--quiet"]
    log = target.with_suffix(".log")
    target.unlink(missing_ok=True)
    with log.open("w") as handle:
        proc = subprocess.run(cmd, stdout=handle, stderr=subprocess.STDOUT, env=env_vars(env_dir, [str(REPO)]),
                              cwd=str(REPO))
    if proc.returncode not in (0, 1) or not target.exists():
        return None, f"the check exited with {proc.returncode}; see {log}"
    report: dict[str, Any] = json.loads(target.read_text())
    if report.get("engine_version") != version:
        return None, f"the check imported vllm {report.get('engine_version')}, not {version}"
    return report, ""


SLIM_RECORD = ("clause", "mode", "status", "signature", "title", "level", "examples", "where")
SLIM_MESSAGE = 240


def slim(report: Mapping[str, Any]) -> dict[str, Any]:
    """The report as the history keeps it: header, summary and each record's identity and
    message (repro snippets and witnesses stay in ``<env>/check.json``; re-run the
    release's check to get them)."""
    out = {k: v for k, v in report.items() if k not in ("records", "clauses", "coverage", "engine_log")}
    out["records"] = [{**{k: r[k] for k in SLIM_RECORD if k in r},
                       "message": (r.get("message") or "")[:SLIM_MESSAGE]} for r in report["records"]]
    return out


def run_all(versions: Sequence[str], python: str, root: Path, profile: str, seed: int,
            jobs: int) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(check_release, v, python, root, profile, seed): v for v in versions}
        say(f"checking {len(versions)} release(s), {jobs} at a time")
        for done, future in enumerate(concurrent.futures.as_completed(futures), 1):
            v = futures[future]
            try:
                results[v] = future.result()
            except Exception as exc:  # noqa: BLE001 - one release's failure is reported, the rest go on
                results[v] = {"version": v, "skipped": f"{type(exc).__name__}: {exc}"}
            r = results[v]
            what = r.get("skipped") or ", ".join(f"{n} {s}" for s, n in sorted(r.get("counts", {}).items()))
            say(f"[{done}/{len(versions)}] {v}: {what} (env {r.get('build_s', '?')}s, "
                f"check {r.get('check_s', '-')}s)")
    return {v: results[v] for v in sorted(results, key=version_key)}


# -- the history ---------------------------------------------------------------------------------

def _present(report: Mapping[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """(clause, signature) -> the first present record (either mode), with the modes it shows in."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for r in report.get("records", []):
        if r.get("status") not in PRESENT:
            continue
        key = (r["clause"], r.get("signature") or "")
        entry = out.setdefault(key, {**r, "modes": []})
        if r["mode"] not in entry["modes"]:
            entry["modes"].append(r["mode"])
    return out


def _judged(report: Mapping[str, Any]) -> set[str]:
    return {r["clause"] for r in report.get("records", []) if r.get("status") != "skip"}


def history(versions: Sequence[str], reports: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per (clause, signature): the releases that have it, the first one, the one that fixed it.

    ``fixed_in``: the first checked release after the last run of releases that have
    it which judged the clause and does not have it (None: still present in the
    newest release checked, or that release did not judge the clause)."""
    present = {v: _present(reports[v]) for v in versions}
    judged = {v: _judged(reports[v]) for v in versions}
    keys = sorted({k for v in versions for k in present[v]})
    rows = []
    for clause, sig in keys:
        have = [v for v in versions if (clause, sig) in present[v]]
        first = have[0]
        last = have[-1]
        later = [v for v in versions[versions.index(last) + 1:] if clause in judged[v]]
        fixed = later[0] if later else None
        gaps = [v for v in versions[versions.index(first):versions.index(last) + 1]
                if v not in have and clause in judged[v]]
        record = present[first][(clause, sig)]
        rows.append({"clause": clause, "signature": sig, "subject": subject(sig), "first_bad": first,
                     "fixed_in": fixed, "releases": have, "absent_between": gaps,
                     "status": record["status"], "message": record.get("message", "")[:300]})
    return rows


def _load(reports_dir: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    index = json.loads((reports_dir / INDEX).read_text())
    loaded = {v: json.loads((reports_dir / f"{v}.json").read_text()) for v in index["checked"]}
    return index, loaded


def render(index: Mapping[str, Any], reports: Mapping[str, Mapping[str, Any]],
           reviews: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    versions = list(index["checked"])
    rows = history(versions, reports)
    reviews = load_reviews() if reviews is None else reviews
    born_by, fixed_by, _ = reviewed(rows, reviews)
    lines = [
        "# vLLM release history of the KV-cache merge contract",
        "",
        "<!-- Generated by scripts/vllm_history.py from docs/vllm-history/reports/*.json;"
        " do not edit by hand. -->",
        "",
        f"Generated on {index['date']} with:",
        "",
        "```sh",
        index["command"],
        "```",
        "",
        f"- Releases checked ({len(versions)}): {', '.join(versions)}. "
        f"Profile `{index['profile']}` (the systematic phase: deterministic), seed {index['seed']}, "
        "`--no-xfails`, both interpreter modes.",
        "- Each release is checked as a **source tree** (`kvcontract check --engine vllm --engine-path "
        "<release>/tree`): its wheel's Python files over the base CPU environment (torch 2.13.0 and "
        "the pins of `requirements/vllm-0.34.0-cpu.txt`) plus the light packages the release needs "
        "on top, found by import and pinned in `requirements/vllm-<release>-cpu.txt`.",
        f"- {index['first_note']}",
        "- A *finding* is a clause x signature present (status fail, xfail or error) in either "
        "mode. **First bad**: the first checked release that has it. **Fixed in**: the first "
        "checked release after the last one that has it, which judged the clause and does not "
        "have it (— : still present in the newest release checked). Releases not checked lie "
        "between the columns' releases, so a finding may be born or fixed in one of those.",
        "",
        "## Releases",
        "",
        "| release | findings | subjects | fail | error | pass | skip | env extras | check |",
        "|:---|---:|---:|---:|---:|---:|---:|:---|---:|",
    ]
    for v in versions:
        present = _present(reports[v])
        counts = reports[v]["summary"]["counts"]
        env = index["envs"].get(v, {})
        extras = ", ".join(f"{n} {ver}" for n, ver in env.get("extras", {}).items()) or "none"
        lines.append(f"| {v} | {len(present)} | {len({subject(s) for _, s in present})} | "
                     f"{counts.get('fail', 0)} | {counts.get('error', 0)} | {counts.get('pass', 0)} | "
                     f"{counts.get('skip', 0)} | {extras} | {index['timings_s'].get(v, {}).get('check_s', '?')}s |")
    shapes = index.get("adapter", {})
    if shapes:
        lines += ["", "## What the adapter read from each release", "",
                  "Kinds the release lacks (or cannot be given), fields it lacks (generated specs keep "
                  "the contract's default there), and whether grouping and routing were driven (else "
                  "why not: those clauses skip with that reason).", "",
                  "| release | kinds lacking | fields lacking | grouping | routing |",
                  "|:---|:---|:---|:---|:---|"]
        for v in versions:
            shape = shapes.get(v, {})
            kinds = ", ".join(sorted(shape.get("missing_kinds", {}))) or "–"
            fields = "; ".join(f"{k}: {', '.join(f)}" for k, f in sorted(shape.get("missing_fields", {}).items()))
            grouping = shape.get("grouping", "?")
            routing = shape.get("routing", "?")
            lines.append(f"| {v} | {kinds} | {fields or '–'} | {_cell(grouping)} | {_cell(routing)} |")
    if index.get("not_checked"):
        lines += ["", "Not checked:", ""]
        lines += [f"- {v}: {why}" for v, why in index["not_checked"].items()]
    # subject x clause summary
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["subject"], row["clause"]), []).append(row)
    lines += ["", "## Findings by subject", "",
              "One row per subject (the field a signature names, else its kinds) and clause: how many "
              "signatures, the earliest first-bad release among them, and where they were fixed.", "",
              "| subject | clause | signatures | first bad | fixed in | present in |",
              "|:---|:---|---:|:---|:---|:---|"]
    order = {v: i for i, v in enumerate(versions)}
    for (what, clause), members in sorted(groups.items(), key=lambda kv: (order[min(
            (m["first_bad"] for m in kv[1]), key=order.__getitem__)], kv[0])):
        first = min((m["first_bad"] for m in members), key=order.__getitem__)
        fixed = sorted({m["fixed_in"] or "—" for m in members}, key=lambda x: order.get(x, len(order)))
        spread = sorted({v for m in members for v in m["releases"]}, key=order.__getitem__)
        lines.append(f"| `{what}` | `{clause}` | {len(members)} | {first} | {', '.join(fixed)} | "
                     f"{_span(spread, versions)} |")
    lines += _render_reviews(rows, reviews, born_by, fixed_by)
    lines += ["", "## Every finding", "",
              "**Review**: the reviewed cause (see *Reviews*) of the finding's birth, and of its fix "
              "where that release's fixes were reviewed.", "",
              "| clause | signature | first bad | fixed in | releases | review |",
              "|:---|:---|:---|:---|:---|:---|"]
    indexed = sorted(enumerate(rows), key=lambda ir: (order[ir[1]["first_bad"]], ir[1]["clause"], ir[1]["signature"]))
    for i, row in indexed:
        sig = row["signature"].replace("|", "\\|") or "(none)"
        causes = ", ".join(_review_link(m, table) for m, table in ((born_by.get(i), "review"),
                                                                   (fixed_by.get(i), "fixed"))
                           if m is not None)
        lines.append(f"| `{row['clause']}` | `{sig}` | {row['first_bad']} | {row['fixed_in'] or '—'} | "
                     f"{_span(row['releases'], versions)} | {causes or '—'} |")
    return "\n".join(lines) + "\n"


def _review_link(match: tuple[str, int], table: str) -> str:
    release, j = match
    label = f"{release} {'born' if table == 'review' else 'fixed'} #{j + 1}"
    return f"[{label}](#{_anchor(release, table, j)})"


def _anchor(release: str, table: str, j: int) -> str:
    return f"{table}-{release.replace('.', '-')}-{j + 1}"


def _render_reviews(rows: Sequence[Mapping[str, Any]], reviews: Mapping[str, Mapping[str, Any]],
                    born: Mapping[int, tuple[str, int]], fixed: Mapping[int, tuple[str, int]]) -> list[str]:
    """Per reviewed release, its causes: the findings each explains, the verdict and the reason."""
    if not reviews:
        return []
    lines = ["", "## Reviews", "",
             "Each finding first seen in a reviewed release (and each one it fixed) was reviewed "
             "against that release's source: grouped into causes, each cause checked by reading the "
             "code path and running a repro snippet. **defect**: the release breaks the clause; "
             "**coverage**: the release defines a kind or field the contract does not classify "
             "(ROLE-COVER-1's drift guard; the kit's gap); **fixed**: the release changed the code "
             "that broke it; **moved**: the defect remains under another signature; **kit**: the "
             "kit's own mistake (to be fixed in the kit). Written by hand in `docs/vllm-history/reviews/<release>.toml`; "
             "`scripts/vllm_history.py --check-reviews RELEASES` lists what no cause explains."]
    for release in sorted(reviews, key=version_key):
        data = reviews[release]
        lines += ["", f"### {release} (compared with {data.get('compared_with', '?')})", "",
                  "| # | clause | signature | verdict | findings | reason |", "|:---|:---|:---|:---|---:|:---|"]
        for table, matched in (("review", born), ("fixed", fixed)):
            for j, entry in enumerate(data.get(table, [])):
                n = sum(1 for m in matched.values() if m == (release, j))
                what = "born" if table == "review" else "fixed"
                lines.append(f'| <a id="{_anchor(release, table, j)}"></a>{what} #{j + 1} | `{_cell(entry["clause"])}` '
                             f"| `{_cell(entry['signature'])}` | {entry['verdict']} | {n} | {_cell(entry['reason'])} |")
    return lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _span(have: Sequence[str], versions: Sequence[str]) -> str:
    """``0.20.0–0.25.0, 0.34.0``: runs of consecutive checked releases."""
    runs: list[list[str]] = []
    for v in have:
        if runs and versions.index(v) == versions.index(runs[-1][-1]) + 1:
            runs[-1].append(v)
        else:
            runs.append([v])
    return ", ".join(r[0] if len(r) == 1 else f"{r[0]}–{r[-1]}" for r in runs)


REVIEWS = REPO / "docs" / "vllm-history" / "reviews"
REVIEW_VERDICTS = ("defect", "coverage", "kit")
"""``defect``: the release breaks the clause (reviewed against its source); ``coverage``: a
ROLE-COVER-1 finding, the release defines a kind or field the contract does not classify (the
drift guard doing its job: the kit's gap, not the engine's defect); ``kit``: the finding is the
kit's own mistake on that release (a false positive, to be fixed in the kit)."""
FIX_VERDICTS = ("fixed", "moved", "kit")
"""For ``[[fixed]]`` entries: ``fixed``: the release changed the code that broke the clause;
``moved``: the defect is still there under another signature (e.g. it now trips on another
attribute); ``kit``: the finding vanished because of the kit, not the engine."""


def load_reviews(reviews_dir: Path = REVIEWS) -> dict[str, dict[str, Any]]:
    """``reviews/<release>.toml`` by release: the reviewed causes of the findings first seen in
    it (``[[review]]``) and, where it fixed findings, of those fixes (``[[fixed]]``)."""
    import tomllib

    out: dict[str, dict[str, Any]] = {}
    for path in sorted(reviews_dir.glob("*.toml")):
        with path.open("rb") as handle:
            data = tomllib.load(handle)
        if data.get("release") != path.stem:
            raise ValueError(f"{path}: release = {data.get('release')!r}, expected {path.stem!r}")
        for table, allowed in (("review", REVIEW_VERDICTS), ("fixed", FIX_VERDICTS)):
            for entry in data.get(table, []):
                for key in ("clause", "signature", "verdict", "reason"):
                    if not isinstance(entry.get(key), str) or not entry[key]:
                        raise ValueError(f"{path}: an entry lacks {key!r}: {entry}")
                if entry["verdict"] not in allowed:
                    raise ValueError(f"{path}: [[{table}]] verdict {entry['verdict']!r} is not one of "
                                     f"{', '.join(allowed)}")
        out[path.stem] = data
    return out


def _review_matches(entry: Mapping[str, Any], row: Mapping[str, Any]) -> bool:
    import fnmatch

    return (fnmatch.fnmatchcase(row["clause"], entry["clause"])
            and fnmatch.fnmatchcase(row["signature"], entry["signature"]))


def reviewed(rows: Sequence[Mapping[str, Any]], reviews: Mapping[str, Mapping[str, Any]]
             ) -> tuple[dict[int, tuple[str, int]], dict[int, tuple[str, int]], list[str]]:
    """Which review explains each row: (born, fixed) maps row index -> (release, entry index),
    the first matching entry of the row's first-bad (fixed-in) release; and every entry that
    explains no row (a stale review)."""
    born: dict[int, tuple[str, int]] = {}
    fixed: dict[int, tuple[str, int]] = {}
    used: set[tuple[str, str, int]] = set()
    for i, row in enumerate(rows):
        for table, release, target in (("review", row["first_bad"], born), ("fixed", row["fixed_in"], fixed)):
            entries = reviews.get(release or "", {}).get(table, [])
            for j, entry in enumerate(entries):
                if _review_matches(entry, row):
                    target[i] = (release, j)
                    used.add((release, table, j))
                    break
    stale = [f"{release} [[{table}]] #{j + 1}: {entry['clause']} {entry['signature']}"
             for release, data in reviews.items() for table in ("review", "fixed")
             for j, entry in enumerate(data.get(table, [])) if (release, table, j) not in used]
    return born, fixed, stale


def check_reviews(releases: Sequence[str], findings_path: Path | None = None,
                  reviews_dir: Path = REVIEWS) -> list[str]:
    """Problems with the reviews of ``releases``: a finding first seen (or fixed) there that no
    review explains, a review that explains nothing, a finding judged the kit's mistake."""
    rows = json.loads((findings_path or REPORTS.parent / "findings.json").read_text())
    reviews = load_reviews(reviews_dir)
    born, fixed, stale = reviewed(rows, reviews)
    problems = []
    for i, row in enumerate(rows):
        if row["first_bad"] in releases and i not in born:
            problems.append(f"unreviewed: first bad in {row['first_bad']}: {row['clause']} {row['signature']}")
        if row["fixed_in"] in releases and "fixed" in reviews.get(row["fixed_in"], {}) and i not in fixed:
            problems.append(f"unreviewed fix in {row['fixed_in']}: {row['clause']} {row['signature']}")
        for table, match in (("review", born.get(i)), ("fixed", fixed.get(i))):
            if match is None or match[0] not in releases:
                continue
            release, j = match
            if reviews[release][table][j]["verdict"] == "kit":
                problems.append(f"the kit's mistake ({release}): {row['clause']} {row['signature']}")
    problems += [f"stale review: {s}" for s in stale if s.split(" ")[0] in releases]
    return problems


def write_doc(reports_dir: Path = REPORTS, doc: Path = DOC) -> None:
    index, loaded = _load(reports_dir)
    doc.write_text(render(index, loaded))
    (reports_dir.parent / "findings.json").write_text(
        json.dumps(history(list(index["checked"]), loaded), indent=1) + "\n")
    say(f"wrote {doc.relative_to(REPO)} and docs/vllm-history/findings.json")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/vllm_history.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--versions", default=",".join(DEFAULT_VERSIONS),
                        help="comma-separated vLLM releases (default: %(default)s)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="releases checked at a time (default: min(2, cores))")
    parser.add_argument("--profile", default="quick", choices=("quick", "default", "thorough"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--env-root", type=Path, default=ENV_ROOT,
                        help="where the per-release environments are cached (default: %(default)s)")
    parser.add_argument("--base-python", default=sys.executable,
                        help="the base CPU environment's python (torch 2.13.0 and the 0.34.0 pins; "
                             "default: this interpreter)")
    parser.add_argument("--first-note", default="",
                        help="why releases before the first one checked cannot be (for the document)")
    parser.add_argument("--reuse-reports", action="store_true",
                        help="keep a release's report if it exists with the same profile and seed")
    parser.add_argument("--render-only", action="store_true", help="re-render docs/vllm-history.md only")
    parser.add_argument("--date", help="date for the header (default: today, UTC)")
    parser.add_argument("--check-reviews", metavar="RELEASES",
                        help="list the findings first seen (or fixed) in these comma-separated releases that "
                             "docs/vllm-history/reviews/<release>.toml does not explain, and exit 1 if any")
    args = parser.parse_args(argv)
    if args.check_reviews:
        problems = check_reviews([v.strip() for v in args.check_reviews.split(",") if v.strip()])
        for problem in problems:
            print(problem)
        say(f"{len(problems)} problem(s) with the reviews of {args.check_reviews}")
        return 1 if problems else 0
    if args.render_only:
        write_doc()
        return 0
    versions = sorted({v.strip() for v in args.versions.split(",") if v.strip()}, key=version_key)
    REPORTS.mkdir(parents=True, exist_ok=True)
    todo = [v for v in versions if not (args.reuse_reports and _reusable(v, args.profile, args.seed))]
    results = run_all(todo, args.base_python, args.env_root.resolve(), args.profile, args.seed, args.jobs)
    previous = json.loads((REPORTS / INDEX).read_text()) if (REPORTS / INDEX).exists() else {}
    checked = [v for v in versions if (REPORTS / f"{v}.json").exists() and not results.get(v, {}).get("skipped")]
    index = {
        "command": (f"python3 scripts/vllm_history.py --versions {','.join(versions)} --profile {args.profile} "
                    f"--seed {args.seed} --jobs {args.jobs}"),
        "date": args.date or datetime.datetime.now(datetime.UTC).date().isoformat(),
        "profile": args.profile, "seed": args.seed,
        "checked": checked,
        "not_checked": {v: r["skipped"] for v, r in results.items() if r.get("skipped")},
        "envs": {**previous.get("envs", {}), **{v: {"extras": r["env"].get("extras", {})}
                                                for v, r in results.items() if r.get("env")}},
        "adapter": {**previous.get("adapter", {}), **{v: r["adapter"] for v, r in results.items()
                                                       if r.get("adapter")}},
        "timings_s": {**previous.get("timings_s", {}),
                      **{v: {"env_s": r.get("build_s"), "check_s": r.get("check_s")} for v, r in results.items()
                         if "check_s" in r}},
        "first_note": args.first_note or previous.get("first_note") or f"First release checked: {checked[0]}.",
    }
    (REPORTS / INDEX).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    write_doc()
    return 0


def _reusable(version: str, profile: str, seed: int) -> bool:
    path = REPORTS / f"{version}.json"
    if not path.exists():
        return False
    report = json.loads(path.read_text())
    return (report.get("engine_version"), report.get("profile"), report.get("seed")) == (version, profile, seed)


if __name__ == "__main__":
    sys.exit(main())
