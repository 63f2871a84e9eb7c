"""Chapter ROLE (spec/SPEC.md §2): every field declares one role; the model is pure."""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
from pathlib import Path

from kvcontract.reference import SPEC_KINDS, AnnotationRule, Role, role_of, rule_of

ROOT = Path(__file__).resolve().parent.parent


def test_every_field_declares_a_role():
    """ROLE-TABLE-1."""
    for kind in SPEC_KINDS:
        for f in dataclasses.fields(kind):
            role = role_of(f)
            if role is Role.ANNOTATION:
                assert isinstance(rule_of(f), AnnotationRule)
            if role is Role.CAPABILITY:
                assert f.default is False, f"{kind.__name__}.{f.name}: capabilities are flags"


def test_role_table_in_spec_md_names_every_field():
    """ROLE-TABLE-1: the prose table mentions every field of the model."""
    text = (ROOT / "spec" / "SPEC.md").read_text()
    for kind in SPEC_KINDS:
        for f in dataclasses.fields(kind):
            assert f"`{f.name}`" in text, f.name


def test_kinds_are_frozen_dataclasses():
    for kind in SPEC_KINDS:
        assert dataclasses.is_dataclass(kind)
        assert kind.__dataclass_params__.frozen


def test_reference_imports_without_torch_or_pydantic():
    """The model is pure Python: crosshair executes it symbolically."""
    code = (
        "import sys; sys.modules['torch'] = None; sys.modules['pydantic'] = None\n"
        "from kvcontract.reference import merge, MLAAttentionSpec, group_layers\n"
        "print('ok')"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "ok", result.stderr


def test_no_assert_statements_in_library_code():
    """ERROR-OPTIMIZE-1: the kit behaves the same under python -O."""
    offenders = []
    for folder in ("spec", "reference", "conformance", "kernels"):
        for path in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_text())
            offenders += [f"{path.relative_to(ROOT)}:{n.lineno}" for n in ast.walk(tree)
                          if isinstance(n, ast.Assert)]
    assert not offenders, offenders
