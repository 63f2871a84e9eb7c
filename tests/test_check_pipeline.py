"""How a check's work is laid out across its workers (kvcontract.conformance.run.session and
.tasks): findings traced while another pass still runs, the traces already made never asked
for again, a worker's collector set once its engine is loaded, and the real model examples
shared by the clauses of a shape. None of it may change what a check reports."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from kvcontract.conformance.reports.check import Record, Report, Summary
from kvcontract.conformance.run import tasks, tracing
from kvcontract.conformance.run.worker import TaskResult

ROOT = Path(__file__).resolve().parent.parent
FULL = {"kind": "FullAttentionSpec", "block_size": 16, "num_kv_heads": 2, "head_size": 64, "dtype": "bfloat16"}


def _finding(clause: str, mode: str, n: int, status: str = "xfail") -> Record:
    return Record(clause=clause, title=clause, level="MUST", mode=mode, status=status,  # type: ignore[arg-type]
                  signature=f"accepted:FullAttentionSpec:f{n}", witness={"specs": [{**FULL, "block_size": 16 * n}]})


def _n(item: Mapping[str, Any]) -> int:
    """Which finding a witness is (its block size, in sixteens)."""
    return int(item["witness"]["specs"][0]["block_size"]) // 16


def _where(record: Mapping[str, Any]) -> dict[str, Any]:
    n = _n(record)
    return {"function": "Spec.merge", "location": f"engine/spec.py:{n}", "outcome": "assert-only", "how": "",
            "statement": ""}


class RecordingWorker:
    """A worker that answers locate tasks from the witness and keeps each task's items."""

    def __init__(self, fail: bool = False) -> None:
        self.batches: list[list[dict[str, Any]]] = []
        self.stopped = False
        self.fail = fail

    def run(self, call: str, args: Mapping[str, Any], **_: Any) -> TaskResult:
        assert call == tasks.LOCATE_TASK
        self.batches.append(list(args["items"]))
        if self.fail:
            return TaskResult("timeout", error="stopped after 1 s")
        return TaskResult("done", value=[_where(item) for item in args["items"]])


def _report(records: list[Record]) -> Report:
    return Report(kit_version="0", engine="toy", engine_version="1", profile="quick", seed=0,
                  modes=["normal", "optimized"], records=records,
                  summary=Summary(counts={"xfail": len(records)}, failed=[], seconds=1.0))


def test_trace_defects_asks_only_for_the_findings_not_traced_already() -> None:
    records = [_finding("ERROR-DETECT-1", "normal", 1), _finding("ERROR-DETECT-1", "optimized", 2),
               _finding("ERROR-TYPE-1", "optimized", 3), _finding("MERGE-KIND-1", "normal", 4, status="pass")]
    report = _report(records)
    early = {tracing.finding_key(records[0]): _where(tracing.locate_item(records[0]))}
    worker = RecordingWorker()
    tracing.trace_defects(report, worker, "toy", progress=None, timeout=5, heartbeat=5,  # type: ignore[arg-type]
                          located=early)
    assert [[_n(i) for i in b] for b in worker.batches] == [[2, 3]]  # not the traced one, not the pass
    assert [d.lines for d in report.defects] == [[1, 2, 3]]  # one function, one outcome: one defect
    assert [bool(r.defect) for r in records] == [True, True, True, False]


def test_trace_defects_with_every_finding_traced_runs_no_task() -> None:
    records = [_finding("ERROR-DETECT-1", "normal", 1), _finding("ERROR-DETECT-1", "optimized", 2)]
    report = _report(records)
    worker = RecordingWorker(fail=True)
    tracing.trace_defects(report, worker, "toy", progress=None, timeout=5, heartbeat=5,  # type: ignore[arg-type]
                          located={tracing.finding_key(r): _where(tracing.locate_item(r)) for r in records})
    assert worker.batches == [] and report.warnings == []
    assert len(report.defects) >= 1


