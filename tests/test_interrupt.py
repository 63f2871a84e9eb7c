"""An interrupted ``kvcontract check``: SIGTERM (a CI timeout) and SIGINT (Ctrl-C) stop the
workers, write the partial report (``complete: false``) and exit 143 / 130; nothing of the
run outlives it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kvcontract.conformance.reports.check import Report
from kvcontract.conformance.run.worker import SUPERVISOR_ENV
from kvcontract.usage import Interrupted, interrupt_exit_code, interrupt_name

# A finished clause run: "[normal 3/30] MERGE-ORDER-1 pass (120 examples, 0.42s)".
CLAUSE_DONE = re.compile(r"^\[(normal|optimized) \d+/\d+\] \S+ (pass|fail|skip|error|xfail|xpass)\b")
REPO = Path(__file__).resolve().parents[1]


def _stat(pid: int) -> tuple[int, int] | None:
    """(process group, session) of a live process, None once it is gone (or a zombie)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    if fields[0] == "Z":
        return None
    return int(fields[2]), int(fields[3])


def _workers_of(supervisor: int) -> set[int]:
    """The worker processes started by ``supervisor`` (their environment names it)."""
    found = set()
    marker = f"{SUPERVISOR_ENV}={supervisor}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            found.add(int(entry))
    return found


def _survivors(sessions: set[int]) -> list[int]:
    """Live processes in any of ``sessions`` (the command's own, and each worker's)."""
    alive = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None and (stat[0] in sessions or stat[1] in sessions):
                alive.append(int(entry))
    return alive


def _interrupt_check(tmp_path: Path, signum: int) -> tuple[int, str, Path, set[int]]:
    report = tmp_path / "R.json"
    args = ["check", "--engine", "reference", "--profile", "default", "--json", str(report),
            "--junit", str(tmp_path / "R.xml"), "--sarif", str(tmp_path / "R.sarif")]
    code, stderr, workers = _interrupt(args, signum, lambda line: bool(CLAUSE_DONE.match(line)))
    return code, stderr, report, workers


