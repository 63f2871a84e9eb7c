"""Every role and every MUST clause says which engine code relies on it, and the
citations still point at that code in the installed vLLM (spec/SPEC.md, ROLE-TABLE-1).

A citation is ``vllm/<path>.py:<line> `<name>`` optionally followed by ``in <function>``:
the cited line must contain ``<name>`` and the file must define ``<function>`` (its last
dotted part) at or above the line, so a citation cannot rot silently when vLLM moves.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from functools import cache
from pathlib import Path

import pytest

from kvcontract.reference.roles import advisory_reason, is_advisory, relied_on_by
from kvcontract.reference.specs import BASE_KINDS, SPEC_KINDS
from kvcontract.spec import load_catalogue, parse_spec_md

CITATION = re.compile(r"(vllm/[\w/]+\.py):(\d+) `([^`]+)`(?: in ([\w.]+))?")
"""``vllm/<path>.py:<line> `<name>` [in <function>]``."""

VLLM_VERSION = "0.34.0"


def _fields() -> list[tuple[str, dataclasses.Field]]:  # type: ignore[type-arg]
    return [(f"{k.__name__}.{f.name}", f) for k in (*BASE_KINDS, *SPEC_KINDS) for f in dataclasses.fields(k)]


def _field_texts() -> list[tuple[str, str]]:
    texts = []
    for name, f in _fields():
        for text in (relied_on_by(f), advisory_reason(f)):
            if text:
                texts.append((name, text))
    return texts


def _clause_texts() -> list[tuple[str, str]]:
    return [(c.id, c.relied_on_by) for c in load_catalogue() if c.relied_on_by]


def test_every_field_is_cited_or_advisory_with_a_reason():
    missing = [name for name, f in _fields() if not relied_on_by(f) and not advisory_reason(f)]
    assert not missing, f"fields with neither relied_on_by nor an advisory reason: {missing}"
    unexplained = [name for name, f in _fields() if is_advisory(f) and not advisory_reason(f)]
    assert not unexplained, f"advisory fields without a reason: {unexplained}"


def test_advisory_reasons_say_nothing_reads_the_merged_value():
    for name, f in _fields():
        reason = advisory_reason(f)
        if reason is not None:
            assert is_advisory(f), name
            assert reason.startswith("nothing reads the merged value"), (name, reason)


def test_every_citation_is_well_formed():
    for name, text in _field_texts() + _clause_texts():
        for path in re.findall(r"\bvllm/[\w/]+\.py:\d+", text):
            assert CITATION.search(text[text.index(path):]), f"{name}: citation {path} lacks a `name`"


def test_every_must_clause_names_who_relies_on_it():
    missing = [c.id for c in load_catalogue() if c.level in ("MUST", "MUST NOT") and not c.relied_on_by]
    assert not missing, f"MUST clauses without relied_on_by in spec/clauses.toml: {missing}"


def test_spec_md_carries_the_catalogues_relied_on_by_lines():
    in_md = {c.id: c.relied_on_by for c in parse_spec_md()}
    for clause in load_catalogue():
        assert in_md.get(clause.id, "") == clause.relied_on_by, clause.id


def test_empty_merge_is_a_should():
    """ERROR-EMPTY-1: vLLM never merges an empty list (its three call sites pass a
    non-empty list), so nothing relies on the error: a SHOULD."""
    (empty,) = [c for c in load_catalogue() if c.id == "ERROR-EMPTY-1"]
    assert empty.level == "SHOULD"


@cache
def _vllm_root() -> Path | None:
    spec = importlib.util.find_spec("vllm")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent.parent


def _vllm_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("vllm")
    except Exception:  # noqa: BLE001 - any failure means: not the cited release
        return None


def _all_citations() -> list[tuple[str, str, int, str, str | None]]:
    out = []
    for owner, text in _field_texts() + _clause_texts():
        for m in CITATION.finditer(text):
            out.append((owner, m.group(1), int(m.group(2)), m.group(3), m.group(4)))
    return out


def test_there_are_citations_to_check():
    assert len(_all_citations()) >= 40


@pytest.mark.parametrize(("owner", "path", "line", "name", "function"), _all_citations(),
                         ids=lambda v: str(v) if isinstance(v, str | int) else "")
def test_citation_points_at_the_named_code(owner: str, path: str, line: int, name: str, function: str | None):
    root = _vllm_root()
    if root is None:
        pytest.skip("vLLM is not installed: the citations cannot be checked")
    installed = _vllm_version()
    if installed is None or not installed.startswith(VLLM_VERSION):
        pytest.skip(f"citations are to vLLM {VLLM_VERSION}; installed: {installed}")
    source = root / path
    assert source.is_file(), f"{owner}: {path} does not exist in vLLM {installed}"
    lines = source.read_text().splitlines()
    assert 1 <= line <= len(lines), f"{owner}: {path} has {len(lines)} lines, cited :{line}"
    assert name in lines[line - 1], f"{owner}: {path}:{line} does not contain {name!r}: {lines[line - 1]!r}"
    if function:
        last = function.rsplit(".", 1)[-1]
        above = "\n".join(lines[:line])
        assert re.search(rf"^\s*(?:async\s+)?(?:def|class)\s+{re.escape(last)}\b", above, re.M), (
            f"{owner}: {path} defines no {last!r} at or above line {line}")
