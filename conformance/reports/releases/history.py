"""The vLLM release history in defects: per defect, the releases that have it, first bad, gone
in, and whether a corpus model of the release reaches it.

One command (``python3 scripts/vllm_history.py``, :func:`main`) builds (and caches) an
environment per release (:mod:`.environments`), checks each (:mod:`.checks`), and writes
``docs/vllm-history.md`` from the reports.

**The check** of a release is ``kvcontract check --engine vllm --engine-path
<env>/tree --no-xfails --profile P --seed S --json docs/vllm-history/reports/<release>.json``
(a source-tree check: ``import vllm`` resolves to the release's tree), releases
in parallel in a process pool (``--jobs``), with a progress line per step.

**The history** (:mod:`.defect_history`): per defect (a root in the engine's code), the
releases that have it, the first one, the one it is gone in, and the releases where a model
of the release's own corpus shows its harm; the README's account comes from it. The finer
grain, per finding (clause x signature, :func:`history`), is kept as data
(``docs/vllm-history/findings.json``). Generated, never edited by hand: ``--render-only``
re-renders the document (and the README's block) from the reports. An interrupted run resumes:
a release this kit (the same source digest) already checked at the profile and seed is not
checked again (its environment and full report are kept, :func:`.checks.run_check`);
``--reuse-reports`` also skips its environment and adapter probe.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kvcontract.conformance.reports.diff import PRESENT, subject
from kvcontract.conformance.reports.releases.checks import (
    adapter_shape,
    check_path,
    reusable,
    run_check,
    slim,
)
from kvcontract.conformance.reports.releases.defect_history import (
    defect_rows,
    release_counts,
    render_grid,
    render_rows,
    span,
)
from kvcontract.conformance.reports.releases.environments import (
    ENV_ROOT,
    REPO,
    build_env,
    say,
    version_key,
)
from kvcontract.conformance.reports.releases.reviews import check_reviews
from kvcontract.options import comma_list
from kvcontract.reports import markdown_table
from kvcontract.usage import UsageError

__all__ = ["DOC", "REPORTS", "history", "load_reports", "main", "render", "render_readme_block", "span", "write_doc"]

DOC = REPO / "docs" / "vllm-history.md"
REPORTS = REPO / "docs" / "vllm-history" / "reports"
INDEX = "index.json"
DEFAULT_VERSIONS = ("0.7.0", "0.8.0", "0.8.5", "0.10.2", "0.11.0", "0.15.1", "0.20.0", "0.23.0", "0.25.0", "0.28.0",
                    "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0")
"""The releases the committed history covers (0.9.2 is left out: its model registry cannot import
with the transformers of the kit's base environment, which registers a config of the same name)."""


# -- checks ------------------------------------------------------------------------------------

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
    report, problem = run_check(version, python, env_dir, profile, seed)
    out["check_s"] = round(time.monotonic() - built, 1)
    if report is None:
        out["skipped"] = problem
        return out
    REPORTS.mkdir(parents=True, exist_ok=True)
    (REPORTS / f"{version}.json").write_text(json.dumps(slim(report), indent=1) + "\n")
    out["counts"] = report["summary"]["counts"]
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

def present(report: Mapping[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
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


def judged(report: Mapping[str, Any]) -> set[str]:
    return {r["clause"] for r in report.get("records", []) if r.get("status") != "skip"}


def history(versions: Sequence[str], reports: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per (clause, signature): the releases that have it, the first one, the one that fixed it.

    ``fixed_in``: the first checked release after the last run of releases that have
    it which judged the clause and does not have it (None: still present in the
    newest release checked, or that release did not judge the clause)."""
    have_by = {v: present(reports[v]) for v in versions}
    judged_by = {v: judged(reports[v]) for v in versions}
    keys = sorted({k for v in versions for k in have_by[v]})
    rows = []
    for clause, sig in keys:
        have = [v for v in versions if (clause, sig) in have_by[v]]
        first = have[0]
        last = have[-1]
        later = [v for v in versions[versions.index(last) + 1:] if clause in judged_by[v]]
        fixed = later[0] if later else None
        gaps = [v for v in versions[versions.index(first):versions.index(last) + 1]
                if v not in have and clause in judged_by[v]]
        record = have_by[first][(clause, sig)]
        rows.append({"clause": clause, "signature": sig, "subject": subject(sig), "first_bad": first,
                     "fixed_in": fixed, "releases": have, "absent_between": gaps,
                     "status": record["status"], "message": record.get("message", "")[:300]})
    return rows


def render(index: Mapping[str, Any], reports: Mapping[str, Mapping[str, Any]]) -> str:
    """``docs/vllm-history.md``: a pure function of the reports and the index, told in defects
    (:mod:`.defect_history`); the findings stay in the data (``findings.json``)."""
    versions = list(index["checked"])
    rows = defect_rows(versions, reports)
    must = [r for r in rows if r["ever_must"]]
    others = [r for r in rows if not r["ever_must"]]
    lines = [
        "# vLLM release history of the KV-cache merge contract, in defects",
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
        f"Profile `{index['profile']}`, seed {index['seed']}, `--no-xfails`, both interpreter modes, "
        "each release fed the corpus its own model code builds.",
        "- Each release is checked as a **source tree** (`kvcontract check --engine vllm --engine-path "
        "<release>/tree`): its wheel's Python files over the base CPU environment (torch 2.13.0 and "
        "the pins of `requirements/vllm-0.34.0-cpu.txt`) plus the light packages the release needs "
        "on top, found by import and pinned in `requirements/vllm-<release>-cpu.txt`.",
        f"- {index['first_note']}",
        "- A **defect** is a root in the engine's code (a function and what it does wrong, "
        "`docs/defects.md`), named alike in every release that keeps the function. **First bad**: the "
        "first release checked that has it; **gone in**: the first release checked after the last one "
        "that has it which judged its clauses (a renamed or moved function is gone too; its new name "
        "starts a row). **Reachable in**: the releases where a model of that release's own corpus "
        "shows the harm (its plan differs from the reference's), with the first such model and the "
        "option it needs. Releases not checked lie between the columns' releases.",
        "- Findings (clause x signature, the kit's finer grain) are kept in the data, "
        "`docs/vllm-history/findings.json`, with first bad and fixed in per signature; the reviews "
        "of each release's defects are `conformance/xfails/reviews/vllm-<release>.toml` where the "
        "release ships expectations.",
        "",
        f"## MUST defects ({len(must)}): the releases they affect",
        "",
        "Defects that were MUST (a contract clause the engine's own code relies on, broken on a "
        "corpus table or a one-field variation of one) in at least one release; reachable ones first.",
        "",
    ]
    lines += render_rows(must, versions)
    lines += ["", "### Release by release", "",
              "**R** MUST, reachable (a corpus model shows the harm) · r MUST, reached with no harm · "
              "L MUST, latent · s on synthetic input only · a advice · `·` absent · – clauses not judged.",
              ""]
    lines += render_grid(must, versions)
    lines += ["", "## Releases", "",
              "Per release: the MUST defects (reachable ones), those on synthetic input only and advice; "
              "the kit's own errors (records of status `error`: a clause the kit failed to judge, which "
              "must be 0); the corpus tables the release's model code built; how long its clauses took "
              "(the report's own time, both modes, without building the corpus).",
              ""]
    release_rows = []
    for v in versions:
        c = release_counts(reports[v])
        release_rows.append([v, c["must"], c["reachable"], c["reached"], c["synthetic"], c["advice"],
                             c["kit_errors"], c["tables"],
                             f"{reports[v].get('summary', {}).get('seconds', '?')}s"])
    lines += markdown_table(["release", "MUST", "reachable", "reached", "synthetic", "advice", "kit errors",
                             "corpus tables", "check"], release_rows, align="<>>>>>>>>")
    bare = [v for v in versions if not reports[v].get("tables")]
    if bare:
        lines += ["", "Releases checked without a corpus table (no defect of theirs can be shown reachable; "
                  "their MUST defects are latent or reached at most): the corpus builder drives model code "
                  "as vLLM 0.28 and later build it.", ""]
        for v in bare:
            said = [w for w in reports[v].get("warnings", []) if "corpus" in w]
            lines.append(f"- {v}: " + (said[0][:300] if said else "the builder ran and every architecture was "
                                       "skipped (this release's config or loader API predates what it drives)"))
    shapes = index.get("adapter", {})
    if shapes:
        lines += ["", "## What the adapter read from each release", "",
                  "Kinds the release lacks (or cannot be given), fields it lacks (generated specs keep "
                  "the contract's default there), and whether grouping and routing were driven (else "
                  "why not: those clauses skip with that reason).", ""]
        shape_rows = []
        for v in versions:
            shape = shapes.get(v, {})
            kinds = ", ".join(sorted(shape.get("missing_kinds", {}))) or "–"
            fields = "; ".join(f"{k}: {', '.join(f)}" for k, f in sorted(shape.get("missing_fields", {}).items()))
            shape_rows.append([v, kinds, fields or "–", shape.get("grouping", "?"), shape.get("routing", "?")])
        lines += markdown_table(["release", "kinds lacking", "fields lacking", "grouping", "routing"], shape_rows)
    if index.get("not_checked"):
        lines += ["", "Not checked:", ""]
        lines += [f"- {v}: {why}" for v, why in index["not_checked"].items()]
    lines += ["", f"## Other defects ({len(others)}): synthetic input only, or advice, in every release", ""]
    lines += render_grid(others, versions)
    return "\n".join(lines) + "\n"


README_BEGIN = "<!-- history:begin (generated by scripts/vllm_history.py) -->"
README_END = "<!-- history:end -->"


def render_readme_block(index: Mapping[str, Any], reports: Mapping[str, Mapping[str, Any]]) -> str:
    """The README's account of the history: since when the newest release's reachable MUST
    defects are there, and which MUST defects earlier releases had that are gone."""
    versions = list(index["checked"])
    rows = defect_rows(versions, reports)
    newest = versions[-1]
    now = [r for r in rows if r["marks"].get(newest) == "reachable"]
    gone = [r for r in rows if r["ever_must"] and r["gone_in"]]
    lines = [README_BEGIN,
             f"Checked with today's kit over {len(versions)} releases ({versions[0]} to {newest}; "
             f"`docs/vllm-history.md`):"]
    for r in now:
        reach = r["reachable"]
        lines.append(f"- `{r['id']}`: present since {r['first_bad']} (of those checked), reachable by a corpus "
                     f"model since {next(iter(reach))}.")
    if gone:
        lines.append(f"- {len(gone)} MUST defect(s) of earlier releases are gone by {newest}: "
                     + ", ".join(f"`{r['id']}` (from {r['first_bad']}, gone in {r['gone_in']})" for r in gone[:3])
                     + (f" and {len(gone) - 3} more." if len(gone) > 3 else "."))
    lines.append(README_END)
    return "\n".join(lines)


def load_reports(reports_dir: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The index and the (slim) report of every release it checked."""
    index = json.loads((reports_dir / INDEX).read_text())
    loaded = {v: json.loads((reports_dir / f"{v}.json").read_text()) for v in index["checked"]}
    return index, loaded


def write_doc(reports_dir: Path = REPORTS, doc: Path = DOC, readme: Path = REPO / "README.md") -> None:
    index, loaded = load_reports(reports_dir)
    doc.write_text(render(index, loaded))
    (reports_dir.parent / "findings.json").write_text(
        json.dumps(history(list(index["checked"]), loaded), indent=1) + "\n")
    (reports_dir.parent / "defects.json").write_text(
        json.dumps(defect_rows(list(index["checked"]), loaded), indent=1) + "\n")
    text = readme.read_text()
    if README_BEGIN in text and README_END in text:
        start, end = text.index(README_BEGIN), text.index(README_END) + len(README_END)
        readme.write_text(text[:start] + render_readme_block(index, loaded) + text[end:])
    say(f"wrote {doc}, {reports_dir.parent / 'findings.json'}, {reports_dir.parent / 'defects.json'}"
        f"{' and the README block' if README_BEGIN in text else ''}")


# -- the command line ----------------------------------------------------------------------------

def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/vllm_history.py", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--versions", default=",".join(DEFAULT_VERSIONS),
                        help="comma-separated vLLM releases (default: %(default)s)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="releases checked at a time (default: min(2, cores))")
    parser.add_argument("--profile", default="default", choices=("quick", "default", "thorough"),
                        help="the check profile (default: %(default)s, as the committed history)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--env-root", type=Path, default=ENV_ROOT,
                        help="where the per-release environments are cached (default: %(default)s)")
    parser.add_argument("--base-python", default=sys.executable,
                        help="the base CPU environment's python (torch 2.13.0 and the 0.34.0 pins; "
                             "default: this interpreter)")
    parser.add_argument("--first-note", default="",
                        help="why releases before the first one checked cannot be (for the document)")
    parser.add_argument("--reuse-reports", action="store_true",
                        help="keep a release's report, without building its environment, if this kit "
                             "made it at the same profile and seed")
    parser.add_argument("--render-only", action="store_true", help="re-render docs/vllm-history.md only")
    parser.add_argument("--date", help="date for the header (default: today, UTC)")
    parser.add_argument("--check-reviews", metavar="RELEASES",
                        help="list the findings first seen (or fixed) in these comma-separated releases that "
                             "docs/vllm-history/reviews/<release>.toml does not explain, and exit 1 if any")
    args = parser.parse_args(argv)
    try:
        releases = comma_list(args.check_reviews, "--check-reviews")
        versions = sorted(set(comma_list(args.versions, "--versions") or []), key=version_key)
    except UsageError as exc:
        parser.error(str(exc))
    if releases:
        problems = check_reviews(releases)
        for problem in problems:
            print(problem)
        say(f"{len(problems)} problem(s) with the reviews of {args.check_reviews}")
        return 1 if problems else 0
    if args.render_only:
        write_doc()
        return 0
    REPORTS.mkdir(parents=True, exist_ok=True)
    root = args.env_root.resolve()
    todo = [v for v in versions if not (args.reuse_reports and _reusable(v, args.profile, args.seed, root))]
    results = run_all(todo, args.base_python, root, args.profile, args.seed, args.jobs)
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


def _reusable(version: str, profile: str, seed: int, root: Path) -> bool:
    """The release's kept report stands: written at this profile and seed, from a full report
    this kit made (a report of an older kit is checked again, never taken for today's)."""
    path = REPORTS / f"{version}.json"
    if not path.exists():
        return False
    report = json.loads(path.read_text())
    if (report.get("engine_version"), report.get("profile"), report.get("seed")) != (version, profile, seed):
        return False
    return reusable(check_path(root / f"vllm-{version}", profile, seed), version, profile, seed) is not None
