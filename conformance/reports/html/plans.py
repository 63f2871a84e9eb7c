"""The corpus plans a report draws: every corpus table the check fed, up to what a planner can
tell apart (one representative per class, :func:`~kvcontract.conformance.contract.corpus.distinct_tables`),
planned by the reference and by the engine, and compared.

Each class is planned with the settings the engine picks for its tables; a reachable defect whose
harm needs an option (``python -O``, the hybrid manager off, the block-outermost layout) has its
harm tables planned with that option too. The memory budget is the PLAN laws' (the check's own:
:func:`~kvcontract.conformance.contract.laws.plan.budget_of`).

The reference plans in this process. The engine is untrusted: it plans in supervised worker
processes (``python [-O] -m kvcontract.conformance.reports.html.plan_worker``, one per interpreter
mode, the engine loaded once), each writing one JSON line per case as it goes; a worker that
crashes or stops answering is stopped, the case it was on gets an ``error``, and a new worker
goes on with the rest. The result can be kept (:func:`write_plans`) and read back
(:func:`read_plans`, ``kvcontract report --plans``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kvcontract.reports import write_atomic

PLANS_FORMAT = 1
CASE_TIMEOUT_S = 180.0
"""How long a worker may take over one case (the first includes loading the engine)."""
OPTIONS = {"python -O": "optimized", "hybrid manager off": "hybrid", "block-outermost layout": "block_outermost"}
"""The options a defect's harm may need (:func:`kvcontract.conformance.reports.defects.option_of`)."""


@dataclasses.dataclass(frozen=True)
class Setting:
    hybrid: bool
    block_outermost: bool
    optimized: bool = False

    @property
    def label(self) -> str:
        return (f"hybrid {'on' if self.hybrid else 'off'}, {'block' if self.block_outermost else 'layer'}-outermost"
                + (", python -O" if self.optimized else ""))

    def with_option(self, option: str) -> Setting:
        """This setting with a defect's ``option`` (``python -O, hybrid manager off``) applied."""
        out = self
        for part in filter(None, (p.strip() for p in option.split(","))):
            field = OPTIONS.get(part)
            if field is None:
                continue
            out = dataclasses.replace(out, **{field: field != "hybrid"})
        return out


def _class_of(names: Mapping[str, str], name: str) -> str:
    return names.get(name, name)


