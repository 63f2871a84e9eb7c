"""The vLLM release matrix: per release, the distinct findings, and whether every seed finds them.

``python3 scripts/vllm_matrix.py`` runs :func:`main`. Each release is checked as a source
tree in the environment :mod:`.environments` builds and caches for it (``<env-root>/vllm-<release>/``: the wheel's Python files, the
light packages it needs, over the base CPU environment), once per seed:
``kvcontract check --engine vllm --engine-path <env>/tree --no-xfails --profile P --seed S``,
(release, seed) pairs in parallel in a process pool (``--jobs``), a progress line each.

A *finding* is a record present in the report (status fail, xfail or error): clause x
mode x signature. The matrix keeps, per release:

- ``docs/vllm-matrix/reports/<release>.json``: the first seed's report, slimmed as the
  history keeps it (identity and message of every record; the full report with
  snippets and witnesses stays in ``<env>/check-<profile>-seed<S>.json``, which the history
  shares: a check this kit already made is taken, not run again);
- in ``docs/vllm-matrix/reports/index.json``: per seed, the number of findings, a
  digest of their sorted keys and the check's wall time; and every finding that some
  seed has and another lacks (an unstable verdict).

``docs/vllm-matrix.md`` is a pure function of those files (``--render-only`` reproduces
it byte for byte): per release the findings in each mode and whether all seeds agree;
per clause the findings per release; and every finding, release by release.
Regenerate by hand when the suite or the releases change; CI checks only the pinned
release (0.34.0) against its expectation file.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import hashlib
import json
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kvcontract.conformance.reports.diff import PRESENT
from kvcontract.conformance.reports.releases.checks import adapter_shape, run_check, slim
from kvcontract.conformance.reports.releases.environments import (
    ENV_ROOT,
    REPO,
    build_env,
    version_key,
)
from kvcontract.options import comma_list
from kvcontract.reports import markdown_table, md_cell
from kvcontract.usage import UsageError

__all__ = ["DOC", "REPORTS", "digest", "findings", "load_reports", "main", "render", "seed_summary", "unstable",
           "write_doc"]

DOC = REPO / "docs" / "vllm-matrix.md"
REPORTS = REPO / "docs" / "vllm-matrix" / "reports"
INDEX = "index.json"
DEFAULT_VERSIONS = ("0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0")
DEFAULT_SEEDS = (0, 1, 2, 3, 4)
MODES = ("normal", "optimized")
MODE_LABEL = {"normal": "normal", "optimized": "-O"}

Key = tuple[str, str, str]
"""A finding: (clause, mode, signature)."""


def say(message: str) -> None:
    print(f"vllm-matrix: {message}", flush=True)


def findings(report: Mapping[str, Any]) -> dict[Key, dict[str, Any]]:
    """The report's findings by key (the first record of a key wins; keys are unique in a v2 report)."""
    out: dict[Key, dict[str, Any]] = {}
    for r in report.get("records", []):
        if r.get("status") in PRESENT:
            out.setdefault((r["clause"], r["mode"], r.get("signature") or ""), r)
    return out


def digest(keys: Iterable[Key]) -> str:
    text = "\n".join("\t".join(k) for k in sorted(keys))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def seed_summary(report: Mapping[str, Any], check_s: float) -> dict[str, Any]:
    keys = sorted(findings(report))
    return {"findings": len(keys), "digest": digest(keys), "check_s": check_s,
            "counts": report["summary"]["counts"], "keys": [list(k) for k in keys]}


def check_seed(version: str, seed: int, python: str, root: Path, profile: str) -> dict[str, Any]:
    """One (release, seed) check; runs in a pool process. The environment is built already."""
    env_dir = root / f"vllm-{version}"
    start = time.monotonic()
    report, problem = run_check(version, python, env_dir, profile, seed)
    out: dict[str, Any] = {"version": version, "seed": seed}
    if report is None:
        out["skipped"] = problem
        return out
    out.update(seed_summary(report, round(time.monotonic() - start, 1)))
    out["report"] = slim(report)
    return out


def prepare(version: str, python: str, root: Path) -> dict[str, Any]:
    """Build (or reuse) the release's environment and read what the adapter sees; a pool task."""
    state = build_env(version, python, root)
    out: dict[str, Any] = {"version": version, "env": state}
    if not state.get("ok"):
        out["skipped"] = "; ".join(f"{m}: {p['error']}" for m, p in state["problems"].items())
        return out
    out["adapter"] = adapter_shape(python, root / f"vllm-{version}")
    return out


