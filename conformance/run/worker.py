"""Supervised worker processes: the one place where engine code runs.

Engines under test are untrusted code: they may hang, crash the interpreter or
print to the terminal. Every verb that runs an engine (``check``, ``mutants``,
``symbolic``) runs it here, in a worker subprocess (``python [-O] -m
kvcontract.conformance.run.worker``) driven by a :class:`Worker` in the command
line's own process:

- the supervisor sends one *task* at a time: a JSON line naming a function
  (``"package.module:function"``) and its JSON arguments;
- the worker calls ``function(args, emit)``; ``emit(dict)`` reports an event, and the
  function's return value (JSON) ends the task. The example a task is about to run goes
  through :func:`begin`: it is written to a shared memory slot (a file both processes
  map, which outlives a killed or crashed worker) and sent as a progress event at most
  every :data:`HEARTBEAT_EVERY_S` seconds. Sending one event per example cost a quick
  check a fifth of its time (a pipe write each, read by the supervisor's thread);
  the slot still names the example a hang or crash interrupted;
- a task that exceeds its time limit, or stays silent longer than its
  per-example limit, is killed; a worker that dies (abort, segfault, exit) ends
  its task too. Either way the task's :class:`TaskResult` says what happened
  (signal or timeout, and the last example emitted), and the next task starts
  a fresh worker;
- the worker's file descriptors 1 and 2 go to a log file, so engine log lines
  never reach the terminal; the protocol uses a private copy of the original
  stdout. The log's tail is kept for the report;
- nothing outlives the command: each worker leads its own process group, which
  :meth:`Worker.stop` / :meth:`Worker.close` kill whole (an interrupted run stops its
  workers first, then writes its partial report); a worker dies with its supervisor
  (:mod:`.lifetime`: ``PR_SET_PDEATHSIG`` on Linux, its spawns made from one long-lived thread so that
  the signal means the process, plus a guard thread polling the parent that then kills
  the worker's whole group). Signal handlers belong to the command line's process
  only: the worker installs none.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import gc
import importlib
import json
import mmap
import os
import queue
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from kvcontract.conformance.run.lifetime import SUPERVISOR_ENV, die_with_supervisor

Emit = Callable[[Mapping[str, Any]], None]
TaskFunction = Callable[[Mapping[str, Any], Emit], Any]

LOG_TAIL_LINES = 40
SLOT_ENV = "KVCONTRACT_SLOT"
"""The path of the file whose shared mapping holds the example being run (:func:`begin`)."""
SLOT_BYTES = 1 << 22
"""The slot's size: a header (task id, length) and one event line; a longer line is sent instead."""
_SLOT_HEADER = struct.Struct("<qq")
HEARTBEAT_EVERY_S = 0.2
"""At most this long between two progress events of a task that keeps starting examples."""
TASK_MODULES = "kvcontract.conformance.run.tasks"
"""What a worker imports as it starts: the task functions, and the kit's code they run."""

_spawner: concurrent.futures.ThreadPoolExecutor | None = None
_spawner_lock = threading.Lock()


def _spawn(cmd: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """``Popen`` from one long-lived thread of the supervisor: Linux sends a child's parent-death
    signal when the *thread* that forked it ends, and a pass's or a load's thread ends long
    before the worker should."""
    global _spawner
    with _spawner_lock:
        if _spawner is None:
            _spawner = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="kvcontract-spawner")

        def popen() -> subprocess.Popen[bytes]:
            return subprocess.Popen(cmd, **kwargs)

        try:
            future = _spawner.submit(popen)
        except RuntimeError:  # the interpreter is shutting down
            return popen()
    return future.result()


@dataclasses.dataclass
class TaskResult:
    """How one task ended.

    ``status``: ``done`` (``value`` holds the function's return value), ``raised`` (``error``
    names the exception, ``where`` its last frame), ``timeout`` or ``crashed`` (``error`` says
    why; ``last_event`` is the last progress the task emitted, e.g. the example being run)."""

    status: str
    value: Any = None
    error: str = ""
    where: str = ""
    last_event: Mapping[str, Any] | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "done"


def describe_exit(returncode: int) -> str:
    """``was killed by SIGABRT`` / ``exited with 3``."""
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with {returncode}"


