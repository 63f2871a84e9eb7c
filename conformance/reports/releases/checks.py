"""The check of one vLLM release's source tree, and the report as the history keeps it.

``kvcontract check --engine vllm --engine-path <env>/tree --no-xfails --profile P --seed S``
in the release's environment (:mod:`.environments`): ``import vllm`` resolves to the
release's tree. :func:`slim` keeps each record's identity and message; :func:`adapter_shape`
records what the adapter read from the release.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kvcontract.conformance.reports.releases.environments import REPO, env_vars

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



def check_path(env_dir: Path, profile: str, seed: int) -> Path:
    """Where a release's check at (profile, seed) keeps its full report: one file the history and
    the matrix share, so the one run later takes the other's check of this kit."""
    return env_dir / f"check-{profile}-seed{seed}.json"


def reusable(target: Path, version: str, profile: str, seed: int) -> dict[str, Any] | None:
    """The report at ``target`` if this kit (same source digest) checked this release at (profile, seed)."""
    from kvcontract.reports import kit_digest

    stamp = target.with_suffix(".kit")
    if not (target.is_file() and stamp.is_file()) or stamp.read_text().strip() != kit_digest(fresh=True):
        return None
    try:
        report: dict[str, Any] = json.loads(target.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    same = (report.get("engine_version"), report.get("profile"), report.get("seed")) == (version, profile, seed)
    return report if same else None


def run_check(version: str, python: str, env_dir: Path, profile: str, seed: int,
              target: Path | None = None) -> tuple[dict[str, Any] | None, str]:
    """``kvcontract check`` of the release's tree into ``target`` (default :func:`check_path`: the
    full report, snippets and witnesses, stamped with the kit's source digest); the report, or None
    and why there is none. A report this kit already made there is taken, not run again."""
    from kvcontract.reports import kit_digest

    target = target or check_path(env_dir, profile, seed)
    before = kit_digest(fresh=True)
    kept = reusable(target, version, profile, seed)
    if kept is not None:
        return kept, ""
    cmd = [python, "-m", "kvcontract", "check", "--engine", "vllm", "--engine-path", str(env_dir / "tree"),
           "--no-xfails", "--profile", profile, "--seed", str(seed), "--json", str(target), "--quiet"]
    from kvcontract.conformance.engines.vllm.corpus import shipped_path

    if shipped_path(version).is_file():  # built from this release's wheel, whose Python files the tree is
        cmd += ["--corpus", str(shipped_path(version))]
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
    if kit_digest(fresh=True) == before:  # the kit did not change while it ran: say which kit made it
        target.with_suffix(".kit").write_text(before + "\n")
    return report, ""


SLIM_RECORD = ("clause", "mode", "status", "signature", "title", "level", "examples", "where")
SLIM_MESSAGE = 240


def slim(report: Mapping[str, Any]) -> dict[str, Any]:
    """The report as the history keeps it: header, summary and each record's identity and
    message (repro snippets and witnesses stay in ``<env>/check-<profile>-seed<S>.json``; re-run the
    release's check to get them)."""
    out = {k: v for k, v in report.items() if k not in ("records", "clauses", "coverage", "engine_log")}
    out["records"] = [{**{k: r[k] for k in SLIM_RECORD if k in r},
                       "message": (r.get("message") or "")[:SLIM_MESSAGE]} for r in report["records"]]
    return out
