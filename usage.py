"""Usage errors of the ``kvcontract`` command line.

This module imports nothing else of the kit, so any verb (conformance, kernels,
symbolic) can raise :class:`UsageError` without depending on another verb.
"""

from __future__ import annotations


class UsageError(Exception):
    """A problem with how a command was called; reported in one line, exit 2."""