def unstable(per_seed: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every finding some seed has and another lacks, with the seeds that have it."""
    sets = {seed: {tuple(k) for k in s["keys"]} for seed, s in per_seed.items()}
    union = set().union(*sets.values()) if sets else set()
    everywhere = set.intersection(*sets.values()) if sets else set()
    return [{"key": list(k), "seeds": sorted(seed for seed, keys in sets.items() if k in keys)}
            for k in sorted(union - everywhere)]


def run(versions: Sequence[str], seeds: Sequence[int], python: str, root: Path, profile: str,
        jobs: int, reuse: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {v: {"seeds": {}} for v in versions}
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
        say(f"preparing {len(versions)} environment(s) under {root}")
        for v, prepared in zip(versions, pool.map(prepare, versions, [python] * len(versions),
                                                   [root] * len(versions)), strict=True):
            results[v].update({k: prepared[k] for k in ("env", "adapter", "skipped") if k in prepared})
        todo = [(v, s) for s in seeds for v in versions  # every release's first seed first: the history's checks
                if "skipped" not in results[v] and str(s) not in reuse.get(v, {})]
        for v in versions:
            results[v]["seeds"].update(reuse.get(v, {}))
        futures = {pool.submit(check_seed, v, s, python, root, profile): (v, s) for v, s in todo}
        say(f"{len(todo)} check(s) of {len(versions)} release(s) x {len(seeds)} seed(s), {jobs} at a time")
        for done, future in enumerate(concurrent.futures.as_completed(futures), 1):
            v, s = futures[future]
            try:
                r = future.result()
            except Exception as exc:  # noqa: BLE001 - one check's failure is reported, the rest go on
                r = {"skipped": f"{type(exc).__name__}: {exc}"}
            if "skipped" in r:
                results[v].setdefault("failed_seeds", {})[str(s)] = r["skipped"]
                say(f"[{done}/{len(todo)}] {v} seed {s}: no report: {r['skipped']}")
                continue
            report = r.pop("report")
            if s == seeds[0]:
                REPORTS.mkdir(parents=True, exist_ok=True)
                (REPORTS / f"{v}.json").write_text(json.dumps(report, indent=1) + "\n")
            results[v]["seeds"][str(s)] = {k: r[k] for k in ("findings", "digest", "check_s", "counts", "keys")}
            say(f"[{done}/{len(todo)}] {v} seed {s}: {r['findings']} findings, digest {r['digest']} "
                f"({r['check_s']}s)")
    return results


# -- the document -----------------------------------------------------------------------------

def load_reports(reports_dir: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    index = json.loads((reports_dir / INDEX).read_text())
    loaded = {v: json.loads((reports_dir / f"{v}.json").read_text()) for v in index["checked"]}
    return index, loaded


def _modes(modes: Iterable[str]) -> str:
    present = set(modes)
    return " ".join(MODE_LABEL[m] for m in MODES if m in present)


def render(index: Mapping[str, Any], reports: Mapping[str, Mapping[str, Any]]) -> str:
    versions = list(index["checked"])
    seeds = [str(s) for s in index["seeds"]]
    found = {v: findings(reports[v]) for v in versions}
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
        f"- Releases: {', '.join(versions)}; profile `{index['profile']}`; seeds {', '.join(seeds)}; "
        "`--no-xfails` (raw results: no expectation file is applied); both interpreter modes "
        "(`normal`, and `-O`: `python -O`, asserts removed).",
        "- Each release is checked as a source tree (`kvcontract check --engine vllm --engine-path "
        "<release>/tree`) in the environment `scripts/vllm_history.py` builds for it: the wheel's "
        "Python files over the base CPU environment plus the light packages pinned in "
        "`requirements/vllm-<release>-cpu.txt`.",
        "- A **finding** is clause x mode x signature: a record whose status is fail, xfail or "
        "error. The signature says what went wrong in engine terms (`outcome:Kind+Kind:field`). "
        "Every distinct finding is listed; the repro snippet of each is in the full report "
        "(`--json`) of the check above, kept at `<env-root>/vllm-<release>/check-<profile>-seed<S>.json`.",
        f"- **Seeds agree**: the set of findings is identical at every seed ({', '.join(seeds)}); "
        "else the findings that differ are listed under *Unstable verdicts*.",
        "- CI checks only the pinned release (0.34.0) against its expectation file; this matrix "
        "is regenerated by hand when the suite or the releases change.",
        "",
        "## Releases",
        "",
    ]
    release_rows = []
    for v in versions:
        per_seed = index["results"][v]["seeds"]
        keys = found[v]
        counts = reports[v]["summary"]["counts"]
        agree = "yes" if len({s["digest"] for s in per_seed.values()}) == 1 and len(per_seed) == len(seeds) else "**no**"
        by_mode = {m: sum(1 for k in keys if k[1] == m) for m in MODES}
        errors = sum(1 for r in keys.values() if r["status"] == "error")
        times = ", ".join(str(per_seed[s]["check_s"]) for s in seeds if s in per_seed)
        release_rows.append([v, len(keys), by_mode["normal"], by_mode["optimized"], errors, counts.get("pass", 0),
                             counts.get("skip", 0), agree, times])
    lines += markdown_table(["release", "findings", "normal", "-O", "kit errors", "pass", "skip", "seeds agree",
                             "check (s, per seed)"], release_rows, align="<>>>>>><<")
    lines += ["", "## Seeds", "", "Findings and digest of their sorted keys, per release and seed.", ""]
    seed_rows = []
    for v in versions:
        per_seed = index["results"][v]["seeds"]
        seed_rows.append([v, *(f"{per_seed[s]['findings']} `{per_seed[s]['digest']}`" if s in per_seed
                               else index["results"][v].get("failed_seeds", {}).get(s, "not run") for s in seeds)])
    lines += markdown_table(["release", *(f"seed {s}" for s in seeds)], seed_rows, align="<" + ">" * len(seeds))
    shaky = {v: index["results"][v].get("unstable", []) for v in versions}
    lines += ["", "## Unstable verdicts", ""]
    if any(shaky.values()):
        lines += markdown_table(["release", "clause", "mode", "signature", "seeds that find it"],
                                [[v, f"`{u['key'][0]}`", MODE_LABEL[u["key"][1]], f"`{u['key'][2]}`",
                                  ", ".join(str(s) for s in u["seeds"])] for v in versions for u in shaky[v]])
    else:
        lines.append("None: every release has the same findings at every seed.")
    clauses = _clause_order(reports, versions)
    lines += ["", "## Findings per clause", "",
              "Distinct findings per clause and release, as `normal / -O`; `skip` when the release "
              "could not be judged on the clause (reason below).", ""]
    skipped: dict[tuple[str, str], list[str]] = {}
    clause_rows = []
    for clause, level in clauses:
        cells = []
        for v in versions:
            records = [r for r in reports[v]["records"] if r["clause"] == clause]
            if records and all(r["status"] == "skip" for r in records):
                cells.append("skip")
                skipped.setdefault((clause, records[0].get("message") or ""), []).append(v)
                continue
            n = [sum(1 for k in found[v] if k[0] == clause and k[1] == m) for m in MODES]
            cells.append("–" if not records else f"{n[0]} / {n[1]}" if any(n) else "0 / 0")
        clause_rows.append([f"`{clause}`", level, *cells])
    lines += markdown_table(["clause", "level", *versions], clause_rows)
    if skipped:
        lines += ["", "Skipped:", ""]
        lines += [f"- `{clause}` on {', '.join(vs)}: {md_cell(why)}" for (clause, why), vs in sorted(skipped.items())]
    lines += ["", "## Every finding", "",
              "One row per clause x signature; a release's cell names the modes that have it.", ""]
    order = [c for c, _ in clauses]
    rows = sorted({(c, sig) for v in versions for c, _, sig in found[v]},
                  key=lambda cs: (order.index(cs[0]) if cs[0] in order else 999, cs[1]))
    lines += markdown_table(["clause", "signature", *versions],
                            [[f"`{clause}`", f"`{sig or '(none)'}`",
                              *(_modes(m for c, m, s in found[v] if (c, s) == (clause, sig)) for v in versions)]
                             for clause, sig in rows])
    return "\n".join(lines) + "\n"


def _clause_order(reports: Mapping[str, Mapping[str, Any]], versions: Sequence[str]) -> list[tuple[str, str]]:
    """Clauses in report order (the suite's order), each once, with its level."""
    out: dict[str, str] = {}
    for v in versions:
        for r in reports[v]["records"]:
            out.setdefault(r["clause"], r.get("level", ""))
    return list(out.items())


def write_doc(reports_dir: Path = REPORTS, doc: Path = DOC) -> None:
    index, loaded = load_reports(reports_dir)
    doc.write_text(render(index, loaded))
    say(f"wrote {doc}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/vllm_matrix.py", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--versions", default=",".join(DEFAULT_VERSIONS),
                        help="comma-separated vLLM releases (default: %(default)s)")
    parser.add_argument("--seeds", default=",".join(str(s) for s in DEFAULT_SEEDS),
                        help="comma-separated seeds, each release checked at each (default: %(default)s)")
    parser.add_argument("--profile", default="default", choices=("quick", "default", "thorough"))
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="checks run at a time (default: min(2, cores))")
    parser.add_argument("--env-root", type=Path, default=ENV_ROOT,
                        help="where the per-release environments are cached (default: %(default)s)")
    parser.add_argument("--base-python", default=sys.executable,
                        help="the base CPU environment's python (default: this interpreter)")
    parser.add_argument("--reuse-reports", action="store_true",
                        help="keep the seeds already in the index for the same profile (resume a run)")
    parser.add_argument("--render-only", action="store_true", help="re-render docs/vllm-matrix.md only")
    parser.add_argument("--update", action="store_true",
                        help="re-check only --versions and keep every other release's results in the index")
    parser.add_argument("--date", help="date for the header (default: today, UTC)")
    args = parser.parse_args(argv)
    if args.render_only:
        write_doc()
        return 0
    try:
        versions = sorted(set(comma_list(args.versions, "--versions") or []), key=version_key)
        seeds = [int(s) for s in comma_list(args.seeds, "--seeds") or []]
    except UsageError as exc:
        parser.error(str(exc))
    except ValueError:
        parser.error(f"--seeds takes comma-separated integers, not {args.seeds!r}")
    previous = json.loads((REPORTS / INDEX).read_text()) if (REPORTS / INDEX).exists() else {}
    reuse: dict[str, dict[str, Any]] = {}
    if args.reuse_reports and previous.get("profile") == args.profile:
        reuse = {v: {s: r for s, r in previous["results"].get(v, {}).get("seeds", {}).items() if int(s) in seeds}
                 for v in versions if (REPORTS / f"{v}.json").exists()}
    results = run(versions, seeds, args.base_python, args.env_root.resolve(), args.profile, args.jobs, reuse)
    for r in results.values():
        r["unstable"] = unstable({s: x for s, x in r["seeds"].items() if "keys" in x})
        for x in r["seeds"].values():
            x.pop("keys", None)  # the digest stands for them; what differs is in "unstable"
    checked = [v for v in versions if "skipped" not in results[v] and str(seeds[0]) in results[v]["seeds"]]
    if args.update and previous:  # the releases not re-checked keep their entries
        if previous.get("profile") != args.profile or list(previous.get("seeds", [])) != seeds:
            parser.error("--update needs the profile and seeds of the index being updated "
                         f"({previous.get('profile')}, {previous.get('seeds')})")
        kept = [v for v in previous.get("checked", []) if v not in versions]
        results = {**{v: previous["results"][v] for v in previous["results"] if v not in versions}, **results}
        checked = sorted([*kept, *checked], key=version_key)
        versions = sorted(results, key=version_key)
    index = {
        "command": (f"python3 scripts/vllm_matrix.py --versions {','.join(versions)} "
                    f"--seeds {','.join(str(s) for s in seeds)} --profile {args.profile} --jobs {args.jobs}"
                    + (" --update" if args.update else "")),
        "date": args.date or datetime.datetime.now(datetime.UTC).date().isoformat(),
        "profile": args.profile, "seeds": seeds, "checked": checked,
        "not_checked": {v: r["skipped"] for v, r in results.items() if "skipped" in r},
        "results": {v: {k: r[k] for k in ("seeds", "unstable", "failed_seeds", "adapter") if k in r}
                    for v, r in results.items()},
    }
    (REPORTS / INDEX).write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    write_doc()
    bad = [v for v in checked if results[v]["unstable"] or results[v].get("failed_seeds")]
    if bad:
        say(f"seeds disagree or a check failed on: {', '.join(bad)} (see {DOC.relative_to(REPO)})")
    return 0
