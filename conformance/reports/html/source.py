"""The engine's source around a defect's line, read from the files (never imported).

A defect's ``location`` is ``file:line`` relative to the parent of the engine's package
(``vllm/v1/kv_cache_interface.py:814``; a catalogue mutant's ``mutants/planning.py:79``). The file
is looked for, in order, under the folder given (``kvcontract report --source DIR``), the source
tree the check ran on (the report's ``engine_source``), and the installed package of that name
(the kit's own engines folder for a mutant) — an installed package only when its version is the
report's: another release's line numbers would point elsewhere. What cannot be shown says why.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

CONTEXT = 5
"""Lines shown either side of the defect's line."""


@dataclass(frozen=True)
class Excerpt:
    """Lines ``first``.. of ``path`` with the defect's ``lines`` marked; ``note`` when none."""

    path: str
    first: int
    lines: tuple[str, ...]
    marked: frozenset[int]
    note: str = ""

    def numbered(self) -> list[tuple[int, str, bool]]:
        return [(self.first + i, text, self.first + i in self.marked) for i, text in enumerate(self.lines)]


@dataclass(frozen=True)
class Root:
    folder: Path
    how: str
    version_ok: bool = True
    why_not: str = ""


def _installed(top: str, engine: str, version: str) -> Root | None:
    """The installed package ``top``'s parent folder, if its version is the report's."""
    if engine.startswith("mutant:") or top == "mutants":
        engines = Path(__file__).resolve().parents[2] / "engines"
        from kvcontract import __version__

        ok = __version__ == version
        return Root(engines, "the kit's mutant catalogue", ok,
                    "" if ok else f"this kit is {__version__}, the report's mutant is {version}")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))).parent
    try:
        installed = importlib.metadata.version(top)
    except importlib.metadata.PackageNotFoundError:
        installed = ""
    ok = installed == version
    return Root(folder, f"the installed {top} {installed}".rstrip(), ok,
                "" if ok else f"the installed {top} is {installed or 'of unknown version'}, the report's is {version}")


def roots(top: str, engine: str, version: str, given: str | None,
          engine_source: Mapping[str, str] | None) -> list[Root]:
    out = []
    if given:
        out.append(Root(Path(given), f"--source {given}"))
    if engine_source and engine_source.get("path"):
        out.append(Root(Path(engine_source["path"]), f"the checked source tree {engine_source['path']}"))
    installed = _installed(top, engine, version)
    if installed is not None:
        out.append(installed)
    return out


def excerpt(location: str, lines: Sequence[int], *, engine: str, version: str, given: str | None = None,
            engine_source: Mapping[str, str] | None = None, context: int = CONTEXT) -> Excerpt:
    """The source around ``location`` (``file:line``), ``context`` lines either side, every line
    of ``lines`` in that window marked."""
    file, _, number = location.rpartition(":")
    if not file or not number.isdigit():
        return Excerpt(location, 0, (), frozenset(), "no engine line: the finding was not traced to one")
    line = int(number)
    top = Path(file).parts[0]
    tried = []
    for root in roots(top, engine, version, given, engine_source):
        path = root.folder / file
        if not path.is_file():
            tried.append(f"not in {root.how}")
            continue
        if not root.version_ok:
            tried.append(root.why_not)
            continue
        text = path.read_text(encoding="utf-8", errors="replace").splitlines()
        if line > len(text):
            tried.append(f"{root.how} has {len(text)} lines in {file}, fewer than {line}")
            continue
        first = max(1, line - context)
        last = min(len(text), line + context)
        marked = frozenset({line, *(n for n in lines if first <= n <= last)})
        return Excerpt(file, first, tuple(text[first - 1:last]), marked, f"from {root.how}")
    why = "; ".join(tried) or f"no {top} found here (give --source DIR: the folder holding {top}/)"
    return Excerpt(file, line, (), frozenset({line}), f"source not shown: {why}")


__all__ = ["CONTEXT", "Excerpt", "excerpt"]
