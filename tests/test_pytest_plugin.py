"""The pytest plugin runs the conformance items beside its host project's own tests.

Each test is a host project in ``pytester``'s directory (one test file of its own),
run in-process with the plugin (installed through the ``pytest11`` entry point). The
clauses are narrowed with ``-k`` to a few fast ones; the profile is the plugin's default
(quick: the systematic phase only). ERROR-OPTIMIZE-1 under ``-O``: tests/test_verdicts.py.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kvcontract.conformance.contract.laws import DERIVED, LAWS

pytest_plugins = ["pytester"]

CLAUSES = "MERGE-ORDER-1 or MERGE-IDENTITY-1"
"""Two fast clauses; the mutant below fails MERGE-ORDER-1, and not MERGE-IDENTITY-1."""
MUTANT = "mutant:capability-equality"
ITEMS = len(LAWS) + len(DERIVED)

HOST_TEST = """
def test_host_own():
    assert sum([1, 2]) == 3
"""


@pytest.fixture
def host(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project with a test of its own."""
    pytester.makepyfile(test_host=HOST_TEST)
    return pytester


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", "-rA", *args)


def test_the_host_tests_run_beside_the_conformance_items(host: pytest.Pytester) -> None:
    result = _run(host, "--kvcontract-engine", "reference", "-k", f"host_own or {CLAUSES}")
    result.assert_outcomes(passed=3, deselected=ITEMS - 2)
    result.stdout.fnmatch_lines_random([
        "PASSED test_host.py::test_host_own",
        "PASSED kvcontract::reference::MERGE-ORDER-1",
        "PASSED kvcontract::reference::MERGE-IDENTITY-1",
    ])


def test_without_the_engine_option_only_the_host_tests_run(host: pytest.Pytester) -> None:
    result = _run(host)
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*kvcontract::*")


def test_kvcontract_only_deselects_the_host_tests(host: pytest.Pytester) -> None:
    result = _run(host, "--kvcontract-engine", "reference", "--kvcontract-only", "-k", f"host_own or {CLAUSES}")
    result.assert_outcomes(passed=2, deselected=1 + ITEMS - 2)
    result.stdout.fnmatch_lines([f"collected {1 + ITEMS} items / {ITEMS - 1} deselected / 2 selected"])
    result.stdout.no_fnmatch_line("*test_host_own*")


def test_a_mutant_fails_the_clause_it_breaks(host: pytest.Pytester) -> None:
    result = _run(host, "--kvcontract-engine", MUTANT, "-k", f"host_own or {CLAUSES}")
    result.assert_outcomes(passed=2, failed=1, deselected=ITEMS - 2)
    result.stdout.fnmatch_lines_random([
        f"FAILED kvcontract::{MUTANT}::MERGE-ORDER-1*",
        f"PASSED kvcontract::{MUTANT}::MERGE-IDENTITY-1",
        "PASSED test_host.py::test_host_own",
    ])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # the failure shows the finding's repro snippet
    result.stdout.fnmatch_lines(["FAIL MERGE-ORDER-1 [[]*]: *", "*load_mutant('capability-equality')*"])


def test_the_derived_clause_is_an_item_that_skips_without_o(host: pytest.Pytester) -> None:
    """ERROR-OPTIMIZE-1 is judged from -O findings: in the normal interpreter it skips, saying why."""
    result = _run(host, "--kvcontract-engine", "reference", "--kvcontract-only", "-k", "ERROR-OPTIMIZE-1")
    result.assert_outcomes(skipped=1, deselected=ITEMS)
    result.stdout.fnmatch_lines(
        ["SKIPPED [[]1[]] *ERROR-OPTIMIZE-1 is judged from the -O findings*run python -O -m pytest*"])


def test_junit_names_are_clean(host: pytest.Pytester) -> None:
    xml = host.path / "junit.xml"
    _run(host, "--kvcontract-engine", MUTANT, "-k", f"host_own or {CLAUSES}", f"--junitxml={xml}")
    cases = {(c.get("classname"), c.get("name")): c for c in ET.parse(xml).iter("testcase")}
    assert set(cases) == {("test_host", "test_host_own"), (f"kvcontract.{MUTANT}", "MERGE-ORDER-1"),
                          (f"kvcontract.{MUTANT}", "MERGE-IDENTITY-1")}
    for classname, name in cases:
        assert classname and name and not any(c in classname + name for c in "[]"), (classname, name)
    assert cases[(f"kvcontract.{MUTANT}", "MERGE-ORDER-1")].find("failure") is not None
    assert cases[(f"kvcontract.{MUTANT}", "MERGE-IDENTITY-1")].find("failure") is None


def test_the_engine_loads_from_a_source_tree(host: pytest.Pytester) -> None:
    """``--kvcontract-engine-path DIR``: the engine is ``NAME@DIR``, its factory gets DIR."""
    host.makepyfile(tree_engine="""
        from pathlib import Path
        from kvcontract.conformance.engines.reference import ReferenceEngine

        class TreeEngine(ReferenceEngine):
            name = "tree"

        def factory(source_path=None):
            Path("source_path.txt").write_text(str(source_path))
            return TreeEngine()
    """)
    host.syspathinsert()
    tree = host.mkdir("checkout")
    result = _run(host, "--kvcontract-engine", "tree_engine:factory", "--kvcontract-engine-path", "checkout",
                  "--kvcontract-only", "-k", "MERGE-ORDER-1")
    result.assert_outcomes(passed=1, deselected=ITEMS)
    result.stdout.fnmatch_lines(["PASSED kvcontract::tree::MERGE-ORDER-1"])
    assert (host.path / "source_path.txt").read_text() == str(Path(tree).resolve())


@pytest.mark.parametrize(("args", "message"), [
    (["--kvcontract-engine", "reference", "--kvcontract-engine-path", "/nonexistent"],
     "--kvcontract-engine-path /nonexistent: no such directory"),
    (["--kvcontract-engine", "no-such-engine"], "--kvcontract-engine no-such-engine: unknown engine*"),
    (["--kvcontract-engine", "mutant:no-such-mutant"], "--kvcontract-engine mutant:no-such-mutant: *"),
    (["--kvcontract-engine", "reference", "--kvcontract-engine-path", "."],
     "*'reference' cannot be loaded from a source tree*"),
    (["--kvcontract-engine", "reference", "--kvcontract-xfails", "missing.toml"],
     "--kvcontract-xfails missing.toml: no such file"),
    (["--kvcontract-engine", "reference", "--kvcontract-xfails", "x.toml", "--kvcontract-no-xfails"],
     "--kvcontract-xfails and --kvcontract-no-xfails exclude each other"),
    (["--kvcontract-only"], "--kvcontract-only needs --kvcontract-engine NAME"),
    (["--kvcontract-engine-path", "."], "--kvcontract-engine-path needs --kvcontract-engine NAME"),
])
def test_bad_options_are_usage_errors(host: pytest.Pytester, args: list[str], message: str) -> None:
    result = _run(host, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: kvcontract: {message}"])


def test_a_bad_expectations_file_is_a_usage_error(host: pytest.Pytester) -> None:
    bad = host.makefile(".toml", xfails="this is = not [toml")
    result = _run(host, "--kvcontract-engine", "reference", "--kvcontract-xfails", str(bad))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: kvcontract: expectations file {bad} is not TOML*"])