class FakePass:
    """A pass whose records arrive clause by clause (``clauses``: each a list of records)."""

    def __init__(self, clauses: list[list[Record]], worker: RecordingWorker, delay: float = 0.0) -> None:
        self.clauses, self.worker, self.delay = clauses, worker, delay
        self.records: list[Record] = []
        self.finished = threading.Event()
        self.problem: BaseException | None = None

    def run(self) -> None:
        for records in self.clauses:
            time.sleep(self.delay)
            self.records += records
        self.finished.set()


def test_early_tracing_traces_the_other_pass_findings_as_they_arrive_each_once() -> None:
    worker = RecordingWorker()
    normal = FakePass([[_finding("ERROR-DETECT-1", "normal", 1)]], worker)
    optimized = FakePass([[_finding("ERROR-DETECT-1", "optimized", n)] for n in (2, 3, 4)], RecordingWorker(),
                         delay=0.15)
    early = tracing.EarlyTracing({"normal": normal, "optimized": optimized},  # type: ignore[dict-item]
                                 "toy", timeout=5, heartbeat=5)
    other = threading.Thread(target=optimized.run)
    other.start()
    early.run()
    other.join()
    traced = [_n(i) for b in worker.batches for i in b]
    assert sorted(traced) == [1, 2, 3, 4]  # every finding of both passes, each once
    assert len(worker.batches) >= 2  # the normal pass's own first, the other's as they came
    assert set(early.located) == {tracing.finding_key(r) for p in (normal, optimized) for r in p.records}


def test_early_tracing_that_fails_leaves_the_findings_to_trace_defects() -> None:
    worker = RecordingWorker(fail=True)
    normal = FakePass([[_finding("ERROR-DETECT-1", "normal", 1)]], worker)
    done = FakePass([], RecordingWorker())
    done.finished.set()
    early = tracing.EarlyTracing({"normal": normal, "optimized": done}, "toy",  # type: ignore[dict-item]
                                 timeout=5, heartbeat=5)
    early.run()
    assert len(worker.batches) == 1 and early.located == {}  # tried once, not in a loop


