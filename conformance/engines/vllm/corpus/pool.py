"""Build a release's whole corpus in supervised workers, and keep it.

Every architecture the release registers is built at the cache dtype ``auto`` and, where that
succeeds with attention layers, at each ``fp8`` cache dtype the release names; each in a
supervised worker (:class:`~kvcontract.conformance.run.worker.Worker`: a hang or crash costs
that architecture only, with the reason recorded), ``jobs`` workers side by side. Draft-only
architectures (the release's speculative-decoding table) are not models of their own: they
are built beside their targets (:mod:`.drafts`) or listed with the reason.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kvcontract.conformance.contract.corpus import Corpus, CorpusTable, Settings, Skipped

Progress = Callable[[int, int, str, str], None]
"""``(done, total, table name, outcome)`` after each item (outcome: ``built`` or the reason)."""

ITEM_TIMEOUT_S = 180.0
BUILDER_VERSION = 1
"""Bumped whenever what the builder records changes (a cached or shipped corpus of another
version is rebuilt)."""


class CorpusBuildError(RuntimeError):
    """The corpus could not be built at all (the release cannot be loaded in a worker)."""


@dataclass(frozen=True)
class Item:
    name: str
    architecture: str
    cache_dtype: str = "auto"


def _worker(env: Mapping[str, str] | None) -> Any:
    from kvcontract.conformance.run.worker import Worker

    return Worker(env=env)


def _plan(env: Mapping[str, str] | None) -> dict[str, Any]:
    from kvcontract.conformance.engines.vllm.corpus.tasks import PLAN_TASK

    with _worker(env) as worker:
        result = worker.run(PLAN_TASK, {}, timeout=ITEM_TIMEOUT_S)
        if not result.ok:
            tail = " | ".join(line for line in worker.log_tail(4) if line.strip())
            raise CorpusBuildError(f"the release's model registry could not be read in a worker: "
                                   f"{result.error}{' (' + result.where + ')' if result.where else ''}"
                                   f"{' (log: ' + tail + ')' if tail else ''}")
        value: dict[str, Any] = result.value
        return value


def _run_items(items: Sequence[Item], jobs: int, env: Mapping[str, str] | None, timeout: float,
               progress: Progress | None, done_before: int, total: int) -> dict[str, dict[str, Any]]:
    """Each item's outcome (``{"table": ...}`` or ``{"skipped": reason}``), ``jobs`` workers at once."""
    from kvcontract.conformance.engines.vllm.corpus.tasks import BUILD_TASK

    todo: queue.Queue[Item] = queue.Queue()
    for item in items:
        todo.put(item)
    out: dict[str, dict[str, Any]] = {}
    lock = threading.Lock()
    count = [done_before]

    def work() -> None:
        with _worker(env) as worker:
            while True:
                try:
                    item = todo.get_nowait()
                except queue.Empty:
                    return
                result = worker.run(BUILD_TASK, {"architecture": item.architecture,
                                                 "cache_dtype": item.cache_dtype}, timeout=timeout)
                if result.ok:
                    outcome = dict(result.value)
                elif result.status == "raised":
                    outcome = {"skipped": f"the kit's build task raised {result.error} ({result.where})"}
                else:
                    outcome = {"skipped": f"{result.status}: {result.error}"}
                with lock:
                    out[item.name] = outcome
                    count[0] += 1
                    if progress is not None:
                        progress(count[0], total, item.name, "built" if "table" in outcome
                                 else str(outcome["skipped"]))

    threads = [threading.Thread(target=work, daemon=True) for _ in range(max(1, jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return out


def _table(item: Item, built: Mapping[str, Any]) -> CorpusTable:
    from kvcontract.conformance.contract.codec import spec_from_json

    settings = dict(built["settings"])
    return CorpusTable(
        name=item.name, architecture=item.architecture,
        layers=tuple((str(n), spec_from_json(s)) for n, s in built["layers"]),
        settings=Settings(**settings),
        source={"model_class": built["model_class"], "config": built["config"],
                "spec_loop": "vllm/v1/worker/gpu/attn_utils.py get_kv_cache_spec",
                "seconds": built.get("seconds")},
        engine_only=built.get("engine_only", {}))


def build_corpus(*, jobs: int = 2, env: Mapping[str, str] | None = None, timeout: float = ITEM_TIMEOUT_S,
                 progress: Progress | None = None, architectures: Sequence[str] | None = None,
                 variants: bool = True) -> Corpus:
    """Every architecture of the release in ``env``'s interpreter (``architectures``: only those)."""
    started = time.monotonic()
    plan = _plan(env)
    drafts = set(plan["drafts"])
    archs = [a for a in plan["architectures"] if a not in drafts]
    if architectures is not None:
        unknown = sorted(set(architectures) - set(plan["architectures"]))
        if unknown:
            raise CorpusBuildError(f"vllm {plan['release']} registers no architecture {', '.join(unknown)}")
        archs = [a for a in archs if a in set(architectures)]
    skipped = [Skipped(a, a, "a speculative-decoding draft: built beside its target, not alone")
               for a in sorted(drafts) if architectures is None or a in architectures]
    first = [Item(a, a) for a in archs]
    dtypes = list(plan["cache_dtypes"]) if variants else []
    outcomes = _run_items(first, jobs, env, timeout, progress, 0, len(first) * (1 + len(dtypes)))
    second = [Item(f"{a}+kv-{d}", a, d) for a in archs for d in dtypes
              if "table" in outcomes[a] and outcomes[a]["table"]["layers"]]
    outcomes.update(_run_items(second, jobs, env, timeout, progress, len(first), len(first) + len(second)))
    tables: list[CorpusTable] = []
    for item in first + second:
        outcome = outcomes[item.name]
        if "table" in outcome:
            tables.append(_table(item, outcome["table"]))
        else:
            skipped.append(Skipped(item.name, item.architecture, str(outcome["skipped"])))
    meta = {"builder_version": BUILDER_VERSION, "standins": plan["standins"],
            "build_seconds": round(time.monotonic() - started, 1), "jobs": jobs,
            "cache_dtypes": ["auto", *dtypes]}
    return Corpus(engine="vllm", release=str(plan["release"]), tables=tables, skipped=skipped, meta=meta)
