"""The verdicts: how bad a status is, what an expectation's pinned witness says, and the
derived clauses. One module for ``check`` (:mod:`~kvcontract.conformance.run.session`
and :mod:`~kvcontract.conformance.run.execution`), the symbolic search
(:mod:`~kvcontract.conformance.run.symbolic`) and the pytest plugin.

**Status ranking.** :data:`STATUS_RANK` (defined beside ``Status`` in
:mod:`kvcontract.conformance.reports.check`, re-exported here) and :func:`worst`.

**Expectations.** An expectation names one finding (clause x mode x signature) and pins a
witness. The witness is replayed (:class:`Replay`) and judged by
:func:`expectation_verdict`: ``xfail`` when it still fails with that signature, ``xpass``
(a failure of the run: fixed, or failing differently) otherwise. A finding is ``xfail``
when its signature is that of an expectation whose witness still fails
(:func:`finding_status`), ``fail`` otherwise: a known failure never hides a new one.
``check`` and the pytest plugin report every expectation (an ``xfail`` record per pinned
witness that still fails); the symbolic search reports what it *found*: its findings
(``xfail``/``fail``) and the expectations whose pinned witness no longer fails
(``xpass``), judged by the same replay in the same interpreter before the search starts.
An ``xfail`` expectation the search did not reach is not reported (a bounded search not
finding it says nothing about it).

**Derived clauses** (:data:`~kvcontract.conformance.contract.laws.DERIVED`; today
ERROR-OPTIMIZE-1, "the same behaviour under ``python -O``"): :func:`derive_optimize_only`.
Each finding of a source clause under ``-O`` is replayed in the normal interpreter; one
that does not reproduce there is a finding of the derived clause, signature
``optimized-only:SOURCE:SIGNATURE`` (:func:`derived_signature`). An expectation of the
derived clause is judged like any other, by its pinned witness: replayed under ``-O``
(it must still fail with the source's signature) and in the normal interpreter (it must
not), :func:`optimize_only_replay`. Both replays need a worker of each interpreter (or
this interpreter for one of them): ``check`` and the symbolic search have both;
``python -O -m pytest`` replays under ``-O`` in its own process and in the normal
interpreter in a supervised worker; a plain ``pytest`` run has no ``-O`` findings to
derive from and skips the derived clause, saying so.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from kvcontract.conformance.contract.laws import DERIVED
from kvcontract.conformance.contract.model import Violation
from kvcontract.conformance.reports.check import STATUS_RANK, Record, Status
from kvcontract.conformance.reports.expectations import Expectation, Expectations
from kvcontract.conformance.run.worker import TaskResult
from kvcontract.spec import clause as catalogue_clause

__all__ = ["STATUS_RANK", "Replay", "Replayer", "Verdict", "derive_optimize_only", "derived_signature",
           "expectation_verdict", "failure_record", "finding_status", "optimize_only_replay", "source_of",
           "worst"]

Replayer = Callable[[Sequence[tuple[str, Mapping[str, Any]]]], list[TaskResult]]
"""Replays (clause, witness) pairs in one interpreter; one result each, as a replay task's:
``done`` with ``violation``, ``signatures`` and ``message``, or why it could not run."""


def worst(statuses: Iterable[Status]) -> Status:
    """The worst of ``statuses`` by :data:`STATUS_RANK` (``pass`` for none)."""
    return max(statuses, key=STATUS_RANK.__getitem__, default="pass")


# -- one witness replayed, and what it says about an expectation ------------------------------------


@dataclasses.dataclass(frozen=True)
class Replay:
    """What one pinned witness did when judged again."""

    signatures: tuple[str, ...] = ()
    """The signatures it fails with (none: it held)."""
    message: str = ""
    """The violation's message when it failed."""
    problem: str = ""
    """Why it could not be judged (an unreadable witness, a worker that died)."""
    held: str = "passes"
    """What it did when it did not fail with the signature wanted, in words."""
    violation: Violation | None = dataclasses.field(default=None, compare=False, repr=False)
    """The violation itself, for an in-process replay (its snippet)."""

    @classmethod
    def of(cls, outcome: Violation | str | None) -> Replay:
        """An in-process replay: a violation, the reason it could not run, or None (it held)."""
        if isinstance(outcome, Violation):
            return cls(signatures=tuple(outcome.signatures), message=outcome.message, violation=outcome)
        if isinstance(outcome, str):
            return cls(problem=outcome)
        return cls()

    @classmethod
    def of_task(cls, result: TaskResult) -> Replay:
        """A replay in a worker (:func:`kvcontract.conformance.run.tasks.replay_task`'s result)."""
        if not result.ok:
            return cls(problem=result.error or result.status)
        value = result.value
        if not value.get("violation"):
            return cls()
        return cls(signatures=tuple(value.get("signatures", ())), message=str(value.get("message", "")))

    def fails_with(self, signature: str) -> bool:
        return signature in self.signatures

    def now(self) -> str:
        """What the witness does now, for an xpass message."""
        if self.problem:
            return f"cannot be judged ({self.problem})"
        if self.signatures:
            return f"fails differently now ({', '.join(self.signatures)})"
        return self.held


