"""The house's layout (issue 22): the four folders map to ``kvcontract.*``, every
subpackage is shipped, and no library module grows past about 500 lines."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"spec": "kvcontract.spec", "reference": "kvcontract.reference",
           "conformance": "kvcontract.conformance", "kernels": "kvcontract.kernels"}
MAX_LINES = 520
"""About 500: a module past this is split by role."""


def _library_modules() -> list[Path]:
    paths = [p for p in ROOT.glob("*.py")]
    for folder in FOLDERS:
        paths += sorted((ROOT / folder).rglob("*.py"))
    return paths


def test_every_subpackage_is_listed_in_pyproject():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    found = {"kvcontract"}
    for folder, package in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join([package, *parts]))
    assert found == listed


def test_every_package_folder_has_an_init():
    for folder in FOLDERS:
        for sub in (ROOT / folder).rglob("*"):
            if sub.is_dir() and any(sub.glob("*.py")) and "__pycache__" not in sub.parts:
                assert (sub / "__init__.py").exists(), sub


def test_no_library_module_is_over_about_500_lines():
    long = {str(p.relative_to(ROOT)): n for p in _library_modules()
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_no_top_level_import_named_reference_or_kernels():
    for path in [*_library_modules(), *ROOT.joinpath("tests").rglob("*.py")]:
        for line in path.read_text().splitlines():
            stripped = line.strip()
            assert not stripped.startswith(("import reference", "import kernels", "from reference ",
                                            "from kernels ", "from reference.", "from kernels.")), (path, line)
