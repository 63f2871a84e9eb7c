"""The normative text of the contract and its clause catalogue.

``SPEC.md`` is the contract in prose; ``clauses.toml`` lists every clause
(ID, title, chapter, level, and the engine code that relies on it) for code to load. ``tests/test_spec_catalogue.py``
keeps the two in agreement.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from functools import cache
from pathlib import Path

SPEC_DIR = Path(__file__).parent
SPEC_MD = SPEC_DIR / "SPEC.md"
CATALOGUE = SPEC_DIR / "clauses.toml"

LEVELS = ("MUST", "MUST NOT", "SHOULD", "SHOULD NOT", "MAY")
CHAPTERS = {
    "ROLE": "roles",
    "SPEC": "kinds",
    "MERGE": "merge",
    "ERROR": "error",
    "UNIFORM": "uniformity",
    "GROUP": "grouping",
    "PLAN": "planning",
    "DISPATCH": "dispatch",
    "NUM": "numerics",
}
"""Clause-ID prefix -> chapter name."""

_HEADING = re.compile(r"^### ([A-Z]+(?:-[A-Z0-9]+)*-\d+) — (.+)$")
_LEVEL = re.compile(r"^\*\*(MUST NOT|MUST|SHOULD NOT|SHOULD|MAY)\.\*\*")
_RELIED = "*Relied on by:*"


@dataclasses.dataclass(frozen=True)
class Clause:
    """One normative clause: its stable ID, title, chapter and RFC 2119 level, and the
    engine code that relies on it (``relied_on_by``: required of every MUST clause,
    tests/test_spec_citations.py; not part of a clause's identity)."""

    id: str
    title: str
    chapter: str
    level: str
    relied_on_by: str = dataclasses.field(default="", compare=False)

    @property
    def prefix(self) -> str:
        return self.id.split("-", 1)[0]


class CatalogueError(ValueError):
    """The catalogue file is malformed or names an unknown clause."""


@cache
def load_catalogue() -> tuple[Clause, ...]:
    """Every clause of the contract, in catalogue order."""
    data = tomllib.loads(CATALOGUE.read_text())
    clauses = []
    for entry in data.get("clause", []):
        try:
            clause = Clause(entry["id"], entry["title"], entry["chapter"], entry["level"],
                            str(entry.get("relied_on_by", "")))
        except KeyError as exc:
            raise CatalogueError(f"{CATALOGUE}: clause entry {entry!r} lacks {exc}") from None
        if clause.level not in LEVELS:
            raise CatalogueError(f"{CATALOGUE}: {clause.id}: unknown level {clause.level!r}")
        clauses.append(clause)
    ids = [c.id for c in clauses]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise CatalogueError(f"{CATALOGUE}: duplicate clause IDs {duplicates}")
    return tuple(clauses)


def clause(clause_id: str) -> Clause:
    """The clause with this ID; ``CatalogueError`` if there is none."""
    for c in load_catalogue():
        if c.id == clause_id:
            return c
    raise CatalogueError(f"no clause {clause_id!r} in the catalogue")


def parse_spec_md(text: str | None = None) -> tuple[Clause, ...]:
    """The clauses as written in SPEC.md: heading ``### ID — Title`` followed by a
    paragraph starting with the bold level word, and optionally a paragraph starting
    ``*Relied on by:*`` before the next heading."""
    lines = (SPEC_MD.read_text() if text is None else text).splitlines()
    clauses = []
    for index, line in enumerate(lines):
        match = _HEADING.match(line)
        if not match:
            continue
        clause_id, title = match.groups()
        level = None
        for following in lines[index + 1 :]:
            if following.strip():
                level_match = _LEVEL.match(following.strip())
                level = level_match.group(1) if level_match else None
                break
        chapter = CHAPTERS.get(clause_id.split("-", 1)[0], "?")
        clauses.append(Clause(clause_id, title, chapter, level or "?", _relied_paragraph(lines[index + 1 :])))
    return tuple(clauses)


@cache
def clause_sections() -> dict[str, str]:
    """Each clause's section of SPEC.md by ID, as markdown: the lines after its ``### ID — Title``
    heading up to the next heading (the normative paragraph first, then who relies on it and the
    rationale), blank lines at either end dropped."""
    lines = SPEC_MD.read_text().splitlines()
    sections: dict[str, str] = {}
    for index, line in enumerate(lines):
        match = _HEADING.match(line)
        if not match:
            continue
        body: list[str] = []
        for following in lines[index + 1 :]:
            if following.startswith("#"):
                break
            body.append(following)
        sections[match.group(1)] = "\n".join(body).strip()
    return sections


def _relied_paragraph(lines: list[str]) -> str:
    """The text of the clause's ``*Relied on by:*`` paragraph, joined onto one line; ""
    when the clause (the lines up to the next heading) has none."""
    for index, line in enumerate(lines):
        if line.startswith("#"):
            return ""
        if line.startswith(_RELIED):
            words = [line[len(_RELIED):].strip()]
            for following in lines[index + 1 :]:
                if not following.strip():
                    break
                words.append(following.strip())
            return " ".join(w for w in words if w)
    return ""
