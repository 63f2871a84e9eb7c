"""The well-kept alternative to our symbolic driver: Hypothesis with the CrossHair backend
(``hypothesis-crosshair``, ``settings(backend="crosshair")``) running the laws' own strategies
symbolically, hunted on the same mutants as :func:`kvcontract.conformance.power.symbolic.symbolic_hunt`.

:func:`backend_hunt` runs in a child interpreter (:func:`backend_hunt_isolated`: a solver that
hangs is stopped at its wall limit) and judges each clause the mutant is expected to fail, each
with an equal share of the CPU budget, until the first violation. ``benchmarks/bench_symbolic_drivers.py``
puts both drivers side by side in one run (``docs/symbolic-drivers.md``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

BACKEND_PACKAGE = "hypothesis_crosshair_provider"
"""The module ``hypothesis-crosshair`` installs (its absence is reported, never an error)."""


def backend_available() -> str | None:
    """None when the backend can run here, else why not."""
    import importlib.util

    if importlib.util.find_spec(BACKEND_PACKAGE) is None:
        return "hypothesis-crosshair is not installed (pip install hypothesis-crosshair)"
    return None


class _Budget(Exception):
    """The clause's share of the budget is spent."""


def _probe(engine: Any, law_: Any, until: float, counted: list[int]) -> Any:
    """The law as a Hypothesis test on the CrossHair backend, raising :class:`_Budget` at ``until``
    (CPU seconds); ``counted[0]`` counts the examples judged."""
    from hypothesis import HealthCheck, Phase, given, settings

    from kvcontract.conformance.contract.model import domain_of

    @settings(backend="crosshair", max_examples=10**6, deadline=None, database=None,
              phases=(Phase.generate,), suppress_health_check=list(HealthCheck), print_blob=False)
    @given(law_.strategy(domain_of(engine)))
    def probe(ex: Any) -> None:
        if time.process_time() > until:
            raise _Budget()
        counted[0] += 1
        law_.check(engine, ex)

    return probe


def backend_hunt(name: str, budget_s: float) -> dict[str, Any]:
    """Mutant ``name`` hunted by Hypothesis's CrossHair backend over each expected clause's own
    strategy (in this interpreter): ``found``, ``clause``, ``signature``, ``seconds`` (CPU to
    the first violation), ``examples`` (judged in all), ``errors`` (the kit's, by type)."""
    from kvcontract.conformance.contract.laws import law
    from kvcontract.conformance.contract.model import Violation
    from kvcontract.conformance.engines.mutants import load_mutant, mutant_class

    engine = load_mutant(name)
    clauses = list(mutant_class(name).expected_clauses)
    start = time.process_time()
    counted = [0]
    errors: dict[str, int] = {}
    for i, clause in enumerate(clauses):
        law_ = law(clause)
        if law_.requires(engine):
            continue
        until = start + budget_s * (i + 1) / len(clauses)

        probe = _probe(engine, law_, until, counted)
        try:
            probe()
        except _Budget:
            continue
        except Violation as violation:
            return {"found": True, "clause": clause, "signature": violation.signatures[0],
                    "seconds": round(time.process_time() - start, 3), "examples": counted[0], "errors": errors}
        except Exception as exc:  # noqa: BLE001 - the backend or the kit failed on this clause: counted
            errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
    return {"found": False, "seconds": round(time.process_time() - start, 3), "examples": counted[0],
            "errors": errors}


def backend_hunt_isolated(name: str, budget_s: float, python: str = sys.executable) -> dict[str, Any]:
    """:func:`backend_hunt` in a child interpreter, stopped at three times its budget."""
    why = backend_available()
    if why:
        return {"found": False, "skipped": why, "examples": 0, "seconds": 0.0, "errors": {}}
    code = ("import json, sys; from kvcontract.conformance.power.crosshair_backend import backend_hunt; "
            "print(json.dumps(backend_hunt(sys.argv[1], float(sys.argv[2]))))")
    try:
        done = subprocess.run([python, "-c", code, name, str(budget_s)], capture_output=True, text=True,
                              timeout=3 * budget_s + 60, check=False)
    except subprocess.TimeoutExpired:
        return {"found": False, "examples": 0, "seconds": budget_s, "errors": {"wall limit": 1}}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        return {"found": False, "examples": 0, "seconds": 0.0, "errors": {tail[0][:120]: 1}}
    result: dict[str, Any] = json.loads(lines[-1])
    return result
