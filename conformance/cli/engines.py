"""``kvcontract engines``: the engines available here, each loaded in a worker, with its
version and bundled expectations. The engines load side by side (each in its own worker: vLLM,
a fork and a plugin each take seconds); one line per engine, printed as soon as it has loaded,
names padded to the longest so that the lines align as they stream (a table would wait for the
slowest engine)."""

from __future__ import annotations

import argparse
import threading
from typing import Any

from kvcontract.conformance.run.session import (
    CLAUSE_TIMEOUT_S,
    EXAMPLE_TIMEOUT_S,
    EngineLoadError,
    Pass,
)


def register(subparsers: Any) -> None:
    engines = subparsers.add_parser("engines", help="list the engines available here, with versions",
                                    description="List the builtin and installed engines, each loaded in a "
                                                "worker, with its version and bundled expectations.")
    engines.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kvcontract.conformance.engines.environments import EnvironmentMissing
    from kvcontract.conformance.engines.protocol import engine_names

    names = engine_names()
    width = max((len(n) for n in names), default=0)
    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            print(line, flush=True)

    def load(name: str) -> None:
        try:
            probe = Pass(name, optimized=False, profile="quick", seed_value=0, xfails=None, clauses=[],
                         progress=None, clause_timeout=CLAUSE_TIMEOUT_S, example_timeout=EXAMPLE_TIMEOUT_S)
        except EnvironmentMissing as exc:  # its declared environment is not installed
            say(f"{name.ljust(width)} unavailable: {exc}")
            return
        try:
            info = probe.info()
        except EngineLoadError as exc:
            say(f"{name.ljust(width)} unavailable: {exc}")
            return
        finally:
            probe.close()
        note = f" (expectations: {info['expectations'].rsplit('/', 1)[-1]})" if info.get("expectations") else ""
        say(f"{name.ljust(width)} {info['version']}{note}")

    threads = [threading.Thread(target=load, args=(name,), name=f"kvcontract-engines-{name}", daemon=True)
               for name in names]  # daemons: an interrupted listing ends at once (its workers die with it)
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return 0


__all__ = ["register", "run"]
