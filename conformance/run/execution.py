"""One law in this interpreter: the systematic phase, the random phase, the findings.

:func:`run_law` runs every enumerated example of a law's systematic phase, then its
random phase (hypothesis), which keeps searching after each finding and shrinks every
new signature to its own witness: every distinct signature is one finding. The
expectations' pinned witnesses are replayed on top (:func:`replay`) and judged by
:mod:`kvcontract.conformance.run.verdicts`, so a known failure (xfail) never hides a new
one (fail) and a fixed one shows as an xpass. It runs wherever a law runs: in a
supervised worker (:mod:`kvcontract.conformance.run.tasks`) and in the pytest plugin.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings

from kvcontract.conformance.contract.inputs import (
    best,
    classify,
    count_examples,
    message_examples,
    position_examples,
    variation_examples,
)
from kvcontract.conformance.contract.laws import law
from kvcontract.conformance.contract.model import Example, KitFailure, Law, Violation, domain_of
from kvcontract.conformance.contract.models import model_examples
from kvcontract.conformance.contract.strategies import domain_mode
from kvcontract.conformance.contract.systematic import all_pairs
from kvcontract.conformance.engines.protocol import Engine
from kvcontract.conformance.reports.check import ClauseRun, Mode, Record
from kvcontract.conformance.reports.expectations import Expectations
from kvcontract.conformance.run import share, verdicts
from kvcontract.conformance.run.draws import neutralize_local_constants
from kvcontract.conformance.run.facts import (
    ExampleFacts,
    example_facts,
    judged_example,
    remember_facts,
)
from kvcontract.conformance.run.worker import Emit, begin, last_frame

PROFILES: dict[str, int] = {"quick": 0, "default": 100, "thorough": 1000}
"""Profile -> random examples per law after the systematic phase (quick: none;
a law without a systematic enumerator then draws 25)."""
QUICK_FALLBACK_EXAMPLES = 25
CLAIM_ALL_PROFILES = ("quick",)
"""Profiles whose shared examples the preparing (-O) worker claims all at once, leaving the
normal worker, which traces every finding after its pass, none to work out (quick: enumerated,
1.5 s in all). In the others, whose draws take seconds (default: 5 s), it works from the last
shape back while the normal worker works out the first ones it needs: the passes end together."""

neutralize_local_constants()  # a seed draws the same examples in every process (see run.draws)


def mode_name() -> Mode:
    return "optimized" if sys.flags.optimize else "normal"


class _Findings:
    """Distinct findings of one law run, keyed by signature, and its errors.

    ``known`` are the signatures already known for the clause and mode (the expectations',
    the baseline's). A new finding's witness is the first example that shows it, unless a
    later one shows it with fewer known findings beside it: the repro of a new finding
    should not also fail on a known defect, or it fails on the unchanged tree too."""

    def __init__(self, known: frozenset[str] = frozenset(), pinned: frozenset[str] = frozenset()) -> None:
        self.known = known
        self.pinned = pinned
        """The JSON texts of the clause's pinned witnesses: an example judged here whose text is
        one of them answers that witness's replay (:func:`judge_expectations`)."""
        self.outcomes: dict[str, tuple[dict[str, Any], Violation | None]] = {}
        self.found: dict[str, tuple[Example, Violation, str]] = {}
        self.taint: dict[str, int] = {}
        """Per signature, how many known findings its witness also shows."""
        self.errors: dict[str, tuple[Example, BaseException]] = {}
        self.examples = 0
        self.not_driven = 0
        """Examples the kit could not take to the engine (its own code failed first)."""
        self.pairs: set[tuple[str, str]] = set()
        self.models: dict[str, set[str]] = {}
        """Per signature, the corpus tables that show it."""
        self.inputs: dict[str, str] = {}
        """Per signature, the best input class that shows it (:mod:`~kvcontract.conformance.contract.inputs`)."""

    def judge(self, engine: Engine, law_: Law, ex: Example, phase: str, emit: Emit | None,
              facts: ExampleFacts | None = None) -> Violation | None:
        """Judge ``ex``; ``facts``: what :func:`example_facts` knows of it (an enumerated
        example, which several clauses share), else computed here."""
        self.examples += 1
        facts = facts or ExampleFacts.of(ex, encode=emit is not None)
        self.pairs |= facts.pairs
        pristine = facts.pristine  # an engine that writes into its inputs must not rewrite the witness
        begin(emit, {"clause": law_.clause, "phase": phase}, pristine, facts.text)
        try:
            law_.check(engine, ex)
        except Violation as violation:
            if facts.text in self.pinned:
                self.outcomes[facts.text] = (pristine, violation)
            if ex.model:
                for sig in violation.signatures:
                    self.models.setdefault(sig, set()).add(ex.model)
            if any(self.inputs.get(sig, "synthetic") != "corpus" for sig in violation.signatures):
                found_in = "corpus" if ex.model else "variation" if phase == "variation" else classify(ex)
                for sig in violation.signatures:
                    self.inputs[sig] = best(self.inputs.get(sig, ""), found_in)
            also_known = sum(sig in self.known for sig in violation.signatures)
            new = [sig for sig in violation.signatures if sig not in self.found
                   or (sig not in self.known and self.taint[sig] > also_known)]
            if new:  # the example is rebuilt only for a new (or cleaner) witness: most repeat one
                violation.example = law_.example_type.from_json(pristine)
                for sig in new:
                    self.found[sig] = (violation.example, violation, phase)
                    self.taint[sig] = also_known - (sig in self.known)
            return violation
        except Exception as exc:  # noqa: BLE001 - the kit could not judge: an error, not a finding
            self.not_driven += 1
            key = f"{type(exc).__name__}: {exc}" if isinstance(exc, KitFailure) else \
                f"{type(exc).__name__} at {last_frame(exc)}"
            self.errors.setdefault(key, (ex, exc))
            return None
        if facts.text in self.pinned:
            self.outcomes[facts.text] = (pristine, None)
        return None


_SYSTEMATIC: dict[tuple[Any, Any], tuple[Example, ...]] = {}
"""Systematic examples by (shape enumerator, domain): several clauses share a shape (the
near misses feed four), and enumerating one took as long as judging it."""


def systematic_examples(law_: Law, domain: Any) -> tuple[Example, ...]:
    """``law_``'s systematic examples over ``domain``, enumerated once per worker (examples
    are immutable; what the engine gets is converted from them afresh for each call)."""
    if law_.systematic is None:
        return ()
    key = (law_.systematic, domain)
    cached = _SYSTEMATIC.get(key)
    if cached is None:
        cached = tuple(law_.systematic(domain))
        if len(_SYSTEMATIC) >= 32:
            _SYSTEMATIC.clear()
        _SYSTEMATIC[key] = cached
    return cached


def _examples_budget(law_: Law, profile: str) -> int:
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose from {', '.join(PROFILES)}")
    if law_.systematic is None and profile == "quick":
        return QUICK_FALLBACK_EXAMPLES
    return PROFILES[profile]


def _hypothesis_settings(examples: int, shrink: bool) -> settings:
    phases = (Phase.explicit, Phase.generate, Phase.shrink) if shrink else (Phase.explicit, Phase.generate)
    return settings(max_examples=examples, deadline=None, database=None, derandomize=False,
                    suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet,
                    report_multiple_bugs=False, print_blob=False, phases=phases)


class _Stop(Exception):
    pass


_DRAWN: dict[tuple[Any, ...], tuple[Example, ...]] = {}
"""Random examples by (shape strategy, domain, count, seed): the clauses of a shape judge the
same draws (hypothesis draws a seed's sequence whatever the test body does, as long as it
never fails), and drawing was most of the random phase (ERROR-KIND-1: 0.72 s to draw 100,
0.03 s to judge them)."""


def drawn_examples(law_: Law, domain: Any, examples: int, seed_value: int) -> tuple[Example, ...]:
    """The ``examples`` random examples hypothesis draws for ``law_``'s shape at ``seed_value``,
    drawn once per worker: the sequence :func:`_shrink` replays up to a wanted finding."""
    key = (law_.strategy, domain, examples, seed_value)
    cached = _DRAWN.get(key)
    if cached is None:
        drawn: list[Example] = []

        @_hypothesis_settings(examples, shrink=False)
        @seed(seed_value)
        @given(law_.strategy(domain))
        def collect(ex: Example) -> None:
            drawn.append(ex)

        collect()
        if len(_DRAWN) >= 32:
            _DRAWN.clear()
        cached = _DRAWN[key] = tuple(drawn)
    return cached


def prepare_shared(engine: Engine, laws: Sequence[Law], profile: str, seed_value: int,
                   emit: Emit | None = None) -> list[str]:
    """This worker's part of the examples a check's workers share (:func:`share.prepare`): each
    unclaimed shape's enumerated and drawn examples, in clause order. Returns the shapes written."""
    domain = domain_of(engine)
    wanted = [law_ for law_ in laws if not law_.requires(engine)]
    budgets = {law_.clause: _examples_budget(law_, profile) for law_ in wanted}

    claim_all = profile in CLAIM_ALL_PROFILES
    return share.prepare(wanted if claim_all else wanted[::-1],
                         lambda law_: _worked_out(law_, domain, budgets[law_.clause], seed_value),
                         domain_mode=share.domain_key(domain_mode(), domain), budgets=budgets,
                         seed_value=seed_value, emit=emit,
                         claim_all=claim_all)


def _worked_out(law_: Law, domain: Any, budget: int, seed_value: int) -> share.Prepared:
    """``law_``'s shape as a worker shares it: its enumerated and drawn examples, their facts
    (the taking worker then works out none of them: 0.34 s of a quick normal pass), and the
    reference's answers its laws read (:attr:`~kvcontract.conformance.contract.model.Shape.answers`:
    PLAN's, 0.4 s more)."""
    systematic = systematic_examples(law_, domain)
    drawn = drawn_examples(law_, domain, budget, seed_value) if budget else ()
    examples = (*systematic, *drawn)
    answers = law_.shape.answers(examples) if law_.shape.answers is not None else None
    return systematic, drawn, tuple(example_facts(ex) for ex in examples), answers


def _take_shared(law_: Law, domain: Any, budget: int, seed_value: int) -> None:
    """This worker's caches given ``law_``'s shape's shared examples, where a worker prepared
    them and this one has not worked them out already; a shape no worker has claimed is claimed
    and written here (the normal worker claims as it goes, :meth:`Pass._prepare`)."""
    sys_key, draw_key = (law_.systematic, domain), (law_.strategy, domain, budget, seed_value)
    if (law_.systematic is None or sys_key in _SYSTEMATIC) and (not budget or draw_key in _DRAWN):
        return
    key = share.domain_key(domain_mode(), domain)
    got = share.shared(law_, domain_mode=key, budget=budget, seed_value=seed_value)
    if got is None:  # unclaimed yet (the -O worker has not come to it): claimed here, on demand
        share.prepare([law_], lambda _: _worked_out(law_, domain, budget, seed_value),
                      domain_mode=key, budgets={law_.clause: budget}, seed_value=seed_value)
        return
    if law_.systematic is not None:
        _SYSTEMATIC[sys_key] = got[0]
    if budget:
        _DRAWN[draw_key] = got[1]
    if len(got) > 2:
        remember_facts((*got[0], *got[1]), got[2])
    if len(got) > 3 and got[3] is not None:
        adopt, answers = got[3]
        adopt(answers)


def _random_phase(engine: Engine, law_: Law, examples: int, seed_value: int, findings: _Findings,
                  emit: Emit | None) -> list[str]:
    """Search without stopping at a finding; returns the signatures it found first."""
    before = set(findings.found)
    held = as_engine_holds(engine)
    for ex in drawn_examples(law_, domain_of(engine), examples, seed_value):
        as_held = held(ex)
        if as_held is not None:
            findings.judge(engine, law_, as_held, "random", emit, example_facts(as_held))
    return [s for s in findings.found if s not in before]


def _shrink(engine: Engine, law_: Law, examples: int, seed_value: int, wanted: str,
            emit: Emit | None, avoid: frozenset[str] = frozenset()) -> tuple[Example, Violation] | None:
    """The same search again, failing only on ``wanted`` (and not on any of ``avoid``):
    hypothesis draws the same examples up to the first such one, then shrinks it."""
    strategy = law_.strategy(domain_of(engine))
    last: dict[str, Any] = {}

    @_hypothesis_settings(examples, shrink=True)
    @seed(seed_value)
    @given(strategy)
    def probe(ex: Example) -> None:
        if emit is not None:
            begin(emit, {"clause": law_.clause, "phase": "shrink"}, ex.to_json())
        pristine = copy.deepcopy(ex)
        try:
            law_.check(engine, ex)
        except Violation as violation:
            if wanted in violation.signatures and not avoid & set(violation.signatures):
                last["found"] = (pristine, violation)
                raise _Stop() from None
        except Exception:  # noqa: BLE001, S110 - errors were recorded by the search
            pass

    try:
        probe()
    except _Stop:
        pass
    found: tuple[Example, Violation] | None = last.get("found")
    return found


def replay(engine: Engine, law_: Law, witness: Mapping[str, Any]) -> Violation | None:
    """A pinned witness of ``law_`` judged again: its violation (``example`` set), or None. A
    witness this worker judged in its pass is that example object (judged as the pass judged it,
    its answers remembered), any other is decoded."""
    judged = judged_example(witness)
    example = judged if isinstance(judged, law_.example_type) else law_.example_type.from_json(witness)
    try:
        law_.check(engine, example if example is judged else copy.deepcopy(example))
    except Violation as violation:
        violation.example = example
        return violation
    return None


def replay_safely(engine: Engine, law_: Law, witness: Mapping[str, Any]) -> Violation | str | None:
    """:func:`replay`; a witness that cannot be read or judged gives the reason instead."""
    try:
        return replay(engine, law_, witness)
    except Exception as exc:  # noqa: BLE001 - an unreadable witness is the file's problem, reported
        return f"{type(exc).__name__}: {exc}"


def replay_json(violation: Violation | None) -> dict[str, Any]:
    """A replay's outcome as a worker's replay task returns it: ``violation``, ``signatures``, ``message``."""
    return {"violation": violation is not None, "signatures": violation.signatures if violation else [],
            "message": violation.message if violation else ""}


def replay_result(engine: Engine, law_: Law, witness: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`replay` as :func:`replay_json`, or ``raised`` and ``where`` when the replay raised."""
    try:
        return replay_json(replay(engine, law_, witness))
    except Exception as exc:  # noqa: BLE001 - that witness's result, as a worker reports it
        return {"raised": f"{type(exc).__name__}: {exc}", "where": last_frame(exc)}


_HOLDS: dict[int, tuple[Engine, Any]] = {}


def as_engine_holds(engine: Engine) -> Any:
    """``example -> example or None``: a corpus example as ``engine`` can hold it. The corpus is one
    release's (a fork or a plugin is fed the pinned vLLM's): a field the engine's classes lack is
    set to its default, as the engine would leave it; an example with a kind the engine lacks, or
    whose one changed field is one it lacks (its members would no longer differ), is left out.
    The engine's own release loses nothing (it lacks no field of its corpus). The contract's own
    examples pass through it too: a release cannot hold a layer apart by a field it lacks."""
    held = _HOLDS.get(id(engine))
    if held is not None and held[0] is engine:
        return held[1]
    from kvcontract.reference import SPEC_KINDS

    missing = set(engine.unsupported_kinds())
    lacks = {k: frozenset(engine.unsupported_fields(k)) for k in SPEC_KINDS if k not in missing}
    defaults = {k: {f.name: _default(f) for f in dataclasses.fields(k) if f.name in names and f.init
                    and (f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING)}
                for k, names in lacks.items() if names}

    class _Unheld(Exception):
        pass

    def spec(s: Any) -> Any:
        if type(s) in missing:
            raise _Unheld
        reset = {n: v for n, v in defaults.get(type(s), {}).items() if getattr(s, n) != v}
        if not reset:
            return s
        try:
            return dataclasses.replace(s, **reset)
        except Exception as exc:  # not a spec the engine can hold
            raise _Unheld from exc

    def project(ex: Example) -> Example | None:
        if ex.field and any(ex.field in lacks.get(type(s), ()) for s in ex.specs):
            return None
        try:
            specs = tuple(spec(s) for s in ex.specs)
            table = tuple((n, spec(s)) for n, s in ex.table)
        except _Unheld:
            return None
        if all(a is b for a, b in zip(specs, ex.specs, strict=True)) and \
                all(a[1] is b[1] for a, b in zip(table, ex.table, strict=True)):
            return ex
        return dataclasses.replace(ex, specs=specs, table=table)

    identity = (lambda ex: ex) if not missing and not defaults else project
    _HOLDS.clear()
    _HOLDS[id(engine)] = (engine, identity)
    return identity


def _default(f: dataclasses.Field[Any]) -> Any:
    return f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[operator]


def run_law(engine: Engine, law_: Law, profile: str, seed_value: int,
            expectations: Expectations | None, emit: Emit | None = None,
            known: Sequence[str] = ()) -> tuple[list[Record], ClauseRun]:
    """One clause in this interpreter: every distinct finding, each expectation
    judged by its pinned witness, errors of the kit's own code apart. A new finding's
    witness avoids the known ones (the expectations' and ``known``, a baseline's) where an
    example that does exists."""
    mode = mode_name()
    start = time.perf_counter()
    base: dict[str, Any] = {"clause": law_.clause, "title": law_.title, "level": law_.level, "mode": mode}
    skip = law_.requires(engine)
    domain = domain_of(engine)
    domain_pairs = all_pairs(domain)  # what can vary; an example may also move a field fixed here
    total_pairs = len(domain_pairs)
    if skip:
        return [Record(**base, status="skip", message=skip)], ClauseRun(
            clause=law_.clause, mode=mode, status="skip", total_pairs=total_pairs)
    optimized = bool(sys.flags.optimize)
    expected = expectations.for_clause(law_.clause, mode) if expectations else []
    findings = _Findings(frozenset(known) | {e.signature for e in expected},
                         frozenset(json.dumps(e.witness, default=str) for e in expected))
    systematic, broken = 0, False
    try:
        _take_shared(law_, domain, _examples_budget(law_, profile), seed_value)
        held = as_engine_holds(engine)  # the corpus's values as this engine can hold them
        fed = (((ex for _, ex in model_examples(engine, law_)), "model"),  # real models first: their witness is kept
               (variation_examples(law_), "variation"),  # then one field of one corpus layer changed
               (position_examples(law_), "variation"),  # one layer of a real table changed, at real positions
               (count_examples(law_), "derived"),  # corpus tables' two kinds at the counts grouping tests
               (message_examples(law_), "derived"))  # three members, three values of one field: whole messages
        for examples, phase in fed:
            for ex in examples:
                as_held = held(ex)
                if as_held is not None:
                    findings.judge(engine, law_, as_held, phase, emit, example_facts(as_held))
        if law_.systematic is not None:
            for ex in systematic_examples(law_, domain):
                # a field the engine lacks is no more varied here than in the corpus's examples
                as_held = held(ex)
                if as_held is not None:
                    findings.judge(engine, law_, as_held, "systematic", emit, example_facts(as_held))
        if law_.engine_examples is not None:
            for ex in law_.engine_examples(engine):
                findings.judge(engine, law_, ex, "systematic", emit)
            systematic = findings.examples
    except Exception as exc:  # noqa: BLE001 - a broken enumerator is the kit's error
        broken = True
        findings.errors.setdefault(f"{type(exc).__name__} at {last_frame(exc)}", (Example(), exc))
    judged = judge_expectations(engine, law_, expectations, mode, findings.outcomes)
    try:
        budget = 0 if broken else _examples_budget(law_, profile)
        if budget:
            for new in _random_phase(engine, law_, budget, seed_value, findings, emit):
                if verdicts.finding_status(new, judged) == "xfail":
                    continue  # its pinned witness stands for it: a shrunk one would be thrown away
                shrunk = None
                if findings.taint.get(new) and new not in findings.known:  # first, one without them
                    shrunk = _shrink(engine, law_, budget, seed_value, new, emit, avoid=findings.known)
                shrunk = shrunk or _shrink(engine, law_, budget, seed_value, new, emit)
                if shrunk is not None:
                    findings.found[new] = (shrunk[0], shrunk[1], "random")
    except Exception as exc:  # noqa: BLE001 - a broken strategy is the kit's error
        findings.errors.setdefault(f"{type(exc).__name__} at {last_frame(exc)}", (Example(), exc))
    records: list[Record] = []
    for v in judged.values():
        snippet = ""
        if v.status == "xfail" and isinstance(v.replay.violation, Violation):
            violation = v.replay.violation
            snippet = law_.snippet(engine, violation.example or Example(), violation, optimized)
        records.append(Record(**base, status=v.status, signature=v.entry.signature, examples=1,
                              message=v.message, witness=v.entry.witness, phase="witness", snippet=snippet,
                              models=sorted(findings.models.get(v.entry.signature, ())),
                              input=findings.inputs.get(v.entry.signature, "")))
    for sig, (ex, violation, phase) in sorted(findings.found.items()):
        if verdicts.finding_status(sig, judged) == "xfail":
            continue  # the expectation's own record (its pinned witness) stands for it
        records.append(Record(**base, status="fail", signature=sig, examples=1, phase=phase,
                              message=violation.message, witness=ex.to_json(),
                              snippet=law_.snippet(engine, ex, violation, optimized),
                              models=sorted(findings.models.get(sig, ())), input=findings.inputs.get(sig, "")))
    for key, (bad_example, error) in sorted(findings.errors.items()):
        records.append(Record(**base, status="error", signature=f"kit-error:{type(error).__name__}",
                              message=f"the kit could not judge an example: {key}",
                              where=last_frame(error), witness=bad_example.to_json() or None))
    driven = findings.examples - findings.not_driven
    if not records and driven == 0:
        records.append(Record(**base, status="skip", message="no example reached the engine"))
    elif not records:
        records.append(Record(**base, status="pass", examples=driven))
    seconds = time.perf_counter() - start
    for r in records:
        r.seconds = round(seconds, 3)
    run = ClauseRun(clause=law_.clause, mode=mode, status=verdicts.worst(r.status for r in records),
                    examples=findings.examples, driven=driven, not_driven=findings.not_driven,
                    systematic_examples=systematic, seconds=round(seconds, 3),
                    covered_pairs=len(findings.pairs & domain_pairs), total_pairs=total_pairs,
                    findings=sum(r.status in ("fail", "xfail") for r in records),
                    exercised=sorted(f"{k}.{f}" for k, f in findings.pairs))
    return records, run


def judge_expectations(engine: Engine, law_: Law, expectations: Expectations | None, mode: str,
                       judged: Mapping[str, tuple[dict[str, Any], Violation | None]] | None = None,
                       ) -> dict[str, verdicts.Verdict]:
    """Each expectation of ``law_`` in ``mode``, its pinned witness replayed here and judged
    (:func:`~kvcontract.conformance.run.verdicts.expectation_verdict`), by signature.
    ``judged``: what this pass's examples did, by their JSON text; a witness among them is
    answered by that judgment, not replayed (most witnesses are enumerated examples)."""
    entries = expectations.for_clause(law_.clause, mode) if expectations else []
    out: dict[str, verdicts.Verdict] = {}
    for e in entries:
        held = judged.get(json.dumps(e.witness, default=str)) if judged else None
        if held is None:
            outcome = replay_safely(engine, law_, e.witness)
        else:
            pristine, outcome = held
            if outcome is not None and outcome.example is None:
                outcome.example = law_.example_type.from_json(pristine)
        out[e.signature] = verdicts.expectation_verdict(e, verdicts.Replay.of(outcome))
    return out


def replay_items(engine: Engine, items: Sequence[tuple[str, Mapping[str, Any]]],
                 emit: Emit | None = None) -> list[dict[str, Any]]:
    """:func:`replay_result` of each (clause, witness), one progress event each."""
    out: list[dict[str, Any]] = []
    for clause_id, witness in items:
        begin(emit, {"clause": clause_id, "phase": "replay"}, witness)
        out.append(replay_result(engine, law(str(clause_id)), witness))
    return out
