"""The clause catalogue (spec/clauses.toml) agrees with spec/SPEC.md."""

from __future__ import annotations

import re
from pathlib import Path

from kvcontract.spec import CHAPTERS, LEVELS, load_catalogue, parse_spec_md

ROOT = Path(__file__).resolve().parent.parent


def test_catalogue_matches_spec_md():
    assert load_catalogue() == parse_spec_md()


def test_every_clause_is_well_formed():
    for clause in load_catalogue():
        assert re.fullmatch(r"[A-Z]+(-[A-Z0-9]+)+-\d+", clause.id), clause.id
        assert clause.prefix in CHAPTERS and clause.chapter == CHAPTERS[clause.prefix]
        assert clause.level in LEVELS
        assert clause.title


def test_spec_md_has_no_unparsed_clause_headings():
    text = (ROOT / "spec" / "SPEC.md").read_text()
    headings = re.findall(r"^### ([A-Z]+-[A-Z0-9-]+) ", text, flags=re.M)
    assert len(headings) == len(parse_spec_md())


def test_clause_ids_cited_in_code_exist():
    """Every clause ID cited by the library or the tests is in the catalogue."""
    known = {c.id for c in load_catalogue()}
    pattern = re.compile(r"\b(?:" + "|".join(CHAPTERS) + r")-[A-Z0-9]+(?:-[A-Z0-9]+)*-\d+\b")
    cited = set()
    for folder in ("reference", "conformance", "spec", "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            cited |= set(pattern.findall(path.read_text()))
    unknown = cited - known
    assert not unknown, f"cited but not in spec/clauses.toml: {sorted(unknown)}"