def _default_sigint() -> None:
    """In the command's process, before it starts: SIGINT as a terminal delivers it. A shell
    without job control starts background commands with SIGINT ignored, and an interpreter
    that starts so keeps ignoring it (a suite run as ``bash .ci/run &`` saw the check run to
    its end)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt(args: list[str], signum: int, ready: Callable[[str], bool]) -> tuple[int, str, set[int]]:
    """Run ``kvcontract ARGS`` in its own session, send ``signum`` once a line on stderr is
    ``ready``; then nothing of the run (its session, its workers' groups) may be alive 2 s later."""
    proc = subprocess.Popen([sys.executable, "-m", "kvcontract", *args], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=_default_sigint)
    lines: list[str] = []
    first_done = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if ready(line):
                first_done.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert first_done.wait(timeout=180), "never ready:\n" + "".join(lines)
        workers = _workers_of(proc.pid)
        assert workers, "no worker process found"
        proc.send_signal(signum)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    reader.join(timeout=10)
    time.sleep(2.0)
    sessions = {proc.pid, *workers}
    assert _survivors(sessions) == [], f"processes outlived the run: {_survivors(sessions)}"
    assert all(_stat(pid) is None for pid in workers)
    return code, "".join(lines), workers


@pytest.mark.parametrize(("signum", "expected"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_interrupted_check_keeps_a_partial_report(tmp_path: Path, signum: int, expected: int) -> None:
    code, stderr, path, _ = _interrupt_check(tmp_path, signum)
    assert code == expected, stderr
    name = signal.Signals(signum).name
    line = re.search(rf"interrupted by {name} after (\d+) of (\d+) clause runs; partial report written to (.+)",
                     stderr)
    assert line is not None, stderr
    done, total = int(line.group(1)), int(line.group(2))
    assert 0 < done < total
    data = json.loads(path.read_text())
    assert data["complete"] is False
    report = Report.model_validate(data)
    assert report.records and len(report.clauses) == done
    assert len(report.not_run) == total - done
    ran = {(r.clause, r.mode) for r in report.clauses}
    assert ran.isdisjoint({(n.clause, n.mode) for n in report.not_run})
    assert not report.ok
    assert (tmp_path / "R.xml").read_text().startswith("<?xml")
    assert f"partial SARIF log written to {tmp_path / 'R.sarif'}" in stderr
    sarif = json.loads((tmp_path / "R.sarif").read_text())  # a log that says it is partial
    assert sarif["runs"][0]["invocations"][0]["executionSuccessful"] is False
    assert sarif["runs"][0]["results"] == []


def test_a_complete_report_reads_as_before() -> None:
    """Reports written before the field existed are complete."""
    report = Report.model_validate({"kit_version": "0", "engine": "e", "engine_version": "1", "profile": "quick",
                                    "seed": 0, "modes": ["normal"], "records": [],
                                    "summary": {"counts": {}, "failed": [], "seconds": 0.0}})
    assert report.complete and report.not_run == [] and report.ok


def test_exit_codes_of_the_signals() -> None:
    assert interrupt_exit_code(KeyboardInterrupt()) == 130
    assert interrupt_name(KeyboardInterrupt()) == "SIGINT"
    assert interrupt_exit_code(Interrupted(signal.SIGTERM)) == 143
    assert interrupt_name(Interrupted(signal.SIGTERM)) == "SIGTERM"


def test_terminated_symbolic_keeps_its_report(tmp_path: Path) -> None:
    """``symbolic`` on SIGTERM: as ``check``, exit 143 and the report so far, marked stopped."""
    out = tmp_path / "S.json"
    args = ["symbolic", "--engine", "mutant:sorts-input", "--optimize", "off", "--budget", "300",
            "--json", str(out)]
    code, stderr, _ = _interrupt(args, signal.SIGTERM, lambda line: line.startswith("[symbolic normal] fail"))
    assert code == 143, stderr
    assert "interrupted by SIGTERM" in stderr
    data = json.loads(out.read_text())
    assert data["complete"] is False and data["stopped"] == "interrupted by SIGTERM"
    assert data["records"] and data["records"][0]["status"] == "fail"


def test_a_stopped_worker_ends_its_task_and_never_restarts() -> None:
    """``Worker.stop`` (what an interrupt calls) ends a hanging task at once, kills the worker's
    process group, and no later task starts a fresh worker."""
    from kvcontract.conformance.run import tasks
    from kvcontract.conformance.run.worker import Worker

    worker = Worker()
    results = []
    args = {"engine": "tests.engines.misbehaving:hanging", "clause": "MERGE-ORDER-1", "profile": "quick",
            "seed": 0, "xfails": None}
    started = threading.Event()
    thread = threading.Thread(target=lambda: results.append(worker.run(
        tasks.LAW_TASK, args, timeout=120, heartbeat=60, on_event=lambda _e: started.set())))
    try:
        thread.start()
        assert started.wait(timeout=60), worker.log_tail()
        pid = worker._proc.pid if worker._proc is not None else 0
        stopped_at = time.monotonic()
        worker.stop()
        thread.join(timeout=10)
        assert not thread.is_alive() and time.monotonic() - stopped_at < 5
        assert results[0].status == "stopped"
        assert _stat(pid) is None and _survivors({pid}) == []
        later = worker.run(tasks.ENGINE_INFO_TASK, {"engine": "reference"}, timeout=30)
        assert later.status == "stopped" and worker.starts == 1 and not worker.alive()
    finally:
        worker.close()


SUPERVISOR = """
import sys, threading, time
from kvcontract.conformance.run import tasks
from kvcontract.conformance.run.worker import Worker
worker = Worker()
started = threading.Event()
args = {"engine": "tests.engines.misbehaving:hanging", "clause": "MERGE-ORDER-1", "profile": "quick",
        "seed": 0, "xfails": None}
threading.Thread(target=lambda: worker.run(tasks.LAW_TASK, args, timeout=300, heartbeat=300,
                                           on_event=lambda _e: started.set()), daemon=True).start()
started.wait(120)
print(worker._proc.pid, flush=True)
time.sleep(300)
"""


def test_a_worker_dies_with_its_supervisor() -> None:
    """A supervisor killed with SIGKILL (no handler runs): its worker, busy in a hanging task
    and spawned from a thread, is gone within 2 s (parent-death signal, else the guard)."""
    proc = subprocess.Popen([sys.executable, "-c", SUPERVISOR], cwd=REPO, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert proc.stdout is not None
        worker = int(proc.stdout.readline())
        assert _stat(worker) is not None
        proc.kill()
        proc.wait()
        time.sleep(2.0)
        assert _stat(worker) is None and _survivors({proc.pid, worker}) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_workers_started_early_are_taken_by_a_matching_pass_and_never_left_behind() -> None:
    from kvcontract.conformance.run import worker as w

    w.prestart()
    try:
        started = {m: w._PRESTARTED[m] for m in (False, True)}
        assert all(x.alive() for x in started.values())
        taken = w.Worker.take(optimized=True)  # this environment: the early one
        assert taken is started[True] and taken.starts == 1
        other = w.Worker.take(optimized=False, env={**os.environ, "KVCONTRACT_DOMAIN": "constructor"})
        assert other is not started[False] and not started[False].alive()  # another environment: closed
        assert not other.alive() and other.starts == 0  # a new one starts on its first task
        taken.close()
    finally:
        w.discard_prestarted()
    assert not w._PRESTARTED


def test_a_check_that_fails_its_argument_checks_leaves_no_early_worker(monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from kvcontract.cli import main
    from kvcontract.conformance.run import worker as w

    started: list[w.Worker] = []
    real = w.prestart

    def spy(*args: object) -> None:
        real()
        started.extend(w._PRESTARTED.values())
    monkeypatch.setattr(w, "prestart", spy)
    assert main(["check", "--engine", "reference", "--clauses", "NOPE-1"]) == 2
    assert "NOPE-1" in capsys.readouterr().err
    assert len(started) == 2 and not w._PRESTARTED  # started before the arguments were read,
    assert not any(x.alive() for x in started)  # closed since


def test_a_check_runs_its_passes_in_the_workers_the_command_line_started_early(monkeypatch: pytest.MonkeyPatch) -> None:
    from kvcontract.cli import main
    from kvcontract.conformance.run import session
    from kvcontract.conformance.run import worker as w

    seen: list[w.Worker] = []
    take = w.Worker.take

    def spy(**kwargs: object) -> w.Worker:
        early = dict(w._PRESTARTED)
        got = take(**kwargs)  # type: ignore[arg-type]
        seen.append(got)
        assert got is early.get(bool(kwargs.get("optimized")))
        return got
    monkeypatch.setattr(session.Worker, "take", staticmethod(spy))
    assert main(["check", "--engine", "reference", "--profile", "quick", "--clauses", "MERGE-UNION-1", "--quiet"]) == 0
    assert len(seen) == 2 and all(x.starts == 1 for x in seen) and not w._PRESTARTED
