"""The worker that plans a report's corpus tables with the engine under check
(:func:`kvcontract.conformance.reports.html.plans.run_workers` starts it as ``python [-O] -m
kvcontract.conformance.reports.html.plan_worker``): the request on stdin (the engine's name, the
answers file, the cases), the engine loaded once (a catalogue mutant too), one JSON line per case
appended to the answers file as it is planned, so that a crash or a hang costs only the case it
was on."""

from __future__ import annotations

import json
import sys
from typing import Any


def main() -> int:
    """The worker's body: load the engine once, plan each case, one JSON line per case."""
    from kvcontract.conformance.cli.plan import plan_with
    from kvcontract.conformance.contract.codec import spec_from_json
    from kvcontract.conformance.engines.registry import resolve_engine

    request = json.loads(sys.stdin.read())
    try:
        engine: Any = resolve_engine(request["engine"])
    except Exception as exc:  # noqa: BLE001 - an engine that cannot load answers every case with why
        engine = None
        why = f"the engine could not be loaded: {type(exc).__name__}: {exc}"
    with open(request["out"], "a", encoding="utf-8") as out:
        for case in request["cases"]:
            if engine is None:
                plan: dict[str, Any] = {"error": why}
            else:
                table = {n: spec_from_json(s) for n, s in case["table"].items()}
                plan = plan_with(engine, table, case["memory"], case["hybrid"], case["block_outermost"])
            out.write(json.dumps({"key": case["key"], "plan": plan}) + "\n")
            out.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
