"""Usage errors of the ``kvcontract`` command line.

This module imports nothing else of the kit, so any verb (conformance, kernels,
symbolic) can raise :class:`UsageError` without depending on another verb.
"""

from __future__ import annotations

import signal


class UsageError(Exception):
    """A problem with how a command was called; reported in one line, exit 2."""


class Interrupted(KeyboardInterrupt):
    """The command was stopped by a signal: raised by the command line's SIGTERM handler (a
    plain :class:`KeyboardInterrupt` is SIGINT). A verb that keeps a partial report catches
    it, writes the report and returns :func:`interrupt_exit_code`."""

    def __init__(self, signum: int, message: str = "") -> None:
        super().__init__(message or f"interrupted by signal {signum}")
        self.signum = signum


def interrupt_signal(exc: BaseException) -> int:
    """The signal that stopped the command: an :class:`Interrupted`'s, else SIGINT."""
    return int(getattr(exc, "signum", signal.SIGINT))


def interrupt_name(exc: BaseException) -> str:
    """``SIGINT`` / ``SIGTERM``: the signal that stopped the command, by name."""
    signum = interrupt_signal(exc)
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def interrupt_exit_code(exc: BaseException) -> int:
    """128 + the signal: 130 for SIGINT, 143 for SIGTERM (the shell's convention)."""
    return 128 + interrupt_signal(exc)
