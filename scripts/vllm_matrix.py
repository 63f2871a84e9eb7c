#!/usr/bin/env python3
"""The vLLM release matrix: every clause x release x interpreter mode.

usage: python3 scripts/vllm_matrix.py [--versions 0.29.0,...,0.34.0] [--profile default]
                                      [--seed 0] [--venv-root DIR] [--python PY]
                                      [--reuse-reports] [--render-only] [--date YYYY-MM-DD]

For each release (default: 0.29.0 through 0.34.0, each needs a pin file
requirements/vllm-<release>-cpu.txt):

1. ensure a virtual environment ``<venv-root>/.venv-vllm-<release>`` (venv-root:
   --venv-root, else $KVCONTRACT_MATRIX_VENVS, else the repository root; ``.venv-*/``
   is ignored by git) and install the CPU-only release into it with
   ``scripts/install-vllm.sh`` (idempotent: a matching environment is left alone);
2. install this kvcontract checkout into it (editable, ``--no-deps``) plus the light
   dependencies it lacks (hypothesis; pydantic), under a constraint that keeps the
   release's pins and torch exactly as they are;
3. run ``kvcontract check --engine vllm --no-xfails --profile P --seed S --json
   docs/vllm-matrix/reports/<release>.json --quiet`` (exit 1 = clauses fail, expected;
   any other exit status stops the script before anything is rendered);

then write ``docs/vllm-matrix/reports/index.json`` (command, date, releases, timings,
and what the adapter says each release lacks: kinds, fields, grouping module) and render ``docs/vllm-matrix.md``: a table clause x (release, mode), each failing cell
linked to its repro snippet further down. The document is a pure function of the JSON
files, so ``--render-only`` (no installs, no checks) reproduces it byte for byte.
``--reuse-reports`` keeps the report of a release already checked with the same
profile and seed (to resume an interrupted run); without it every release is checked.
A finished environment takes about 3 GB; a re-run reuses it.

Regenerate by hand when the suite or the releases change; CI checks only the pinned
release (0.34.0). Commit the document together with the reports (they hold the
snippets, and tests/test_vllm_matrix.py re-renders them); note that .gitignore's
``reports/`` pattern also matches docs/vllm-matrix/reports/.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_VERSIONS = ("0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0")
DOC = Path("docs/vllm-matrix.md")
REPORTS = Path("docs/vllm-matrix/reports")
INDEX = "index.json"
MODES = ("normal", "optimized")
MODE_LABEL = {"normal": "normal", "optimized": "-O"}
LINKED = frozenset({"fail", "error", "xpass", "xfail"})
"""Statuses whose cell links to the record's section (they carry a message/snippet)."""
LIGHT_DEPS = ("hypothesis", "pydantic")
TORCH_VERSION = "2.13.0"


def say(message: str) -> None:
    print(f"vllm-matrix: {message}", flush=True)


# -- environments and checks ----------------------------------------------------

def venv_dir(root: Path, version: str) -> Path:
    return root / f".venv-vllm-{version}"


def ensure_venv(venv: Path, python: str) -> Path:
    py = venv / "bin" / "python"
    if not py.exists():
        say(f"creating {venv}")
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
    return py


def _installed(py: Path, dist: str) -> str | None:
    code = ("import importlib.metadata as m, sys\n"
            "try: print(m.version(sys.argv[1]))\n"
            "except m.PackageNotFoundError: pass")
    out = subprocess.run([str(py), "-c", code, dist], check=True, capture_output=True, text=True).stdout
    return out.strip() or None


def _kvcontract_here(py: Path) -> bool:
    """kvcontract is importable from this checkout (editable install of REPO)."""
    code = "import kvcontract, pathlib, sys; print(pathlib.Path(kvcontract.__file__).resolve().parent)"
    proc = subprocess.run([str(py), "-c", code], capture_output=True, text=True, cwd="/")
    return proc.returncode == 0 and Path(proc.stdout.strip()) == REPO


