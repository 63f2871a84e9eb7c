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
BUILDER_VERSION = 2
"""Bumped whenever what the builder records changes (a cached or shipped corpus of another
version is rebuilt)."""


class CorpusBuildError(RuntimeError):
    """The corpus could not be built at all (the release cannot be loaded in a worker)."""


@dataclass(frozen=True)
class Item:
    name: str
    architecture: str
    cache_dtype: str = "auto"
    draft: str | None = None
    """A :class:`.drafts.Pair`'s name: the target served with that draft."""
    tensor_parallel_size: int = 1

    def args(self) -> dict[str, Any]:
        return {"architecture": self.architecture, "cache_dtype": self.cache_dtype,
                "draft": self.draft, "tensor_parallel_size": self.tensor_parallel_size}


NOT_OFFERED = "No valid attention backend found"
"""The start of the platform's refusal (``get_attn_backend_cls``) when no backend of the release
takes the model's attention with that cache dtype: the release does not offer the combination."""


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
    """Each item's outcome (``{"table": ...}`` or ``{"skipped": reason}``), ``jobs`` workers at once.
    A draft pair is built in a worker of its own: loading a draft registers configs and
    model classes process-wide, which must not reach the items after it."""
    from kvcontract.conformance.engines.vllm.corpus.tasks import BUILD_TASK

    todo: queue.Queue[Item] = queue.Queue()
    for item in items:
        todo.put(item)
    out: dict[str, dict[str, Any]] = {}
    lock = threading.Lock()
    count = [done_before]

    def run(worker: Any, item: Item) -> Any:
        if item.draft is None:
            return worker.run(BUILD_TASK, item.args(), timeout=timeout)
        with _worker(env) as alone:
            return alone.run(BUILD_TASK, item.args(), timeout=timeout)

    def work() -> None:
        with _worker(env) as worker:
            while True:
                try:
                    item = todo.get_nowait()
                except queue.Empty:
                    return
                result = run(worker, item)
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


def _variants(first: Sequence[Item], outcomes: Mapping[str, Mapping[str, Any]], dtypes: Sequence[str],
              variants: bool, architectures: Sequence[str] | None) -> list[Item]:
    """What is built after every architecture at ``auto``: each ``fp8`` cache dtype and each
    TP size the layer rule depends on (:mod:`.parallel`) for an architecture built with
    attention layers, and the speculative-decoding pairs (:mod:`.drafts`)."""
    if not variants:
        return []
    from kvcontract.conformance.engines.vllm.corpus.drafts import PAIRS
    from kvcontract.conformance.engines.vllm.corpus.parallel import SIZES, depends_on_tp

    out: list[Item] = []
    for item in first:
        built = outcomes[item.name].get("table")
        if not built or not built["layers"]:
            continue
        out.extend(Item(f"{item.name}+kv-{d}", item.architecture, d) for d in dtypes)
        if depends_on_tp(built["layers"]):
            out.extend(Item(f"{item.name}+tp{n}", item.architecture, tensor_parallel_size=n)
                       for n in SIZES)
    out.extend(Item(p.name, p.target, draft=p.name) for p in PAIRS
               if architectures is None or p.target in architectures)
    return out


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
    skipped = [Skipped(a, a, "a speculative-decoding draft: built beside its target, not alone "
                             "(the corpus's <Target>+<method> tables)")
               for a in sorted(drafts) if architectures is None or a in architectures]
    first = [Item(a, a) for a in archs]
    dtypes = list(plan["cache_dtypes"]) if variants else []
    outcomes = _run_items(first, jobs, env, timeout, progress, 0, len(first))
    second = _variants(first, outcomes, dtypes, variants, architectures)
    outcomes.update(_run_items(second, jobs, env, timeout, progress, len(first), len(first) + len(second)))
    tables: list[CorpusTable] = []
    not_offered: dict[str, dict[str, Any]] = {}
    for item in first + second:
        outcome = outcomes[item.name]
        if "table" in outcome:
            tables.append(_table(item, outcome["table"]))
        elif item.cache_dtype != "auto" and str(outcome["skipped"]).startswith(f"ValueError: {NOT_OFFERED}"):
            entry = not_offered.setdefault(item.cache_dtype, {"reason": f"{NOT_OFFERED} (the platform's "
                                           "backend selection refuses the cache dtype)",
                                           "architectures": []})
            entry["architectures"].append(item.architecture)
        else:
            skipped.append(Skipped(item.name, item.architecture, str(outcome["skipped"])))
    from kvcontract.conformance.engines.vllm.corpus import drafts as draft_pairs
    from kvcontract.conformance.engines.vllm.corpus import drive
    from kvcontract.conformance.engines.vllm.corpus.parallel import SIZES

    if variants:
        skipped.extend(Skipped(name, name.split("+", 1)[0], reason)
                       for name, reason in draft_pairs.NOT_BUILT.items())
    meta = {"builder_version": BUILDER_VERSION, "standins": plan["standins"],
            "build_seconds": round(time.monotonic() - started, 1), "jobs": jobs,
            "cache_dtypes": ["auto", *dtypes], "not_offered_by_backend": not_offered,
            "kernel_config": dict(drive.KERNEL_CONFIG), "environment": dict(drive.ENVIRONMENT),
            "tensor_parallel_sizes": [1, *SIZES],
            "drafts": {p.name: p.describe() for p in draft_pairs.PAIRS}}
    return Corpus(engine="vllm", release=str(plan["release"]), tables=tables, skipped=skipped, meta=meta)
