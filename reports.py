"""What every kvcontract report shares: a header, and one way to write files.

``check``, ``mutants``, ``symbolic`` and ``kernels`` reports all start with
:class:`ReportHeader` (schema version, report kind, kit version, engine and
its version, profile, seed), so a tool reading any of them knows what it
reads. Files are written by :func:`write_atomic`: whole or not at all, and
readable like any other output (the umask's mode, not a temp file's 0600).
This module imports nothing else of the kit.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pydantic


class ReportHeader(pydantic.BaseModel):
    """The fields every report starts with."""

    schema_version: str
    kind: str
    """``check``, ``mutants``, ``symbolic`` or ``kernels``."""
    kit_version: str
    engine: str
    engine_version: str
    profile: str
    seed: int


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` so that no reader ever sees a partial file.

    The file gets the mode a plain ``open(path, "w")`` would give it.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