class Worker:
    """A supervised worker subprocess, restarted after a hang or a crash; ``optimized`` runs it
    under ``python -O``."""

    def __init__(self, *, optimized: bool = False, env: Mapping[str, str] | None = None) -> None:
        self.optimized = optimized
        self.env = dict(os.environ if env is None else env)
        self._proc: subprocess.Popen[bytes] | None = None
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._logdir = tempfile.TemporaryDirectory(prefix="kvcontract-worker-")
        self.log_path = Path(self._logdir.name) / "worker.log"
        self.slot_path = Path(self._logdir.name) / "example.slot"
        self.starts = 0
        self._next_id = 0
        self._stopped = False
        self._lock = threading.Lock()  # _start against stop(): a stopped worker never starts again

    # -- lifecycle -------------------------------------------------------------
    def _start(self) -> subprocess.Popen[bytes] | None:
        with self._lock:
            if self._stopped:
                return None
            return self._start_locked()

    def _start_locked(self) -> subprocess.Popen[bytes]:
        cmd = [sys.executable, *(["-O"] if self.optimized else []), "-m", "kvcontract.conformance.run.worker"]
        env = dict(self.env)
        env[SUPERVISOR_ENV] = str(os.getpid())
        with self.slot_path.open("wb") as slot:  # sparse: zeros, no task's example
            slot.truncate(SLOT_BYTES)
        env[SLOT_ENV] = str(self.slot_path)
        if self.optimized:
            env["PYTHONOPTIMIZE"] = "1"
        else:
            env.pop("PYTHONOPTIMIZE", None)
        log = self.log_path.open("ab")
        try:
            proc = _spawn(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                          env=env, start_new_session=True)
        finally:
            log.close()
        self._lines = queue.Queue()
        threading.Thread(target=_pump, args=(proc.stdout, self._lines), daemon=True).start()
        self._proc = proc
        self.starts += 1
        return proc

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        # The whole group, even when its leader has exited already: what the engine started
        # in it dies too (the group's id is not reused while the group has a member).
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            if proc.poll() is None:
                proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass

    def stop(self) -> None:
        """Kill the worker's process group now and start no other: an interrupted run. A task
        running in another thread returns at once (``stopped``), and so does every later one."""
        with self._lock:
            self._stopped = True
            self._kill()

    @property
    def stopped(self) -> bool:
        return self._stopped

    def alive(self) -> bool:
        """Whether a worker process is running (tasks reuse it)."""
        return self._proc is not None and self._proc.poll() is None

    def release(self) -> None:
        """Let the worker go: it exits when its stdin closes (:meth:`close` waits for it; releasing
        each of a run's workers first, they exit side by side)."""
        proc = self._proc
        if proc is not None and proc.stdin is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass

    def close(self) -> None:
        """Stop the worker (:meth:`release`, then a wait) and drop the log."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            self.release()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self._kill()
        self._logdir.cleanup()

    @classmethod
    def take(cls, *, optimized: bool = False, env: Mapping[str, str] | None = None) -> Worker:
        """A worker of this mode and environment: one :func:`prestart` started, else a new one."""
        wanted = dict(os.environ if env is None else env)
        found = _PRESTARTED.pop(optimized, None)
        if found is not None and found.env == wanted and found.alive():
            return found
        if found is not None:
            found.close()
        return cls(optimized=optimized, env=wanted)

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            self.stop()  # interrupted: no grace for a task that is still running
        self.close()

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> list[str]:
        """The last lines the engine (and the worker) printed, for the report."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return []
        return text.splitlines()[-lines:]

    # -- tasks -----------------------------------------------------------------
    def run(self, call: str, args: Mapping[str, Any], *, timeout: float,
            heartbeat: float | None = None, on_event: Emit | None = None) -> TaskResult:
        """Run ``call(args, emit)`` in the worker; never raises for what the task does. ``timeout``:
        seconds for the whole task; ``heartbeat``: seconds it may stay silent before it counts as
        hung; ``on_event`` sees each of its progress events."""
        start = time.monotonic()
        proc = self._proc if self._proc is not None and self._proc.poll() is None else self._start()
        if proc is None:
            return self._stopped_result(start)
        self._next_id += 1
        task_id = self._next_id
        line = json.dumps({"id": task_id, "call": call, "args": args}, default=str) + "\n"
        try:
            if proc.stdin is None:
                raise BrokenPipeError("worker has no stdin")
            proc.stdin.write(line.encode())
            proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return self._died(start, None)
        deadline = start + timeout
        prefix = _event_prefix(task_id).encode()
        last_event: bytes | None = None  # parsed only when needed: a task sends one event per example
        while True:
            now = time.monotonic()
            wait = deadline - now
            if heartbeat is not None:
                wait = min(wait, heartbeat)
            if wait <= 0:
                return self._hung(start, self._interrupted_event(task_id, last_event), timeout, heartbeat, now >= deadline)
            try:
                raw = self._lines.get(timeout=wait)
            except queue.Empty:
                now = time.monotonic()
                return self._hung(start, self._interrupted_event(task_id, last_event), timeout, heartbeat, now >= deadline)
            if raw is None:
                return self._died(start, self._interrupted_event(task_id, last_event))
            if raw.startswith(prefix):
                last_event = raw
                if on_event is not None:
                    on_event(_event_of(raw) or {})
                continue
            try:
                message = json.loads(raw)
            except ValueError:
                continue  # not ours (cannot happen: fd 1 is the log), ignore
            if message.get("id") != task_id:
                continue
            seconds = time.monotonic() - start
            if "done" in message:
                return TaskResult("done", value=message["done"], last_event=_event_of(last_event), seconds=seconds)
            return TaskResult("raised", error=str(message.get("raised", "")), where=str(message.get("where", "")),
                              last_event=_event_of(last_event), seconds=seconds)

    def _interrupted_event(self, task_id: int, last_line: bytes | None) -> Mapping[str, Any] | None:
        """The event of task ``task_id`` that a hang or crash interrupted: the example its slot
        holds (:func:`begin` writes it before each example), else its last event line."""
        try:
            with self.slot_path.open("rb") as slot:
                owner, length = _SLOT_HEADER.unpack(slot.read(_SLOT_HEADER.size))
                if owner == task_id and 0 < length <= SLOT_BYTES - _SLOT_HEADER.size:
                    event = _event_of(slot.read(length))
                    if event is not None:
                        return event
        except (OSError, ValueError, KeyError, struct.error):
            pass  # no slot, or a torn one: the pipe's last event says what it can
        return _event_of(last_line)

    def _stopped_result(self, start: float) -> TaskResult:
        return TaskResult("stopped", error="the run was interrupted; the worker was stopped",
                          seconds=time.monotonic() - start)

    def _hung(self, start: float, last_event: Mapping[str, Any] | None, timeout: float,
              heartbeat: float | None, whole: bool) -> TaskResult:
        self._kill()
        if self._stopped:
            return self._stopped_result(start)
        limit = (f"did not finish within its {timeout:g}s limit" if whole or heartbeat is None
                 else f"made no progress for {heartbeat:g}s (per-example limit)")
        return TaskResult("timeout", error=f"the engine {limit}; the worker was killed",
                          last_event=last_event, seconds=time.monotonic() - start)

    def _died(self, start: float, last_event: Mapping[str, Any] | None) -> TaskResult:
        if self._stopped:
            return self._stopped_result(start)
        proc = self._proc
        code = proc.wait() if proc is not None else 0
        self._kill()
        tail = [line for line in self.log_tail(6) if line.strip()][-3:]
        detail = f" (last log lines: {' | '.join(tail)})" if tail else ""
        return TaskResult("crashed", error=f"the worker {describe_exit(code)}{detail}",
                          last_event=last_event, seconds=time.monotonic() - start)


