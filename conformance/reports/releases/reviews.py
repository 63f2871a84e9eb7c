"""Reviews of the vLLM release history: the reviewed cause of each finding's birth and fix.

``docs/vllm-history/reviews/<release>.toml`` holds, written by hand, the causes of the
findings first seen in that release (``[[review]]``) and of those it fixed
(``[[fixed]]``): clause and signature patterns, a verdict, a reason citing the release's
source. :func:`reviewed` matches them to the history's rows, :func:`check_reviews` lists
what no cause explains (the test suite keeps that list empty), :func:`render_reviews` is
the document's *Reviews* section.
"""

from __future__ import annotations

import fnmatch
import json
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kvcontract.conformance.reports.releases.environments import REPO, version_key
from kvcontract.reports import markdown_table

FINDINGS = REPO / "docs" / "vllm-history" / "findings.json"
"""The history's rows (:func:`kvcontract.conformance.reports.releases.history.history`), as written."""
REVIEWS = REPO / "docs" / "vllm-history" / "reviews"
REVIEW_VERDICTS = ("defect", "coverage", "kit")
"""``defect``: the release breaks the clause (reviewed against its source); ``coverage``: a
ROLE-COVER-1 finding, the release defines a kind or field the contract does not classify (the
drift guard doing its job: the kit's gap, not the engine's defect); ``kit``: the finding is the
kit's own mistake on that release (a false positive, to be fixed in the kit)."""
FIX_VERDICTS = ("fixed", "moved", "kit")
"""For ``[[fixed]]`` entries: ``fixed``: the release changed the code that broke the clause;
``moved``: the defect is still there under another signature (e.g. it now trips on another
attribute); ``kit``: the finding vanished because of the kit, not the engine."""


def load_reviews(reviews_dir: Path = REVIEWS) -> dict[str, dict[str, Any]]:
    """``reviews/<release>.toml`` by release: the reviewed causes of the findings first seen in
    it (``[[review]]``) and, where it fixed findings, of those fixes (``[[fixed]]``)."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(reviews_dir.glob("*.toml")):
        with path.open("rb") as handle:
            data = tomllib.load(handle)
        if data.get("release") != path.stem:
            raise ValueError(f"{path}: release = {data.get('release')!r}, expected {path.stem!r}")
        for table, allowed in (("review", REVIEW_VERDICTS), ("fixed", FIX_VERDICTS)):
            for entry in data.get(table, []):
                for key in ("clause", "signature", "verdict", "reason"):
                    if not isinstance(entry.get(key), str) or not entry[key]:
                        raise ValueError(f"{path}: an entry lacks {key!r}: {entry}")
                if entry["verdict"] not in allowed:
                    raise ValueError(f"{path}: [[{table}]] verdict {entry['verdict']!r} is not one of "
                                     f"{', '.join(allowed)}")
        out[path.stem] = data
    return out


def _review_matches(entry: Mapping[str, Any], row: Mapping[str, Any]) -> bool:
    return (fnmatch.fnmatchcase(row["clause"], entry["clause"])
            and fnmatch.fnmatchcase(row["signature"], entry["signature"]))


def reviewed(rows: Sequence[Mapping[str, Any]], reviews: Mapping[str, Mapping[str, Any]]
             ) -> tuple[dict[int, tuple[str, int]], dict[int, tuple[str, int]], list[str]]:
    """Which review explains each row: (born, fixed) maps row index -> (release, entry index),
    the first matching entry of the row's first-bad (fixed-in) release; and every entry that
    explains no row (a stale review)."""
    born: dict[int, tuple[str, int]] = {}
    fixed: dict[int, tuple[str, int]] = {}
    used: set[tuple[str, str, int]] = set()
    for i, row in enumerate(rows):
        for table, release, target in (("review", row["first_bad"], born), ("fixed", row["fixed_in"], fixed)):
            entries = reviews.get(release or "", {}).get(table, [])
            for j, entry in enumerate(entries):
                if _review_matches(entry, row):
                    target[i] = (release, j)
                    used.add((release, table, j))
                    break
    stale = [f"{release} [[{table}]] #{j + 1}: {entry['clause']} {entry['signature']}"
             for release, data in reviews.items() for table in ("review", "fixed")
             for j, entry in enumerate(data.get(table, [])) if (release, table, j) not in used]
    return born, fixed, stale


def check_reviews(releases: Sequence[str], findings_path: Path | None = None,
                  reviews_dir: Path = REVIEWS) -> list[str]:
    """Problems with the reviews of ``releases``: a finding first seen (or fixed) there that no
    review explains, a review that explains nothing, a finding judged the kit's mistake."""
    rows = json.loads((findings_path or FINDINGS).read_text())
    reviews = load_reviews(reviews_dir)
    born, fixed, stale = reviewed(rows, reviews)
    problems = []
    for i, row in enumerate(rows):
        if row["first_bad"] in releases and i not in born:
            problems.append(f"unreviewed: first bad in {row['first_bad']}: {row['clause']} {row['signature']}")
        if row["fixed_in"] in releases and "fixed" in reviews.get(row["fixed_in"], {}) and i not in fixed:
            problems.append(f"unreviewed fix in {row['fixed_in']}: {row['clause']} {row['signature']}")
        for table, match in (("review", born.get(i)), ("fixed", fixed.get(i))):
            if match is None or match[0] not in releases:
                continue
            release, j = match
            if reviews[release][table][j]["verdict"] == "kit":
                problems.append(f"the kit's mistake ({release}): {row['clause']} {row['signature']}")
    problems += [f"stale review: {s}" for s in stale if s.split(" ")[0] in releases]
    return problems


