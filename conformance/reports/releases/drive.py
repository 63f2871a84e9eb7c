"""What the adapter could and could not drive, per vLLM release and per declared engine:
``docs/engine-drive.md`` (``python3 scripts/engine_drive.py``).

For each release (its environment: :mod:`.environments`) and each installed engine environment
(:mod:`.engines`), the adapter's reading of the engine (:data:`PROBE`: kinds and fields it lacks,
grouping, planning, routing, the homes that import) and a quick check (``--profile quick
--no-xfails``, both modes) whose *kit errors* are counted: a record of status ``error`` is the
kit failing to judge a clause, which must not happen on any release the kit claims (the
slow-lane test ``tests/test_release_drive.py`` keeps one release before 0.29 at zero). A clause
that cannot be driven skips with its reason, which the table shows.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kvcontract.conformance.engines import environments as runtime
from kvcontract.conformance.reports.releases.environments import (
    ENV_ROOT,
    REPO,
    build_env,
    env_vars,
    say,
)
from kvcontract.reports import markdown_table, write_atomic

DOC = REPO / "docs" / "engine-drive.md"
DATA = REPO / "docs" / "engine-drive.json"
VERSIONS = ("0.7.0", "0.8.0", "0.8.5", "0.10.2", "0.11.0", "0.15.1", "0.20.0", "0.23.0", "0.25.0", "0.28.0",
            "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0")
"""The releases the history covers, and 0.23.0 (vllm-ascend's base)."""

PROBE = """
import json, sys
from kvcontract.conformance.engines.registry import resolve_engine
from kvcontract.conformance.engines.vllm.loading import try_import
from kvcontract.reference import SPEC_KINDS
engine = resolve_engine(sys.argv[1])
missing = engine.unsupported_kinds()
router = engine.router()
homes = engine.homes
lacking = {}
for module in homes.modules():
    found, why = try_import(module)
    if found is None and "does not exist here" not in why:  # an alternative a release lacks is no failure
        lacking[module] = why
print(json.dumps({
    "version": engine.version,
    "base_version": engine.base_version,
    "grouping_module": engine.planning_module,
    "grouping": engine.grouping_unavailable() or "driven",
    "planning": engine.planning_unavailable() or "driven",
    "routing": "driven" if router is not None else engine.router_unavailable(),
    "layout": "yes" if engine._has_layout() else "none (plans without one)",
    "missing_kinds": sorted(k.__name__ for k in missing),
    "missing_fields": {k.__name__: sorted(engine.unsupported_fields(k)) for k in SPEC_KINDS
                       if k not in missing and engine.unsupported_fields(k)},
    "homes_missing": lacking,
    "stubs": engine.stubs_used, "patches": engine.patches_loaded,
}, sort_keys=True))
"""


def _run(cmd: Sequence[str], env: Mapping[str, str], timeout: int = 1200) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), capture_output=True, text=True, env=dict(env), cwd=str(REPO), timeout=timeout)


def drive(engine: str, env: Mapping[str, str], python: str, target: Path) -> dict[str, Any]:
    """The adapter's reading of ``engine`` and a quick check's kit errors, in ``env``."""
    proc = _run([python, "-c", PROBE, engine], env)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        return {"engine": engine, "unavailable": lines[-1] if lines else f"probe exited {proc.returncode}"}
    out: dict[str, Any] = {"engine": engine, **json.loads(proc.stdout.strip().splitlines()[-1])}
    check = _run([python, "-m", "kvcontract", "check", "--engine", engine, "--no-xfails", "--profile", "quick",
                  "--seed", "0", "--json", str(target), "--quiet"], env)
    if check.returncode not in (0, 1) or not target.exists():
        out["check"] = f"exited {check.returncode}: {(check.stderr.strip().splitlines() or [''])[-1][:300]}"
        return out
    report = json.loads(target.read_text())
    records = report["records"]
    out["errors"] = sorted({f"{r['clause']} [{r['mode']}]: {(r.get('message') or '')[:160]}"
                            for r in records if r["status"] == "error"})
    out["skips"] = sorted({f"{r['clause'].split('-')[0]}: {(r.get('message') or '')[:200]}"
                           for r in records if r["status"] == "skip" and r["clause"] != "ERROR-OPTIMIZE-1"})
    out["counts"] = report["summary"]["counts"]
    return out


def release(version: str, python: str) -> dict[str, Any]:
    state = build_env(version, python, ENV_ROOT)
    if not state.get("ok"):
        return {"engine": f"vllm {version}", "unavailable": "; ".join(
            f"{m}: {p['error']}" for m, p in state.get("problems", {}).items())}
    env_dir = ENV_ROOT / f"vllm-{version}"
    tree = env_dir / "tree"
    env = env_vars(env_dir, [str(tree), str(REPO)])
    found = drive(f"vllm@{tree}", env, python, env_dir / "drive-check.json")
    found["engine"] = f"vllm {version}"
    return found


def engine(name: str, python: str) -> dict[str, Any]:
    try:
        env = runtime.worker_env(name, env_vars(Path("/nonexistent"), [str(REPO)]))
    except runtime.EnvironmentMissing as exc:
        return {"engine": name, "unavailable": str(exc)}
    return drive(name, env, python, runtime.env_dir(name) / "drive-check.json")


