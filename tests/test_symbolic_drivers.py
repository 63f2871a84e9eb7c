"""Issue 26 item 3: the well-kept alternative (Hypothesis's CrossHair backend over the laws'
strategies) hunts the same mutants as our driver; benchmarks/bench_symbolic_drivers.py puts
them side by side. And the native boundary where symbolic integers become plain ones."""

from __future__ import annotations

import sys

import pytest

from kvcontract.conformance.engines.native import concrete_int, concrete_ints
from kvcontract.conformance.power.crosshair_backend import backend_available, backend_hunt_isolated


def test_concrete_ints_are_plain_ints_without_a_symbolic_search():
    class Index:
        def __int__(self) -> int:
            return 7

    assert concrete_ints([1, True, Index()]) == (1, 1, 7)
    assert type(concrete_int(True)) is int


@pytest.mark.slow
@pytest.mark.skipif(backend_available() is not None, reason=str(backend_available()))
def test_the_backend_finds_what_the_laws_strategies_draw_and_never_a_block_size_they_do_not():
    found = backend_hunt_isolated("uniform-by-kind", 20)
    assert found["found"] and found["clause"] == "UNIFORM-MERGE-1" and found["examples"] >= 1
    # the strategies' block sizes are 1, 2, 16, 32, 64, 128: the 48-token branch is out of reach
    missed = backend_hunt_isolated("block-size-48", 6)
    assert not missed["found"] and not missed.get("skipped")


def test_an_unavailable_backend_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch):
    from kvcontract.conformance.power import crosshair_backend

    monkeypatch.setattr(crosshair_backend, "BACKEND_PACKAGE", "no_such_backend_package")
    out = backend_hunt_isolated("uniform-by-kind", 1, python=sys.executable)
    assert out["skipped"].startswith("hypothesis-crosshair is not installed") and not out["found"]