def install_kvcontract(py: Path, version: str) -> None:
    """kvcontract (editable, no deps) and its light deps, the release's pins held."""
    pins = REPO / "requirements" / f"vllm-{version}-cpu.txt"
    held = [line.split("#", 1)[0].strip() for line in pins.read_text().splitlines()]
    held = [h for h in held if h] + [f"torch=={_installed(py, 'torch')}", f"vllm=={version}"]
    constraint = venv_dir_of(py) / "kvcontract-matrix-constraints.txt"
    constraint.write_text("\n".join(held) + "\n")
    pip = [str(py), "-m", "pip", "install", "--quiet", "--constraint", str(constraint)]
    missing = [d for d in LIGHT_DEPS if _installed(py, d) is None]
    if missing:
        say(f"installing {' '.join(missing)} (release pins held)")
        subprocess.run([*pip, *missing], check=True)
    if not _kvcontract_here(py):
        say(f"installing kvcontract from {REPO} (editable, --no-deps)")
        subprocess.run([*pip, "--no-deps", "-e", str(REPO)], check=True)
    if not _kvcontract_here(py):
        raise SystemExit(f"vllm-matrix: kvcontract from {REPO} is not importable with {py}")


def venv_dir_of(py: Path) -> Path:
    return py.parent.parent


def check_command(profile: str, seed: int, json_path: str) -> list[str]:
    return ["kvcontract", "check", "--engine", "vllm", "--no-xfails", "--profile", profile,
            "--seed", str(seed), "--json", json_path, "--quiet"]


ADAPTER_PROBE = """
import json
from kvcontract.conformance.vllm_engine import VllmEngine
from kvcontract.reference import SPEC_KINDS
engine = VllmEngine()
missing = engine.unsupported_kinds()
print(json.dumps({
    "grouping_module": engine.planning_module,
    "missing_kinds": sorted(k.__name__ for k in missing),
    "missing_fields": {k.__name__: sorted(engine.unsupported_fields(k)) for k in SPEC_KINDS
                       if k not in missing and engine.unsupported_fields(k)},
}, sort_keys=True))
"""


def adapter_shape(version: str, root: Path) -> dict[str, Any]:
    """What the adapter says this release lacks (kinds skipped, fields kept at their defaults)."""
    py = venv_dir(root, version) / "bin" / "python"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", VLLM_LOGGING_LEVEL="ERROR")
    proc = subprocess.run([str(py), "-c", ADAPTER_PROBE], capture_output=True, text=True, env=env, cwd="/")
    if proc.returncode != 0:
        raise SystemExit(f"vllm-matrix: the adapter probe failed on vllm {version}:\n{proc.stderr}")
    shape: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return shape