_PRESTARTED: dict[bool, Worker] = {}


def prestart(modes: Sequence[bool] = (False, True)) -> None:
    """Start a worker per mode now (``True``: ``-O``), in this process's environment, for
    :meth:`Worker.take`: a verb that will run workers starts them before its own imports and
    checks, which took a third of a second with one core idle; a worker reads in its task
    modules while it waits (:func:`serve`), loading no engine before its first task."""
    for optimized in modes:
        if optimized not in _PRESTARTED:
            worker = Worker(optimized=optimized)
            worker._start()
            _PRESTARTED[optimized] = worker


def discard_prestarted() -> None:
    """Close the workers :func:`prestart` started that nobody took."""
    while _PRESTARTED:
        _PRESTARTED.popitem()[1].close()


def _event_prefix(task_id: int) -> str:
    return f'{{"id": {task_id}, "event": '


def event_line(task_id: int, event: Mapping[str, Any]) -> str:
    """An event as the worker writes it: a JSON line (``{"id": N, "event": {...}}``) that the
    supervisor tells apart by its prefix alone, parsing only the last one it needs."""
    return _event_prefix(task_id) + json.dumps(dict(event), default=str) + "}"


def _event_of(raw: bytes | None) -> Mapping[str, Any] | None:
    if raw is None:
        return None
    event: Mapping[str, Any] = json.loads(raw)["event"]
    return event