def test_a_worker_freezes_what_its_engine_load_left_and_collects_less_often() -> None:
    code = ("import gc, json; from kvcontract.conformance.run import tasks; before = gc.get_threshold(); "
            "tasks.engine('reference'); print(json.dumps([before, gc.get_threshold(), gc.get_freeze_count() > 0]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    before, after, frozen = json.loads(out.stdout.strip().splitlines()[-1])
    assert tuple(before) != tasks.GC_THRESHOLD and tuple(after) == tasks.GC_THRESHOLD and frozen


def test_a_worker_loads_with_the_collector_paused_and_freezes_what_each_task_leaves() -> None:
    code = ("import gc, json, tempfile; from kvcontract.conformance.run import tasks; gc.disable(); "
            "tasks.engine('reference'); loaded = [gc.isenabled(), gc.get_freeze_count()]; "
            "tasks.law_task({'engine': 'reference', 'clause': 'MERGE-UNION-1', 'profile': 'quick', 'seed': 0}, "
            "lambda e: None); print(json.dumps(loaded + [gc.get_freeze_count(), gc.get_count()[0]]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    enabled, frozen_at_load, frozen_after_law, young = json.loads(out.stdout.strip().splitlines()[-1])
    assert enabled and frozen_at_load > 0  # resumed after the load, what it left frozen
    assert frozen_after_law > frozen_at_load and young < 100  # and what the law's run left, too


def test_a_worker_process_resumes_its_collector_after_a_task_that_loads_no_engine() -> None:
    code = ("import gc, json, sys; from kvcontract.conformance.run import worker; "
            "sys.stdin = iter([json.dumps({'id': 1, 'call': 'kvcontract.conformance.run.worker:nope'})]); "
            "worker.serve(); print(json.dumps(gc.isenabled()), file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert json.loads(out.stderr.strip().splitlines()[-1]) is True


def test_engine_info_is_worked_out_once_per_worker() -> None:
    tasks._INFO.clear()
    first = tasks.engine_info_task({"engine": "reference"}, lambda event: None)
    again = tasks.engine_info_task({"engine": "reference"}, lambda event: None)
    assert again is first and first["name"] == "reference"


@pytest.mark.vllm
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed")
def test_the_clauses_of_a_shape_judge_the_same_model_examples_as_built_afresh() -> None:
    from kvcontract.conformance.contract import models
    from kvcontract.conformance.contract.corpus import current_corpus, use_corpus
    from kvcontract.conformance.contract.laws import LAWS
    from kvcontract.conformance.engines.registry import resolve_engine
    from kvcontract.conformance.engines.vllm.corpus import PINNED_RELEASE, shipped_path

    engine = resolve_engine("vllm")
    use_corpus(str(shipped_path(PINNED_RELEASE)))
    corpus = current_corpus()
    assert corpus is not None
    by_shape: dict[str, list[Any]] = {}
    for law_ in LAWS:
        by_shape.setdefault(law_.shape.name, []).append(law_)
    for shape, laws in by_shape.items():
        shared = models.model_examples(engine, laws[0])
        fresh = list(models._model_examples(engine, corpus, shape))
        assert [(n, ex.to_json()) for n, ex in shared] == [(n, ex.to_json()) for n, ex in fresh], shape
        for law_ in laws[1:]:
            assert all(a[1] is b[1] for a, b in zip(models.model_examples(engine, law_), shared, strict=True)), shape
    assert any(models.model_examples(engine, laws[0]) for laws in by_shape.values())


# -- the examples both passes share (kvcontract.conformance.run.share) ----------------------


def _work_out(laws_by_clause: Mapping[str, Any], domain: Any, budget: int) -> Any:
    from kvcontract.conformance.run import execution

    def work_out(law_: Any) -> Any:
        return (execution.systematic_examples(law_, domain),
                execution.drawn_examples(law_, domain, budget, 0) if budget else ())
    return work_out


def test_shared_examples_are_what_the_worker_would_work_out_and_keep_one_object_one(tmp_path: Path) -> None:
    from kvcontract.conformance.contract.laws import law
    from kvcontract.conformance.contract.model import domain_of
    from kvcontract.conformance.engines.registry import resolve_engine
    from kvcontract.conformance.run import share

    domain = domain_of(resolve_engine("reference"))
    laws = [law("MERGE-UNION-1"), law("MERGE-KIND-1"), law("PLAN-TYPE-1")]
    share.use_share(str(tmp_path))
    try:
        written = share.prepare(laws, _work_out({}, domain, 20), domain_mode="producible",
                                budgets={law_.clause: 20 for law_ in laws}, seed_value=0)
        assert len(written) == 2  # two MERGE clauses, one shape
        share._HELD.clear()  # as another worker finds them: in the files
        for law_ in laws:
            got = share.shared(law_, domain_mode="producible", budget=20, seed_value=0)
            assert got is not None
            expected = _work_out({}, domain, 20)(law_)
            assert [e.to_json() for e in got[0]] == [e.to_json() for e in expected[0]]
            assert [e.to_json() for e in got[1]] == [e.to_json() for e in expected[1]]
        plan = share.shared(law("PLAN-TYPE-1"), domain_mode="producible", budget=20, seed_value=0)
        assert plan is not None and all(any(d is e for e in plan[0]) for d in plan[1])  # draws are enumerated tables
        assert share.shared(law("MERGE-UNION-1"), domain_mode="producible", budget=21, seed_value=0) is None
    finally:
        share.use_share(None)


def test_a_preparing_worker_claims_every_shape_before_working_one_out(tmp_path: Path) -> None:
    from kvcontract.conformance.contract.laws import law
    from kvcontract.conformance.run import share

    laws = [law("MERGE-UNION-1"), law("ERROR-KIND-1"), law("PLAN-TYPE-1")]
    names = {share._name(law_, "producible", 0, 0) for law_ in laws}
    claimed_when_working: list[set[str]] = []

    def work_out(law_: Any) -> Any:  # the other worker waits for a claimed shape, never duplicates it
        claimed_when_working.append({p.name.removesuffix(".claim") for p in tmp_path.glob("*.claim")})
        return (), ()
    share.use_share(str(tmp_path))
    try:
        written = share.prepare(laws, work_out, domain_mode="producible", budgets={law_.clause: 0 for law_ in laws},
                                seed_value=0)
    finally:
        share.use_share(None)
    assert sorted(written) == sorted(names) and claimed_when_working and all(c == names for c in claimed_when_working)


def test_with_draws_to_make_the_preparing_worker_claims_each_shape_from_the_last_back_as_it_comes(
        tmp_path: Path) -> None:
    from kvcontract.conformance.contract.laws import law
    from kvcontract.conformance.engines.registry import resolve_engine
    from kvcontract.conformance.run import execution

    laws = [law("MERGE-UNION-1"), law("ERROR-KIND-1"), law("GROUP-PARTITION-1")]
    order: list[tuple[str, int]] = []

    def worked_out(law_: Any, *args: Any) -> Any:  # which shape, and how many were claimed by then
        order.append((law_.shape.name, len(list(tmp_path.glob("*.claim")))))
        return (), (), (), None
    with _sharing(tmp_path), pytest.MonkeyPatch.context() as patch:
        patch.setattr(execution, "_worked_out", worked_out)
        execution.prepare_shared(resolve_engine("reference"), laws, "default", 0)
        assert order == [(law_.shape.name, i) for i, law_ in enumerate(reversed(laws), 1)]
        order.clear()
        for claim in tmp_path.glob("*"):
            claim.unlink()
        execution.prepare_shared(resolve_engine("reference"), laws, "quick", 0)  # quick: all claimed first
        assert order == [(law_.shape.name, 3) for law_ in laws]


def test_a_shape_claimed_by_another_worker_is_left_to_it_and_not_waited_for_past_the_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kvcontract.conformance.contract.laws import law
    from kvcontract.conformance.run import share

    monkeypatch.setattr(share, "WAIT_S", 0.2)
    share.use_share(str(tmp_path))
    try:
        name = share._name(law("ERROR-KIND-1"), "producible", 0, 0)
        (tmp_path / f"{name}.claim").write_text("")  # claimed by a worker that then died
        calls: list[str] = []
        written = share.prepare([law("ERROR-KIND-1")], lambda law_: calls.append(law_.clause) or ((), ()),
                                domain_mode="producible", budgets={"ERROR-KIND-1": 0}, seed_value=0)
        assert written == [] and calls == []
        start = time.monotonic()
        assert share.shared(law("ERROR-KIND-1"), domain_mode="producible", budget=0, seed_value=0) is None
        assert 0.15 < time.monotonic() - start < 2.0
        assert share.shared(law("ERROR-TYPE-1"), domain_mode="other", budget=0, seed_value=0) is None  # unclaimed
    finally:
        share.use_share(None)


def test_a_check_whose_passes_share_reports_what_an_unshared_pass_does(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from kvcontract.conformance.run import session as runner

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # this run's share directory, not another run's
    clauses = ["MERGE-UNION-1", "ERROR-KIND-1", "GROUP-PARTITION-1"]
    both = runner.run_check("mutant:drops-capability", profile="default", clauses=clauses)
    alone = runner.run_check("mutant:drops-capability", profile="default", clauses=clauses, optimize="off")

    def normal(report: Report) -> list[Any]:
        return [(r.clause, r.status, r.signature, r.witness, r.examples) for r in report.records if r.mode == "normal"]
    assert normal(both) == normal(alone)
    assert any(r.status == "fail" for r in alone.records)  # the mutant is found either way
    assert not list(tmp_path.glob("kvcontract-share-*"))  # the share directory is gone


def test_a_pinned_witness_the_pass_judged_already_is_answered_by_that_judgment(monkeypatch: pytest.MonkeyPatch) -> None:
    """run_law judges the clause's examples first; an expectation whose pinned witness is one of
    them takes that judgment instead of a replay, with the verdict and snippet a replay gives.
    A witness the pass did not judge is replayed."""
    from test_witness_avoids_known import LAW, Base, _example

    from kvcontract.conformance.reports.expectations import Expectation, Expectations
    from kvcontract.conformance.run import execution

    engine = Base()
    first, _ = execution.run_law(engine, LAW, "quick", 0, None)
    found = [r for r in first if r.status == "fail"]
    assert found, "the engine's known defect shows in the enumeration"
    unjudged = _example(16).to_json()
    unjudged["specs"][0]["num_kv_heads"] = 3  # a witness no enumerated example is
    entries = tuple(Expectation(r.clause, r.mode, r.signature, "known", r.witness) for r in found)
    extra = Expectation(LAW.clause, "normal", "wrong-value:FullAttentionSpec:nothing", "stale", unjudged)
    expectations = Expectations("x.toml", engine.name, "0", (*entries, extra))
    replayed: list[dict[str, Any]] = []
    replay_safely = execution.replay_safely

    def counting(engine_: Any, law_: Any, witness: dict[str, Any]) -> Any:
        replayed.append(witness)
        return replay_safely(engine_, law_, witness)

    monkeypatch.setattr(execution, "replay_safely", counting)
    records, _ = execution.run_law(engine, LAW, "quick", 0, expectations)
    assert replayed == [unjudged]
    replayed.clear()
    by_replay = execution.judge_expectations(engine, LAW, expectations, "normal")
    assert len(replayed) == len(entries) + 1
    got = {r.signature: (r.status, r.message, r.snippet) for r in records if r.phase == "witness"}
    want = {sig: (v.status, v.message, LAW.snippet(engine, v.replay.violation.example, v.replay.violation, False)
                  if v.status == "xfail" and v.replay.violation else "") for sig, v in by_replay.items()}
    assert got == want and {s for s, _m, _p in got.values()} == {"xfail", "xpass"}


@contextlib.contextmanager
def _sharing(directory: Path) -> Iterator[None]:
    """This process shares through ``directory``, its shape caches empty before and after."""
    from kvcontract.conformance.run import execution, share

    share.use_share(str(directory))
    execution._SYSTEMATIC.clear()
    execution._DRAWN.clear()
    try:
        yield
    finally:
        share.use_share(None)
        execution._SYSTEMATIC.clear()
        execution._DRAWN.clear()


def test_a_shape_no_worker_claimed_is_claimed_by_the_clause_that_needs_it(tmp_path: Path) -> None:
    """The normal worker prepares nothing up front (it traces the findings after its pass); a clause
    of a shape nobody claimed yet claims it and writes its examples for the -O worker."""
    from kvcontract.conformance.contract.laws import law
    from kvcontract.conformance.contract.model import domain_of
    from kvcontract.conformance.contract.strategies import domain_mode
    from kvcontract.conformance.engines.registry import resolve_engine
    from kvcontract.conformance.run import execution, share

    domain = domain_of(resolve_engine("reference"))
    law_ = law("MERGE-KIND-1")
    with _sharing(tmp_path):
        execution._take_shared(law_, domain, 20, 0)
        key = share.domain_key(domain_mode(), domain)  # shapes are named by the engine's domain too
        name = share._name(law_, key, 20, 0)
        assert (tmp_path / f"{name}.claim").exists() and (tmp_path / f"{name}.pkl").exists()
        share._HELD.clear()  # as the other worker finds them
        got = share.shared(law_, domain_mode=key, budget=20, seed_value=0)
        assert got is not None
        assert [e.to_json() for e in got[1]] == \
            [e.to_json() for e in execution.drawn_examples(law_, domain, 20, 0)]


def test_the_taking_worker_gets_the_examples_facts_with_them_and_works_out_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kvcontract.conformance.contract.laws import law
    from kvcontract.conformance.contract.model import domain_of
    from kvcontract.conformance.contract.strategies import domain_mode
    from kvcontract.conformance.engines.registry import resolve_engine
    from kvcontract.conformance.run import execution, facts, share

    domain = domain_of(resolve_engine("reference"))
    law_ = law("GROUP-PARTITION-1")
    with _sharing(tmp_path):
        execution._take_shared(law_, domain, 20, 0)  # claimed and written here, as the -O worker does
        share._HELD.clear()  # now as the other worker: examples from the file, new objects
        execution._SYSTEMATIC.clear()
        execution._DRAWN.clear()
        facts._FACTS.clear()
        facts._BY_TEXT.clear()
        computed: list[object] = []
        monkeypatch.setattr(facts.ExampleFacts, "of", classmethod(lambda cls, ex, **_: computed.append(ex)))
        execution._take_shared(law_, domain, 20, 0)
        examples = [*execution.systematic_examples(law_, domain), *execution.drawn_examples(law_, domain, 20, 0)]
        got = [facts.example_facts(ex) for ex in examples]
        assert examples and not computed  # every fact came with the file
        monkeypatch.undo()
        last = {f.text: ex for ex, f in zip(examples, got, strict=True)}  # of equal examples, the last one
        for ex, f in zip(examples, got, strict=True):
            fresh = facts.ExampleFacts.of(ex)
            assert (f.pristine, f.text, f.pairs) == (fresh.pristine, fresh.text, fresh.pairs)
            assert facts.judged_example(f.pristine) is last[f.text]
        assert domain_mode() == "producible"


def test_the_taking_worker_gets_the_references_plan_answers_with_the_tables(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kvcontract import reference
    from kvcontract.conformance.contract.laws import law
    from kvcontract.conformance.contract.laws import plan as plan_laws
    from kvcontract.conformance.contract.model import domain_of
    from kvcontract.conformance.engines.registry import resolve_engine
    from kvcontract.conformance.run import execution, share

    domain = domain_of(resolve_engine("reference"))
    law_ = law("PLAN-SIZE-1")
    caches = (plan_laws._GROUPS, plan_laws._BUDGETS, plan_laws._REFERENCE_PLANS)
    with _sharing(tmp_path):
        execution._take_shared(law_, domain, 0, 0)  # claimed and worked out here, answers too
        worked_out = [dict(c) for c in caches]
        share._HELD.clear()  # now as the other worker
        execution._SYSTEMATIC.clear()
        for c in caches:
            c.clear()
        monkeypatch.setattr(reference, "plan_groups", lambda *a, **k: pytest.fail("worked out again"))
        execution._take_shared(law_, domain, 0, 0)
        tables = {plan_laws.table_key(ex.table) for ex in execution.systematic_examples(law_, domain)}
        assert len(tables) > 100 and [dict(c) for c in caches][1:] == worked_out[1:]
        assert {k for k, _ in plan_laws._GROUPS} == tables == set(plan_laws._BUDGETS)
        assert [repr(v) for v in plan_laws._GROUPS.values()] == [repr(v) for v in worked_out[0].values()]


def test_only_the_optimized_pass_prepares_shared_examples_up_front() -> None:
    from kvcontract.conformance.run import session as runner

    asked: dict[str, list[str]] = {}
    for mode in ("normal", "optimized"):
        p = runner.Pass("reference", optimized=mode == "optimized", profile="quick", seed_value=0, xfails=None,
                        clauses=["MERGE-KIND-1"], progress=None, clause_timeout=5, example_timeout=5, share="/nowhere")

        class Asked:
            def __init__(self, mode: str) -> None:
                self.mode = mode

            def run(self, call: str, args: Mapping[str, Any], **_: Any) -> None:
                asked.setdefault(self.mode, []).append(call)

        p.worker.close()
        p.worker = Asked(mode)  # type: ignore[assignment]
        p._prepare()
    assert asked == {"optimized": [tasks.PREPARE_TASK]}


def test_a_witness_traced_in_the_worker_that_judged_it_is_that_example_object() -> None:
    """locate replays a finding's witness as the very example the pass judged (its answers and
    the kit's are remembered by identity): decoding afresh made tracing twice as slow."""
    from kvcontract.conformance.contract.laws import law
    from kvcontract.conformance.contract.model import domain_of
    from kvcontract.conformance.engines.registry import resolve_engine
    from kvcontract.conformance.run import execution, facts, locate

    law_ = law("MERGE-KIND-1")
    ex = execution.systematic_examples(law_, domain_of(resolve_engine("reference")))[0]
    facts.example_facts(ex)
    witness = json.loads(json.dumps(ex.to_json()))  # as a record carries it
    assert facts.judged_example(witness) is ex
    assert locate._decoded(law_.example_type, witness) is ex
    other = {**witness, "specs": witness["specs"][:1]} if len(witness["specs"]) > 1 else {"specs": []}
    if facts.judged_example(other) is None:
        decoded = locate._decoded(law_.example_type, other)
        assert decoded is not ex and decoded.to_json() == law_.example_type.from_json(other).to_json()
