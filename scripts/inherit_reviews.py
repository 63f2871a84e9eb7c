"""Carry a reviewed release's defect reviews to another release where the code is the same.

Usage: python scripts/inherit_reviews.py REPORT.json TREE BASE_REVIEW.toml BASE_TREE OUT.toml

REPORT.json is ``kvcontract check --no-xfails --json`` of the release whose source tree is TREE
(the directory holding its package). BASE_REVIEW.toml reviews the defects of another release,
whose tree is BASE_TREE. A defect of the report whose id the base review has, and whose
function (``defect["function"]``: ``Class.method`` or a module function, in the file the
report traced it to) is the same code in both trees (equal ASTs, line numbers and comments
aside), is written to OUT.toml with the base's reason, prefixed by what was compared. Every
other defect is listed on stdout as needing a review of its own, with why (no base review, a
function that differs, a function not found); OUT.toml then holds a commented stub for each,
which :mod:`scripts.write_xfails` refuses until someone reviews it against the release's source.
"""

from __future__ import annotations

import ast
import json
import sys
import tomllib
from pathlib import Path
from typing import Any


def function_node(path: Path, qualified: str) -> ast.AST | None:
    """The function ``Class.method`` or ``function`` of a module file, or None."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return None
    scope: list[ast.stmt] = tree.body
    parts = qualified.split(".")
    node: ast.AST | None = None
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        wanted = (ast.FunctionDef, ast.AsyncFunctionDef) if last else (ast.ClassDef,)
        node = next((n for n in scope if isinstance(n, wanted) and n.name == part), None)
        if node is None:
            return None
        scope = node.body
    return node


def same_code(tree: Path, base_tree: Path, defect: dict[str, Any], base_location: str) -> tuple[bool, str]:
    """Whether the defect's function is the same code in both trees, and what was compared."""
    function = str(defect.get("function") or "")
    file = str(defect.get("location") or "").rpartition(":")[0]
    base_file = base_location.rpartition(":")[0]
    if not function or not file:
        return False, "the report traced it to no function"
    here, there = function_node(tree / file, function), function_node(base_tree / base_file, function)
    if here is None or there is None:
        return False, f"{function} not found in {'this' if here is None else 'the base'} tree"
    if ast.dump(here) != ast.dump(there):
        return False, f"{function} differs from the base release's"
    return True, f"{function} ({file}) is the same code as the base release's ({base_file})"


def q(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def main(report_path: str, tree: str, base_review: str, base_tree: str, out_path: str) -> int:
    report = json.loads(Path(report_path).read_text())
    with open(base_review, "rb") as handle:
        base = {r["id"]: r for r in tomllib.load(handle).get("defect", [])}
    base_name = Path(base_review).stem
    inherited, todo = [], []
    for defect in report.get("defects", []):
        review = base.get(defect["id"])
        if review is None:
            todo.append((defect, f"{base_name} has no review of it"))
            continue
        same, how = same_code(Path(tree), Path(base_tree), defect, str(review.get("location", "")))
        if not same:
            todo.append((defect, how))
            continue
        inherited.append((defect, f"Same code as {base_name}: {how}, compared as ASTs (line numbers aside; the "
                                  f"lines below are {base_name}'s). {base_name}'s review: {review['reason']}"))
    lines = [f"# Reviewed defects of {report['engine']} {report['engine_version']}, as "
             f"scripts/inherit_reviews.py carried them from {base_name} where the function is the same code,",
             "# and reviewed by hand where it is not. scripts/write_xfails.py turns a `kvcontract check "
             "--no-xfails --json` report",
             "# and this file into the release's expectations."]
    for defect, reason in inherited:
        lines += ["", "[[defect]]", f"id = {q(defect['id'])}", f"location = {q(defect['location'])}",
                  f"reason = {q(reason)}"]
    for defect, why in todo:
        lines += ["", f"# TO REVIEW ({why}): {defect['id']} at {defect.get('location')}"]
    Path(out_path).write_text("\n".join(lines) + "\n")
    print(f"{len(inherited)} inherited, {len(todo)} to review -> {out_path}")
    for defect, why in todo:
        print(f"TO REVIEW {defect['id']} ({defect.get('location')}): {why}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
