"""What every kvcontract report shares: a header, and one way to write files.

``check``, ``mutants``, ``symbolic`` and ``kernels`` reports all start with
:class:`ReportHeader` (schema version, report kind, kit version, engine and
its version, profile, seed), so a tool reading any of them knows what it
reads. Files are written by :func:`write_atomic`: whole or not at all, and
readable like any other output (the umask's mode, not a temp file's 0600).
Tables, for a terminal or for markdown, are rendered by :func:`text_table`
and :func:`markdown_table` (one cell escape, :func:`md_cell`). What the kit keeps
between runs lives under :func:`cache_dir`.
This module imports nothing else of the kit.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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


CACHE_ENV = "KVCONTRACT_CACHE_DIR"
"""Where the kit keeps what it works out once per machine (default ``$XDG_CACHE_HOME/kvcontract``
or ``~/.cache/kvcontract``); ``off``: nowhere."""


def cache_dir() -> Path | None:
    """The kit's cache directory (:data:`CACHE_ENV`), None when caching is off."""
    given = os.environ.get(CACHE_ENV)
    if given == "off":
        return None
    return Path(given or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "kvcontract"))


_KIT_DIGEST: list[str] = []


def kit_digest(fresh: bool = False) -> str:
    """A digest of the kit's own Python source, once per process (``fresh``: read again, for a
    long-lived process that stamps what others made): what the kit keeps in its cache from its
    own work (shared examples, a parsed corpus) is kept per digest."""
    if _KIT_DIGEST and not fresh:
        return _KIT_DIGEST[0]
    _KIT_DIGEST.clear()
    import hashlib

    import kvcontract

    root = Path(os.path.abspath(os.path.dirname(kvcontract.__file__)))  # the package (a link tree in a checkout)
    digest = hashlib.sha256()
    for folder, dirs, files in os.walk(root, followlinks=True):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(f for f in files if f.endswith(".py")):
            path = Path(folder) / name
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    _KIT_DIGEST.append(digest.hexdigest()[:16])
    return _KIT_DIGEST[0]


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


# -- tables --------------------------------------------------------------------------------------

Align = str
"""A column's alignment: ``"<"`` (left, the default) or ``">"`` (right, for numbers)."""


def md_cell(value: Any) -> str:
    """``value`` as one markdown table cell: pipes escaped, line breaks as spaces."""
    return str(value).replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]],
                   align: Sequence[Align] = ()) -> list[str]:
    """A markdown table: the header, the alignment row (``:---`` / ``---:``), the rows.
    Every cell goes through :func:`md_cell`."""
    aligns = [*align, *["<"] * (len(header) - len(align))]
    marks = [("---:" if a == ">" else ":---") for a in aligns]
    lines = ["| " + " | ".join(md_cell(h) for h in header) + " |", "|" + "|".join(marks) + "|"]
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"a row of {len(row)} cells in a table of {len(header)} columns: {row!r}")
        lines.append("| " + " | ".join(md_cell(c) for c in row) + " |")
    return lines


def text_table(header: Sequence[str], rows: Sequence[Sequence[Any]], align: Sequence[Align] = (),
               rule: bool = True, gap: int = 2) -> list[str]:
    """A plain-text table for a terminal: columns as wide as their widest cell, ``gap``
    spaces apart, a rule of dashes under the header (``rule``); trailing spaces trimmed."""
    aligns = [*align, *["<"] * (len(header) - len(align))]
    cells = [[str(h) for h in header]]
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"a row of {len(row)} cells in a table of {len(header)} columns: {row!r}")
        cells.append([str(c) for c in row])
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    space = " " * gap

    def line(row: Sequence[str]) -> str:
        return space.join(c.rjust(w) if a == ">" else c.ljust(w)
                          for c, w, a in zip(row, widths, aligns, strict=True)).rstrip()

    out = [line(cells[0])]
    if rule:
        out.append("-" * len(space.join("-" * w for w in widths)))
    out += [line(r) for r in cells[1:]]
    return out