@dataclasses.dataclass(frozen=True)
class Verdict:
    """One expectation judged by its pinned witness."""

    entry: Expectation
    status: Literal["xfail", "xpass"]
    message: str
    replay: Replay


def expectation_verdict(entry: Expectation, replay: Replay) -> Verdict:
    """``xfail`` when the pinned witness still fails with the expected signature, else ``xpass``."""
    if replay.fails_with(entry.signature):
        return Verdict(entry, "xfail", f"{entry.reason} [witness: {replay.message}]", replay)
    return Verdict(entry, "xpass", f"expected to fail ({entry.reason}) but the pinned witness {replay.now()}",
                   replay)


def finding_status(signature: str, judged: Mapping[str, Verdict]) -> Literal["xfail", "fail"]:
    """A finding with ``signature``: known (``xfail``) when an expectation of it still fails
    on its pinned witness, new (``fail``) otherwise."""
    verdict = judged.get(signature)
    return "xfail" if verdict is not None and verdict.status == "xfail" else "fail"


# -- derived clauses: ERROR-OPTIMIZE-1 --------------------------------------------------------------

DERIVED_PREFIX = "optimized-only"


def derived_signature(source: str, signature: str) -> str:
    """``optimized-only:SOURCE:SIGNATURE``: a finding of ``source`` under -O only."""
    return f"{DERIVED_PREFIX}:{source}:{signature}"


def source_of(signature: str) -> tuple[str, str] | None:
    """The (source clause, source signature) of a derived signature, or None."""
    prefix, _, rest = signature.partition(":")
    source, _, inner = rest.partition(":")
    return (source, inner) if prefix == DERIVED_PREFIX and source and inner else None


def optimize_only_replay(signature: str, optimized: Replay, normal: Replay) -> Replay:
    """A derived expectation's pinned witness, replayed in both interpreters, as one replay:
    it fails with ``signature`` when its source signature fails under -O and not in the
    normal interpreter."""
    source = source_of(signature)
    if source is None:
        return Replay(problem=f"{signature!r} names no source clause (optimized-only:CLAUSE:SIGNATURE)")
    clause, wanted = source
    if optimized.problem:
        return Replay(problem=f"under python -O: {optimized.problem}")
    if not optimized.fails_with(wanted):
        return Replay(held=f"fails differently under python -O now ({', '.join(optimized.signatures)})"
                      if optimized.signatures else "holds under python -O now")
    if normal.problem:
        return Replay(problem=f"in the normal interpreter: {normal.problem}")
    if normal.fails_with(wanted):
        return Replay(held="fails in the normal interpreter too now")
    return Replay(signatures=(signature,), message=_optimize_only_message(clause, optimized.message))


def _optimize_only_message(source: str, message: str) -> str:
    return f"{source} holds in the normal interpreter but fails under python -O on its witness: {message}"