def _cell(row: Mapping[str, Any], key: str) -> str:
    value = row.get(key, "")
    return "driven" if value == "driven" else f"**no**: {str(value)[:220]}" if value else "–"


def render(rows: Sequence[Mapping[str, Any]], date: str) -> str:
    lines = ["# What the adapter could and could not drive", "",
             "<!-- Generated by scripts/engine_drive.py from docs/engine-drive.json; do not edit by hand. -->", "",
             f"Generated on {date}: per vLLM release (its environment, as `scripts/vllm_history.py` builds it) "
             "and per declared engine installed here (`bash scripts/install-engine.sh NAME`), what the adapter "
             "read and drove, and a `kvcontract check --profile quick --no-xfails` whose **kit errors** (records "
             "of status `error`: the kit failing to judge) are counted. A part that cannot be driven makes its "
             "clauses skip with the reason shown.", ""]
    table = []
    for r in rows:
        if "unavailable" in r:
            table.append([r["engine"], "–", "–", "–", "–", "–", f"not checked: {r['unavailable'][:200]}"])
            continue
        counts = r.get("counts", {})
        kit_errors = len(r.get("errors", []))
        table.append([r["engine"], str(r.get("grouping_module") or "–"), _cell(r, "grouping"), _cell(r, "planning"),
                      _cell(r, "routing"), str(r.get("layout", "–")),
                      f"{kit_errors} kit errors; " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
                      if "counts" in r else str(r.get("check", "–"))])
    lines += markdown_table(["engine", "grouping module", "grouping", "planning", "routing", "cache layout",
                             "quick check (clause x mode)"], table)
    lines += ["", "## Kinds and fields each could not be given", "",
              "Kinds the engine lacks (their clauses skip them) and fields it lacks (generated specs keep the "
              "contract's default there); for a plugin, the modules stood in for and the patches loaded.", ""]
    for r in rows:
        if "unavailable" in r:
            continue
        fields = "; ".join(f"{k}: {', '.join(v)}" for k, v in r.get("missing_fields", {}).items()) or "none"
        lines.append(f"- **{r['engine']}** (engine version {r.get('version')}): kinds lacking: "
                     f"{', '.join(r.get('missing_kinds', [])) or 'none'}; fields lacking: {fields}"
                     + (f"; stand-ins: {', '.join(r['stubs'])}; patches: {', '.join(r['patches'])}"
                        if r.get("stubs") or r.get("patches") else "")
                     + (f"; homes that fail to import: {'; '.join(w for w in r['homes_missing'].values() if 'does not exist here' not in w)}"
                        if any("does not exist here" not in w for w in r.get("homes_missing", {}).values()) else ""))
    driven = {str(r["engine"]).removeprefix("vllm ") for r in rows}
    left = [v for v in VERSIONS if v not in driven]
    if left:
        lines += ["", f"Releases of the history not driven in this run: {', '.join(left)} "
                  f"(`python3 scripts/engine_drive.py --versions {','.join(left)}`)."]
    found = [(r["engine"], e) for r in rows for e in r.get("errors", [])]
    lines += ["", "## Kit errors", ""]
    lines += [f"- {name}: {e}" for name, e in found] or ["None: every clause was judged or skipped with its reason."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="engine_drive", description=__doc__.split("\n\n")[0])
    parser.add_argument("--versions", default=",".join(VERSIONS))
    parser.add_argument("--engines", default="aphrodite,vllm-ascend")
    parser.add_argument("--render-only", action="store_true", help=f"re-render {DOC.name} from {DATA.name}")
    args = parser.parse_args(argv)
    date = datetime.datetime.now(datetime.UTC).date().isoformat()
    if args.render_only:
        data = json.loads(DATA.read_text())
        write_atomic(DOC, render(data["rows"], data["date"]))
        return 0
    rows = []
    for version in [v for v in args.versions.split(",") if v]:
        say(f"{version}: driving")
        rows.append(release(version, sys.executable))
        say(f"{version}: {len(rows[-1].get('errors', []))} kit errors")
    for name in [n for n in args.engines.split(",") if n]:
        say(f"{name}: driving")
        rows.append(engine(name, sys.executable))
    try:  # the rows of releases and engines not driven this time are kept
        previous = {r["engine"]: r for r in json.loads(DATA.read_text())["rows"]}
    except (OSError, ValueError, KeyError):
        previous = {}
    previous.update({r["engine"]: r for r in rows})
    kept = sorted(previous.values(), key=_order)
    write_atomic(DATA, json.dumps({"date": date, "rows": kept}, indent=1) + "\n")
    write_atomic(DOC, render(kept, date))
    return 1 if any(r.get("errors") for r in rows) else 0


def _order(row: Mapping[str, Any]) -> tuple[int, tuple[int, ...], str]:
    """Releases in version order, then the declared engines by name."""
    name = str(row["engine"])
    if name.startswith("vllm "):
        return (0, tuple(int(p) for p in name.removeprefix("vllm ").split(".")), "")
    return (1, (), name)


if __name__ == "__main__":
    sys.exit(main())