def review_link(match: tuple[str, int], table: str) -> str:
    """A link to the cause ``match`` (release, entry index) of ``table`` (review or fixed)."""
    release, j = match
    label = f"{release} {'born' if table == 'review' else 'fixed'} #{j + 1}"
    return f"[{label}](#{_anchor(release, table, j)})"


def _anchor(release: str, table: str, j: int) -> str:
    return f"{table}-{release.replace('.', '-')}-{j + 1}"


def render_reviews(rows: Sequence[Mapping[str, Any]], reviews: Mapping[str, Mapping[str, Any]],
                   born: Mapping[int, tuple[str, int]], fixed: Mapping[int, tuple[str, int]]) -> list[str]:
    """Per reviewed release, its causes: the findings each explains, the verdict and the reason."""
    if not reviews:
        return []
    lines = ["", "## Reviews", "",
             "Each finding first seen in a reviewed release (and each one it fixed) was reviewed "
             "against that release's source: grouped into causes, each cause checked by reading the "
             "code path and running a repro snippet. **defect**: the release breaks the clause; "
             "**coverage**: the release defines a kind or field the contract does not classify "
             "(ROLE-COVER-1's drift guard; the kit's gap); **fixed**: the release changed the code "
             "that broke it; **moved**: the defect remains under another signature; **kit**: the "
             "kit's own mistake (to be fixed in the kit). Written by hand in `docs/vllm-history/reviews/<release>.toml`; "
             "`scripts/vllm_history.py --check-reviews RELEASES` lists what no cause explains."]
    for release in sorted(reviews, key=version_key):
        data = reviews[release]
        rows_md: list[list[Any]] = []
        for table, matched in (("review", born), ("fixed", fixed)):
            for j, entry in enumerate(data.get(table, [])):
                n = sum(1 for m in matched.values() if m == (release, j))
                what = "born" if table == "review" else "fixed"
                rows_md.append([f'<a id="{_anchor(release, table, j)}"></a>{what} #{j + 1}', f"`{entry['clause']}`",
                                f"`{entry['signature']}`", entry["verdict"], n, entry["reason"]])
        lines += ["", f"### {release} (compared with {data.get('compared_with', '?')})", "",
                  *markdown_table(["#", "clause", "signature", "verdict", "findings", "reason"], rows_md,
                                  align="<<<<><")]
    return lines