def derive_optimize_only(records: Sequence[Record], *, normal: Replayer | None, optimized: Replayer | None,
                         expectations: Expectations | None, complete: bool,
                         sources_run: Collection[str] | None = None) -> list[Record]:
    """The derived clauses' records from the source clauses' ``records`` (both modes).

    ``normal`` replays in the normal interpreter (None: no normal pass, nothing to compare
    with), ``optimized`` under -O (the derived expectations' pinned witnesses). ``complete``
    (``check``, the pytest plugin): the run is the whole suite, so the derived clause gets a
    record in each mode (``skip`` in the normal one, ``pass`` when nothing differs) and each
    expectation whose pinned witness still fails gets its ``xfail`` record; otherwise (the
    symbolic search) only findings and ``xpass`` records. ``sources_run``: the source clauses
    that ran under -O (default: those with an -O record).
    """
    out: list[Record] = []
    for clause_id, sources in DERIVED.items():
        c = catalogue_clause(clause_id)
        base: dict[str, Any] = {"clause": clause_id, "title": c.title, "level": c.level}
        if complete and any(r.mode == "normal" and r.clause in sources for r in records):
            out.append(Record(**base, mode="normal", status="skip", message="judged in the optimized interpreter"))
        ran = [s for s in sources if (s in sources_run if sources_run is not None else
                                      any(r.mode == "optimized" and r.clause == s for r in records))]
        if not ran:
            continue
        if normal is None:
            if complete:
                out.append(Record(**base, mode="optimized", status="skip",
                                  message="needs the normal pass to compare with"))
            continue
        entries = [e for e in (expectations.for_clause(clause_id, "optimized") if expectations else [])
                   if (source_of(e.signature) or ("",))[0] in ran]
        evidence: dict[str, Record] = {}
        for r in records:
            if r.mode == "optimized" and r.clause in ran and r.status in ("fail", "xfail") and r.witness:
                evidence.setdefault(derived_signature(r.clause, r.signature), r)
        pinned = [((source_of(e.signature) or ("",))[0], e.witness) for e in entries]
        items = [(r.clause, r.witness or {}) for r in evidence.values()] + pinned
        with ThreadPoolExecutor(1) as beside:  # each interpreter replays at once, in its own worker
            later = beside.submit(optimized, pinned) if pinned and optimized else None
            replayed = normal(items) if items else []
            pinned_optimized = [Replay.of_task(t) for t in later.result()] if later is not None else \
                [Replay(problem="no -O interpreter to replay it in")] * len(pinned)
        on_evidence, pinned_normal = replayed[:len(evidence)], replayed[len(evidence):]
        judged = {e.signature: expectation_verdict(e, optimize_only_replay(e.signature, o, Replay.of_task(n)))
                  for e, o, n in zip(entries, pinned_optimized, pinned_normal, strict=True)}
        found: list[Record] = []
        reported: set[str] = set()
        for (sig, r), result in zip(evidence.items(), on_evidence, strict=True):
            if not result.ok:
                found.append(failure_record(clause_id, "optimized", result))
                continue
            if Replay.of_task(result).fails_with(r.signature):
                continue
            message = _optimize_only_message(r.clause, r.message)
            status = finding_status(sig, judged)
            if status == "xfail":
                reported.add(sig)
                message = f"{judged[sig].entry.reason} [{message}]"
            found.append(Record(**base, mode="optimized", status=status, signature=sig, examples=1,
                                phase=r.phase if not complete else "witness", seconds=r.seconds,
                                message=message, snippet=r.snippet, witness=r.witness, models=r.models,
                                input=r.input))
        for sig, v in judged.items():
            if v.status == "xpass" or (complete and sig not in reported):
                found.append(Record(**base, mode="optimized", status=v.status, signature=sig, examples=1,
                                    phase="witness", message=v.message, witness=v.entry.witness,
                                    snippet=_snippet_of(records, sig, v.entry.witness) if v.status == "xfail"
                                    else ""))
        if not found and complete:
            found.append(Record(**base, mode="optimized", status="pass",
                                message=f"every -O finding of {', '.join(ran)} fails in the normal interpreter too"))
        out += found
    return out


def _snippet_of(records: Sequence[Record], signature: str, witness: Mapping[str, Any]) -> str:
    """The repro of the -O source record with this witness and source signature, if any."""
    source = source_of(signature)
    for r in records:
        if source and r.mode == "optimized" and (r.clause, r.signature) == source and r.witness == witness:
            return r.snippet
    return ""


# -- a clause whose worker failed ---------------------------------------------------------------------


def failure_record(clause: str, mode: str, result: TaskResult) -> Record:
    """An ``error`` record for a clause whose worker hung, crashed or raised."""
    c = catalogue_clause(clause)
    example = (result.last_event or {}).get("example")
    phase = (result.last_event or {}).get("phase", "")
    if result.status == "raised":
        message = f"the kit failed running this clause: {result.error}"
    else:
        during = ""
        if example is not None:
            shown = json.dumps(example, separators=(",", ":"))
            during = f" while running a {phase} example: {shown if len(shown) <= 600 else shown[:600] + '...'}"
        message = f"{result.error}{during}"
    return Record(clause=clause, title=c.title, level=c.level, mode=mode, status="error",  # type: ignore[arg-type]
                  signature=f"worker-{result.status}", message=message, where=result.where,
                  witness=example, phase=phase, seconds=round(result.seconds, 3))