def plan_cases(report: Any, corpus: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """The cases to plan (each: ``key``, ``table``, ``stands_for``, ``setting``, ``why``) for a
    check report's tables, and the report's tables the corpus lacks."""
    from kvcontract.conformance.contract.corpus import Corpus, distinct_tables

    fed = set(report.tables)
    by_name = corpus.by_name()
    missing = sorted(fed - set(by_name))
    kept = Corpus(engine=corpus.engine, release=corpus.release, tables=[t for t in corpus.tables if t.name in fed])
    classes = distinct_tables(kept)
    rep_of = {name: rep.name for rep, names in classes for name in names}
    cases: list[dict[str, Any]] = []
    seen: set[str] = set()

    def add(rep: Any, names: Sequence[str], setting: Setting, why: str) -> None:
        key = f"{rep.name} | {setting.label}"
        if key in seen:
            for case in cases:
                if case["key"] == key and why not in case["why"]:
                    case["why"].append(why)
            return
        seen.add(key)
        cases.append({"key": key, "table": rep.name, "stands_for": list(names), "setting": dataclasses.asdict(setting),
                      "label": setting.label, "why": [why],
                      "layers": [[name, type(spec).__name__] for name, spec in rep.layers]})

    for rep, names in classes:
        own = Setting(rep.settings.hybrid, rep.settings.block_outermost)
        add(rep, names, own, "the settings the engine picks")
    members = {rep.name: (rep, names) for rep, names in classes}
    for number, defect in enumerate(report.defects, 1):
        if defect.tier != "reachable" or not defect.option:
            continue
        for rep_name in dict.fromkeys(_class_of(rep_of, m) for m in defect.harm_models):
            if rep_name in members:
                rep, names = members[rep_name]
                base = Setting(rep.settings.hybrid, rep.settings.block_outermost)
                add(rep, names, base.with_option(defect.option), f"D{number:02d} needs {defect.option}")
    return cases, missing


def plan_all(cases: list[dict[str, Any]], corpus: Any, engine: str | None,
             progress: Callable[[str], None] | None = None) -> None:
    """Plan every case in place: ``reference`` (here), ``engine`` (in workers; absent without
    ``engine``), ``differences`` (the plan CLI's words)."""
    from kvcontract.conformance.cli.plan import differences, reference_plan
    from kvcontract.conformance.contract.laws.plan import budget_of

    by_name = corpus.by_name()
    say = progress or (lambda line: None)
    for case in cases:
        table = by_name[case["table"]].specs()
        setting = Setting(**case["setting"])
        case["memory"] = budget_of(table)
        case["reference"] = reference_plan(table, case["memory"], setting.hybrid, 8192, 8192, 1,
                                           setting.block_outermost)
    if engine is None:
        return
    for optimized in (False, True):
        chosen = [c for c in cases if c["setting"]["optimized"] == optimized]
        if not chosen:
            continue
        say(f"[plans] planning {len(chosen)} case{'s' * (len(chosen) != 1)} with {engine}"
            f"{' under python -O' if optimized else ''} in a worker ...")
        answers = run_workers(engine, [(c["key"], by_name[c["table"]].specs(), c["memory"], c["setting"]) for c in chosen],
                              optimized, say)
        for case in chosen:
            case["engine"] = answers[case["key"]]
            case["differences"] = differences(case["reference"], case["engine"])


def run_workers(engine: str, items: Sequence[tuple[str, Mapping[str, Any], int, Mapping[str, Any]]],
                optimized: bool, say: Callable[[str], None], timeout: float = CASE_TIMEOUT_S) -> dict[str, Any]:
    """Each item's engine plan (key -> plan dict), from workers that may crash or hang."""
    from kvcontract.conformance.contract.codec import spec_to_json

    answers: dict[str, Any] = {}
    pending = list(items)
    with tempfile.TemporaryDirectory(prefix="kvcontract-plans-") as scratch:
        while pending:
            out = Path(scratch) / f"answers-{len(answers)}.jsonl"
            request = {"engine": engine, "out": str(out),
                       "cases": [{"key": k, "memory": m, "hybrid": s["hybrid"], "block_outermost": s["block_outermost"],
                                  "table": {n: spec_to_json(v) for n, v in t.items()}} for k, t, m, s in pending]}
            got, failure = _one_worker(request, out, optimized, timeout, len(answers), len(items), say)
            answers.update(got)
            pending = [item for item in pending if item[0] not in answers]
            if pending:  # the worker stopped on pending[0] (a crash, a hang, an exit of the engine's own)
                answers[pending[0][0]] = {"error": failure or "the engine's worker ended without answering (exit 0)"}
                pending = pending[1:]
    return answers


def _one_worker(request: Mapping[str, Any], out: Path, optimized: bool, timeout: float, done_before: int,
                total: int, say: Callable[[str], None]) -> tuple[dict[str, Any], str]:
    env = {**os.environ, "VLLM_LOGGING_LEVEL": os.environ.get("VLLM_LOGGING_LEVEL", "ERROR"),
           "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "")}
    command = [sys.executable, *(["-O"] if optimized else []), "-m", "kvcontract.conformance.reports.html.plan_worker"]
    with tempfile.TemporaryFile("w+") as errors:
        worker = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=errors,
                                  text=True, env=env, start_new_session=True)
        if worker.stdin is not None:
            worker.stdin.write(json.dumps(request))
            worker.stdin.close()
        try:
            return _watch(worker, errors, out, timeout, done_before, total, say)
        finally:
            if worker.poll() is None:  # interrupted (SIGINT, SIGTERM): the worker goes too
                _stop(worker)


def _watch(worker: subprocess.Popen[str], errors: Any, out: Path, timeout: float, done_before: int, total: int,
           say: Callable[[str], None]) -> tuple[dict[str, Any], str]:
    """The worker's answers as they come; a worker that stops answering for ``timeout`` is stopped."""
    got: dict[str, Any] = {}
    last_change, failure, size = time.monotonic(), "", -1
    while True:
        finished = worker.poll() is not None
        now = out.stat().st_size if out.exists() else 0
        fresh, size = (_read_answers(out) if now != size else got), now
        if len(fresh) > len(got):
            if (done_before + len(fresh)) // 50 > (done_before + len(got)) // 50:
                say(f"[plans] {done_before + len(fresh)}/{total} planned")
            got, last_change = fresh, time.monotonic()
        if finished:
            got = _read_answers(out)
            if worker.returncode != 0:
                errors.seek(0)
                tail = (errors.read().strip().splitlines() or ["no output"])[-1]
                failure = f"the engine's worker failed (exit {worker.returncode}): {tail[:300]}"
            break
        if time.monotonic() - last_change > timeout:
            _stop(worker)
            got = _read_answers(out)
            failure = f"the engine did not answer within {timeout:.0f} s (worker stopped)"
            break
        time.sleep(0.1)
    return got, failure


def _stop(worker: subprocess.Popen[str]) -> None:
    import signal

    try:
        os.killpg(worker.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    worker.wait()


def _read_answers(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    out: dict[str, Any] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line the worker was writing when it stopped
        out[item["key"]] = item["plan"]
    return out


# -- kept plans -------------------------------------------------------------------------------


class PlansFileError(ValueError):
    """A ``--plans`` file that is not what :func:`write_plans` writes."""


def write_plans(path: str | Path, engine: str | None, cases: Iterable[Mapping[str, Any]], corpus: str) -> None:
    write_atomic(path, json.dumps({"plans": PLANS_FORMAT, "engine": engine, "corpus": corpus,
                                   "cases": list(cases)}, indent=1) + "\n")


def read_plans(path: str | Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PlansFileError(f"{path}: not readable as JSON ({exc})") from None
    if isinstance(data, dict) and "differences" in data and "summary" in data:
        raise PlansFileError(f"{path}: a plan agreement lists the cases that differ, not the plans: give it as "
                             "--agreement (and --engine NAME to plan now)")
    if not isinstance(data, dict) or data.get("plans") != PLANS_FORMAT or not isinstance(data.get("cases"), list):
        raise PlansFileError(f"{path}: not a plans file of kvcontract report (format {PLANS_FORMAT}: "
                             "written by kvcontract report --save-plans)")
    for i, case in enumerate(data["cases"]):
        if not isinstance(case, dict) or not {"key", "table", "setting", "reference"} <= set(case):
            raise PlansFileError(f"{path}: cases[{i}]: needs key, table, setting and reference")
    return data


__all__ = ["PlansFileError", "Setting", "plan_all", "plan_cases", "read_plans", "run_workers", "write_plans"]
