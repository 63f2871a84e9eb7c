"""A worker dies with its supervisor, however the supervisor ends (the worker's side of
:mod:`kvcontract.conformance.run.worker`'s promise that nothing outlives the command)."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

SUPERVISOR_ENV = "KVCONTRACT_SUPERVISOR_PID"
"""The supervisor's pid, as the worker's environment tells it (the parent it must die with)."""
ORPHAN_POLL_S = 0.25
_PR_SET_PDEATHSIG = 1


def die_with_supervisor() -> None:
    """Arrange this worker's death with its supervisor: the kernel's parent-death signal, and a
    guard thread polling the parent that kills the worker's whole group."""
    parent = _supervisor()
    _die_with_parent(parent)
    threading.Thread(target=_orphan_guard, args=(parent,), daemon=True).start()


def _supervisor() -> int:
    """The pid this worker must die with: the supervisor's, as its environment says."""
    try:
        return int(os.environ.get(SUPERVISOR_ENV, ""))
    except ValueError:
        return os.getppid()


def _die_with_parent(parent: int) -> None:
    """``PR_SET_PDEATHSIG`` (SIGKILL) on Linux: the kernel kills this worker when the supervisor
    ends, however it ends, even while a task holds the GIL. Checked against ``parent`` after
    the call, since the supervisor may have gone before it."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the guard thread polls instead
    if os.getppid() != parent:
        _kill_own_group()


def _kill_own_group() -> None:
    try:
        os.killpg(os.getpgrp(), signal.SIGKILL)  # what the engine started in this group, and this worker
    finally:
        os._exit(3)


def _orphan_guard(parent: int) -> None:
    """Kill this worker's group when the supervisor is gone (killed with SIGKILL, it closes
    no pipe a hung task would notice): a worker never outlives the command that started
    it. The fallback of :func:`_die_with_parent`, and what reaches the engine's children."""
    while True:
        time.sleep(ORPHAN_POLL_S)
        if os.getppid() != parent:
            _kill_own_group()