class TaskEmitter:
    """What a task function gets as ``emit`` in a worker: each call sends an event line at once;
    :meth:`begin` records the example about to run in the slot, sending it only as a heartbeat."""

    def __init__(self, task_id: int, send: Callable[[str], None], slot: mmap.mmap | None) -> None:
        self.task_id, self._send, self._slot = task_id, send, slot
        self._last_sent = -HEARTBEAT_EVERY_S
        self._starts: dict[tuple[Any, ...], str] = {}

    def __call__(self, event: Mapping[str, Any]) -> None:
        self._send(event_line(self.task_id, event))

    def begin(self, head: Mapping[str, Any], example_json: str) -> None:
        key = tuple(head.items())
        start = self._starts.get(key)
        if start is None:  # one per clause and phase: encoded once
            fields = json.dumps(dict(head), default=str)[1:-1]
            start = self._starts[key] = f'{_event_prefix(self.task_id)}{{{fields}{", " if fields else ""}"example": '
        line = f"{start}{example_json}}}}}"
        now = time.monotonic()
        data = line.encode()
        if self._slot is not None and len(data) <= SLOT_BYTES - _SLOT_HEADER.size:
            self._slot[_SLOT_HEADER.size:_SLOT_HEADER.size + len(data)] = data
            self._slot[:_SLOT_HEADER.size] = _SLOT_HEADER.pack(self.task_id, len(data))
            if now - self._last_sent < HEARTBEAT_EVERY_S:
                return
        self._last_sent = now
        self._send(line)


def begin(emit: Emit | None, head: Mapping[str, Any], example: Any, example_json: str | None = None) -> None:
    """Report that the example ``example`` (JSON-able; ``example_json``: its JSON text, where
    the caller has it) is about to run, with ``head`` (``clause``, ``phase``). In a worker, the
    example goes to the slot that outlives a crash and is sent as a throttled heartbeat; any
    other ``emit`` gets the whole event; None: nothing."""
    if isinstance(emit, TaskEmitter):
        emit.begin(head, example_json if example_json is not None else json.dumps(example, default=str))
    elif emit is not None:
        emit({**head, "example": example})


def _open_slot() -> mmap.mmap | None:
    path = os.environ.get(SLOT_ENV)
    if not path:
        return None
    try:
        with open(path, "r+b") as f:
            return mmap.mmap(f.fileno(), SLOT_BYTES)
    except (OSError, ValueError):
        return None


def _pump(stream: IO[bytes] | None, lines: queue.Queue[bytes | None]) -> None:
    if stream is None:
        lines.put(None)
        return
    try:
        for raw in stream:
            lines.put(raw)
    except (OSError, ValueError):
        pass
    lines.put(None)


# -- the worker side ------------------------------------------------------------------


def last_frame(exc: BaseException) -> str:
    """``file:line in function`` of the innermost frame of ``exc``'s traceback."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    frame = frames[-1]
    return f"{frame.filename}:{frame.lineno} in {frame.name}"


def _resolve(call: str) -> TaskFunction:
    module_name, _, name = call.partition(":")
    if not module_name.startswith("kvcontract."):
        raise ValueError(f"worker tasks must be kvcontract functions, not {call!r}")
    function: TaskFunction = getattr(importlib.import_module(module_name), name)
    return function


def serve() -> int:
    """The worker's loop: read tasks from stdin, answer on the original stdout. The cyclic
    collector is paused until the first task has loaded its engine (what the worker imports
    stays for good; :func:`kvcontract.conformance.run.tasks.engine` resumes it) or has ended."""
    gc.disable()
    die_with_supervisor()
    with contextlib.suppress(Exception):  # while the supervisor gets its first task ready (a task reports a failure)
        importlib.import_module(TASK_MODULES)
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # fd 1 -> the log file the supervisor gave as stderr
    sys.stdout = sys.stderr
    lock = threading.Lock()
    slot = _open_slot()

    def send(message: Mapping[str, Any] | str) -> None:
        text = message if isinstance(message, str) else json.dumps(message, default=str)
        with lock:
            protocol.write(text + "\n")
            protocol.flush()

    for raw in sys.stdin:
        if not raw.strip():
            continue
        task = json.loads(raw)
        task_id = task["id"]
        emit = TaskEmitter(task_id, send, slot)
        try:
            value = _resolve(task["call"])(task.get("args", {}), emit)
        except Exception as exc:  # noqa: BLE001 - the supervisor judges; the worker reports
            send({"id": task_id, "raised": f"{type(exc).__name__}: {exc}", "where": last_frame(exc)})
            continue
        finally:
            if not gc.isenabled():  # a task that loaded no engine
                gc.freeze()
                gc.enable()
        send({"id": task_id, "done": value})
    return 0


if __name__ == "__main__":
    # Serve from the module as imported by name, not from ``__main__``: task code tells this
    # module's classes (TaskEmitter) by identity.
    status = importlib.import_module("kvcontract.conformance.run.worker").serve()
    sys.stderr.flush()
    # Skip the interpreter's teardown: an engine's atexit hooks and module finalizers (torch,
    # vLLM) take seconds, and every answer has been flushed already.
    os._exit(status)