def run_release(version: str, root: Path, python: str, reports: Path, profile: str,
                seed: int) -> dict[str, float]:
    """Install and check one release; returns its timings in seconds."""
    start = time.monotonic()
    venv = venv_dir(root, version)
    py = ensure_venv(venv, python)
    subprocess.run(["bash", str(REPO / "scripts" / "install-vllm.sh"), version, str(py)], check=True)
    install_kvcontract(py, version)
    installed = time.monotonic()
    out = reports / f"{version}.json"
    tmp = out.with_name(f".{out.name}.partial")
    tmp.unlink(missing_ok=True)
    cmd = check_command(profile, seed, str(tmp))
    cmd[0] = str(venv / "bin" / "kvcontract")
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", VLLM_LOGGING_LEVEL="ERROR")
    say(f"vllm {version}: {' '.join(cmd[1:])}")
    proc = subprocess.run(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
    if proc.returncode not in (0, 1) or not tmp.exists():
        sys.stdout.write(proc.stdout)
        raise SystemExit(f"vllm-matrix: the check of vllm {version} exited with {proc.returncode} "
                         "(0 or 1 expected); nothing rendered")
    report = json.loads(tmp.read_text())
    if report.get("engine_version") != version:
        raise SystemExit(f"vllm-matrix: {venv} runs vllm {report.get('engine_version')}, not {version}")
    tmp.chmod(0o644)  # written by mkstemp (0600); a committed report is world-readable
    tmp.replace(out)
    done = time.monotonic()
    errors = [f"{r['clause']}/{r['mode']}: {r['message']}" for r in report["records"] if r["status"] == "error"]
    if errors:
        say(f"WARNING: vllm {version}: {len(errors)} record(s) ended in error (an adapter or suite "
            "problem, not a finding):\n  " + "\n  ".join(errors))
    timing = {"install_s": round(installed - start, 1), "check_s": round(done - installed, 1)}
    say(f"vllm {version}: {report['summary']['counts']} (install {timing['install_s']}s, "
        f"check {timing['check_s']}s)")
    return timing


# -- rendering ------------------------------------------------------------------

def anchor(version: str, clause: str, mode: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", f"vllm-{version}-{clause}-{mode}".lower()).strip("-")


def load(reports: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The index and the reports it names, from a reports folder."""
    index = json.loads((reports / INDEX).read_text())
    return index, {v: json.loads((reports / f"{v}.json").read_text()) for v in index["versions"]}


def _clause_order(reports: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(clause, level) in report order (SPEC.md order), union over releases."""
    seen: dict[str, str] = {}
    for report in reports:
        for r in report["records"]:
            seen.setdefault(r["clause"], r["level"])
    return list(seen.items())


def _as_normal(snippet: str) -> str:
    """An optimized-mode snippet as the normal interpreter's would read."""
    return snippet.replace("# run with: python -O repro.py", "# run with: python repro.py", 1)


def _text_block(text: str, lang: str = "text") -> list[str]:
    fence = "```"
    while fence in text:
        fence += "`"
    return [f"{fence}{lang}", text.rstrip("\n"), fence]


def render(index: Mapping[str, Any], reports: Mapping[str, Mapping[str, Any]],
           reports_link: str = "vllm-matrix/reports") -> str:
    """The matrix document; a pure function of the index and the reports."""
    versions = list(index["versions"])
    ordered = [reports[v] for v in versions]
    kv_versions = sorted({r["kvcontract_version"] for r in ordered})
    by_key = {(v, r["clause"], r["mode"]): r for v in versions for r in reports[v]["records"]}
    clauses = _clause_order(ordered)

    lines = [
        "# vLLM release matrix",
        "",
        "<!-- Generated by scripts/vllm_matrix.py from docs/vllm-matrix/reports/*.json;"
        " do not edit by hand. -->",
        "",
        f"Generated on {index['date']} with:",
        "",
        "```sh",
        index["command"],
        "```",
        "",
        f"- kvcontract {', '.join(kv_versions)}; profile `{index['profile']}`; seed {index['seed']}; "
        "`--no-xfails` (raw results: no expectation file is applied).",
        "- Each release was installed CPU-only (no GPU stack) by `scripts/install-vllm.sh` from "
        "`requirements/vllm-<release>-cpu.txt` into its own environment and checked with "
        f"`{' '.join(check_command(index['profile'], index['seed'], 'docs/vllm-matrix/reports/<release>.json'))}`.",
        "- Columns: `normal` is the normal interpreter, `-O` is `python -O` (asserts removed). "
        "A **fail** or **error** cell links to its finding and repro snippet below; "
        "`skip` means the release cannot express the clause (reasons below). `pass` means no "
        "counterexample among the examples the profile draws, not a proof: a sparse bug can pass "
        "under one seed and fail under another.",
        "- CI checks only the pinned release (0.34.0) against its expectation file; this matrix is "
        "regenerated by hand when the suite or the releases change.",
        "",
        "## Matrix",
        "",
    ]
    header = ["clause", "level"] + [f"{v} {MODE_LABEL[m]}" for v in versions for m in MODES]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join([":---", ":---"] + [":---:"] * (len(header) - 2)) + "|")
    for clause, level in clauses:
        cells = [f"`{clause}`", level]
        for v in versions:
            for m in MODES:
                rec = by_key.get((v, clause, m))
                if rec is None:
                    cells.append("–")
                elif rec["status"] in LINKED:
                    cells.append(f"[**{rec['status']}**](#{anchor(v, clause, m)})")
                else:
                    cells.append(rec["status"])
        lines.append("| " + " | ".join(cells) + " |")

    lines += ["", "## Summary", "", "| release | " + " | ".join(MODE_LABEL[m] for m in MODES)
              + " | failing clauses | report |",
              "|:---|" + "|".join(":---" for _ in MODES) + "|:---|:---|"]
    for v in versions:
        cells = [v]
        for m in MODES:
            counts: dict[str, int] = {}
            for r in reports[v]["records"]:
                if r["mode"] == m:
                    counts[r["status"]] = counts.get(r["status"], 0) + 1
            cells.append(", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "–")
        failing = [c for c, _ in clauses
                   if any(by_key.get((v, c, m), {}).get("status") in LINKED for m in MODES)]
        cells.append(", ".join(failing) or "none")
        cells.append(f"[{v}.json]({reports_link}/{v}.json)")
        lines.append("| " + " | ".join(cells) + " |")

    lines += ["", "## Findings", ""]
    lines.append("Each finding is the example hypothesis shrank to (or the record's error), "
                 "with a self-contained repro: run it in an environment with that release "
                 "installed (`python` or `python -O` as its header says).")
    for v in versions:
        lines += ["", f"### vLLM {v}"]
        records = [r for r in reports[v]["records"] if r["status"] in LINKED]
        if not records:
            lines += ["", "No failing clause."]
        for r in records:
            lines += ["", f'<a id="{anchor(v, r["clause"], r["mode"])}"></a>', "",
                      f"#### {v} · {r['clause']} · {MODE_LABEL[r['mode']]} — {r['status']}", "",
                      f"{r['title']} ({r['level']}).", ""]
            lines += _text_block(r["message"] or "(no message)")
            twin = by_key.get((v, r["clause"], "normal")) if r["mode"] == "optimized" else None
            if (twin is not None and twin["status"] in LINKED and r.get("snippet")
                    and twin["message"] == r["message"] and _as_normal(r["snippet"]) == twin["snippet"]):
                lines += ["", f"Repro: [the normal interpreter's]"
                              f"(#{anchor(v, r['clause'], 'normal')}), run with `python -O`."]
            elif r.get("snippet"):
                lines += ["", "Repro:", ""]
                lines += _text_block(r["snippet"], "python")
    shapes = index.get("adapter") or {}
    if any(v in shapes for v in versions):
        lines += ["", "## What each release lacks", "",
                  "Kinds and fields of the contract that a release does not have, as the adapter "
                  "reports them. Generated specs keep such a field at the contract's default and "
                  "the release is never asked about it; a clause that needs only missing fields "
                  "is skipped with its reason (below).", ""]
        shown = [v for v in versions if v in shapes]
        lines.append("| kind | " + " | ".join(shown) + " |")
        lines.append("|:---|" + "|".join(":---" for _ in shown) + "|")
        kinds = sorted({k for v in shown for k in shapes[v].get("missing_fields", {})}
                       | {k for v in shown for k in shapes[v].get("missing_kinds", [])})
        for kind in kinds:
            cells = [f"`{kind}`"]
            for v in shown:
                if kind in shapes[v].get("missing_kinds", []):
                    cells.append("**no such kind**")
                else:
                    cells.append(", ".join(shapes[v].get("missing_fields", {}).get(kind, [])) or "–")
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("| grouping from | " + " | ".join(
            f"`{shapes[v].get('grouping_module')}`" for v in shown) + " |")
    skips = [(v, r) for v in versions for r in reports[v]["records"] if r["status"] == "skip"]
    if skips:
        lines += ["", "## Skips", "", "| release | clause | mode | reason |", "|:---|:---|:---|:---|"]
        lines += [f"| {v} | `{r['clause']}` | {MODE_LABEL[r['mode']]} | "
                  f"{r['message'].replace('|', chr(92) + '|')} |" for v, r in skips]
    return "\n".join(lines) + "\n"


def write_doc(doc: Path, reports: Path) -> None:
    index, loaded = load(reports)
    rel = os.path.relpath(reports, doc.parent)
    text = render(index, loaded, reports_link=Path(rel).as_posix())
    tmp = doc.with_name(f".{doc.name}.tmp")
    tmp.write_text(text)
    tmp.replace(doc)
    say(f"wrote {doc}")


def _reusable(path: Path, version: str, profile: str, seed: int) -> bool:
    if not path.exists():
        return False
    report = json.loads(path.read_text())
    return (report.get("engine_version"), report.get("profile"), report.get("seed")) == (version, profile, seed)


def canonical_command(versions: Sequence[str], profile: str, seed: int) -> str:
    return (f"python3 scripts/vllm_matrix.py --versions {','.join(versions)} "
            f"--profile {profile} --seed {seed}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/vllm_matrix.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--versions", default=",".join(DEFAULT_VERSIONS),
                        help="comma-separated vLLM releases (default: %(default)s)")
    parser.add_argument("--profile", default="default", choices=("quick", "default", "thorough"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--venv-root", type=Path,
                        default=Path(os.environ.get("KVCONTRACT_MATRIX_VENVS", REPO)),
                        help="folder for the .venv-vllm-<release> environments "
                             "(default: $KVCONTRACT_MATRIX_VENVS or the repository root)")
    parser.add_argument("--python", default=os.environ.get("KVCONTRACT_PYTHON", "python3"),
                        help="Python >= 3.11 that creates missing environments")
    parser.add_argument("--render-only", action="store_true",
                        help="re-render docs/vllm-matrix.md from the reports; no installs, no checks")
    parser.add_argument("--reuse-reports", action="store_true",
                        help="keep an existing report of a release (same profile and seed) instead of "
                             "installing and checking it again")
    parser.add_argument("--date", help="date for the header (default: today, UTC)")
    args = parser.parse_args(argv)

    doc, reports = REPO / DOC, REPO / REPORTS
    if args.render_only:
        write_doc(doc, reports)
        return 0
    versions = [v.strip() for v in args.versions.split(",") if v.strip()]
    for v in versions:
        if not (REPO / "requirements" / f"vllm-{v}-cpu.txt").exists():
            parser.error(f"no pin file requirements/vllm-{v}-cpu.txt for vLLM {v}")
    reports.mkdir(parents=True, exist_ok=True)
    previous = json.loads((reports / INDEX).read_text()).get("timings_s", {}) if (reports / INDEX).exists() else {}
    previous_shapes = (json.loads((reports / INDEX).read_text()).get("adapter", {})
                       if (reports / INDEX).exists() else {})
    timings, shapes = {}, {}
    root = args.venv_root.resolve()
    for v in versions:
        if args.reuse_reports and _reusable(reports / f"{v}.json", v, args.profile, args.seed):
            say(f"vllm {v}: reusing {REPORTS / f'{v}.json'}")
            timings[v] = previous.get(v, {})
        else:
            timings[v] = run_release(v, root, args.python, reports, args.profile, args.seed)
        if (venv_dir(root, v) / "bin" / "python").exists():
            shapes[v] = adapter_shape(v, root)
        elif v in previous_shapes:
            shapes[v] = previous_shapes[v]
    index = {
        "command": canonical_command(versions, args.profile, args.seed),
        "date": args.date or datetime.datetime.now(datetime.UTC).date().isoformat(),
        "profile": args.profile,
        "seed": args.seed,
        "versions": versions,
        "adapter": shapes,
        "timings_s": timings,
    }
    (reports / INDEX).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    write_doc(doc, reports)
    for v, t in timings.items():
        say(f"{v}: install {t.get('install_s', '?')}s, check {t.get('check_s', '?')}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
