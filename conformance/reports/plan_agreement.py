"""Where the reference's plans and an engine's differ: every table of the inputs planned by
both under every setting (hybrid manager on and off, layer- and block-outermost), the whole
plans compared (:mod:`kvcontract.conformance.contract.plan_compare`), each difference
either reviewed as an engine defect or left for review.

The inputs are the engine release's shipped real tables, the tables of its own planning
tests restated (:mod:`kvcontract.conformance.engines.vllm.tables.peer_planning`), and any
corpus file given. The engine plans in this interpreter, and with ``optimized`` also in a
``python -O`` worker (:func:`worker_main`: asserts vanish there). The memory budget is the
PLAN laws' (:func:`~kvcontract.conformance.contract.laws.plan.budget_of`). A case that
differs is reviewed when an entry of the reviews file matches the signature of its first
difference (as PLAN-MATCH-1 names it) and, where the entry says, its interpreter; an entry
names a reviewed defect of the release (``conformance/xfails/reviews/<engine>-<version>.toml``).
:func:`render_markdown` and :func:`to_json` write ``docs/plan-agreement.md`` and its JSON.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import importlib
import json
import subprocess
import sys
import tomllib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kvcontract.conformance.contract.plan_compare import CLASSES, Difference, compare
from kvcontract.conformance.engines.protocol import EngineGroup, EnginePlan, EngineTensor
from kvcontract.reference import GroupingError, KVCacheSpec
from kvcontract.usage import UsageError

SETTINGS: tuple[tuple[bool, bool], ...] = ((True, False), (True, True), (False, False), (False, True))
"""(hybrid manager on, block-outermost) of every case, in report order."""
ROOT = Path(__file__).resolve().parents[2]
REVIEWS_DIR = ROOT / "conformance" / "xfails" / "reviews"
WORKER_TIMEOUT_S = 1800

Table = dict[str, KVCacheSpec]


@dataclasses.dataclass(frozen=True)
class Input:
    """A table to plan: its name, where it comes from (``shipped``, ``peer``, ``corpus``)."""

    name: str
    origin: str
    table: Table


def setting_name(hybrid: bool, block_outermost: bool) -> str:
    return f"hybrid {'on' if hybrid else 'off'}, {'block' if block_outermost else 'layer'}-outermost"


# -- inputs -----------------------------------------------------------------------------------


def shipped_inputs(version: str) -> list[Input]:
    from kvcontract.conformance.engines.vllm.tables import load_tables

    return [Input(t.name, "shipped", t.specs()) for t in load_tables(version)]


def peer_inputs() -> list[Input]:
    from kvcontract.conformance.engines.vllm.tables.peer_planning import peer_tables

    return [Input(name, "peer", table) for name, table in peer_tables()]


def corpus_inputs(path: str) -> list[Input]:
    """The tables of a corpus file (``kvcontract.conformance.contract.corpus``)."""
    try:
        corpus = importlib.import_module("kvcontract.conformance.contract.corpus")
    except ImportError:
        raise UsageError("plan_agreement: this checkout has no corpus reader "
                         "(kvcontract.conformance.contract.corpus)") from None
    try:
        read = corpus.read_corpus(path)
    except (OSError, ValueError) as exc:
        raise UsageError(f"plan_agreement: {path}: {exc}") from None
    return [Input(t.name, "corpus", t.specs()) for t in read.tables]


# -- planning -----------------------------------------------------------------------------------


def budget(table: Table) -> int:
    from kvcontract.conformance.contract.laws.plan import budget_of

    return budget_of(table)


def reference_answer(table: Table, hybrid: bool, block_outermost: bool) -> Any:
    from kvcontract import reference

    try:
        return reference.plan(dict(table), budget(table), hybrid=hybrid, block_outermost=block_outermost)
    except GroupingError as exc:
        return exc


def engine_answer(engine: Any, table: Table, hybrid: bool, block_outermost: bool) -> EnginePlan | BaseException:
    try:
        objs = {n: engine.to_engine(s) for n, s in table.items()}
        plan: EnginePlan = engine.plan_layers(objs, budget(table), hybrid=hybrid, block_outermost=block_outermost)
        return plan
    except Exception as exc:  # noqa: BLE001 - the engine's refusal is its answer
        return exc


def plan_to_json(answer: EnginePlan | BaseException) -> dict[str, Any]:
    from kvcontract.conformance.contract.codec import spec_to_json

    if isinstance(answer, BaseException):
        return {"error": f"{type(answer).__name__}: {str(answer)[:300]}"}
    groups = [{"layers": list(g.layer_names), "spec": None if g.spec is None else spec_to_json(g.spec),
               "members": None if g.member_specs is None else {n: spec_to_json(s) for n, s in g.member_specs.items()}}
              for g in answer.groups]
    tensors = [[list(t.layer_names), t.size_bytes, t.offset, t.layer_stride, t.block_stride] for t in answer.tensors]
    return {"groups": groups, "num_blocks": answer.num_blocks, "tensors": tensors}


class EngineError(Exception):
    """What an engine raised in a worker: ``described`` is its type's name and message."""

    @property
    def described(self) -> str:
        return str(self)


def plan_from_json(data: Mapping[str, Any]) -> EnginePlan | BaseException:
    from kvcontract.conformance.contract.codec import spec_from_json

    if "error" in data:
        return EngineError(data["error"])
    groups = tuple(EngineGroup(tuple(g["layers"]), None if g["spec"] is None else spec_from_json(g["spec"]),
                               None if g["members"] is None else {n: spec_from_json(s) for n, s in g["members"].items()})
                   for g in data["groups"])
    tensors = tuple(EngineTensor(tuple(t[0]), t[1], t[2], t[3], t[4]) for t in data["tensors"])
    return EnginePlan(groups, int(data["num_blocks"]), tensors)


def worker_main() -> int:
    """``python [-O] -m kvcontract.conformance.reports.plan_agreement``: stdin
    ``{"engine", "tables": {name: layer table JSON}}``; stdout one JSON object, table ->
    the engine's answers in :data:`SETTINGS` order."""
    from kvcontract.conformance.contract.codec import spec_from_json
    from kvcontract.conformance.engines.protocol import load_engine

    request = json.loads(sys.stdin.read())
    engine = load_engine(request["engine"])
    out: dict[str, list[dict[str, Any]]] = {}
    for name, layers in request["tables"].items():
        table = {n: spec_from_json(s) for n, s in layers}
        out[name] = []
        for hybrid, block_outermost in SETTINGS:
            answer = engine_answer(engine, table, hybrid, block_outermost)
            try:
                out[name].append(plan_to_json(answer))
            except Exception as exc:  # noqa: BLE001 - a plan no valid spec can hold is the engine's answer
                out[name].append({"error": f"{type(exc).__name__}: {exc}"})
    print(json.dumps(out))
    return 0


def optimized_answers(engine_name: str, inputs: Sequence[Input]) -> dict[str, list[EnginePlan | BaseException]]:
    """The engine's answers for every input and setting, from a ``python -O`` worker."""
    from kvcontract.conformance.contract.codec import spec_to_json

    request = json.dumps({"engine": engine_name, "tables": {
        i.name: [[n, spec_to_json(s)] for n, s in i.table.items()] for i in inputs}})
    done = subprocess.run([sys.executable, "-O", "-m", __name__], input=request, capture_output=True, text=True,
                          timeout=WORKER_TIMEOUT_S, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the python -O worker failed (exit {done.returncode}): {tail}")
    data = json.loads(lines[-1])
    return {name: [plan_from_json(a) for a in answers] for name, answers in data.items()}


# -- reviews -------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Review:
    """A reviewed cause of differences: cases whose first difference's signature matches
    ``signature`` (a glob), whose detail matches ``detail`` (a glob; e.g. the attribute an
    exception names) and whose interpreter is ``interpreter`` (``normal``, ``optimized`` or
    ``any``) are the engine defect ``defect`` of the release's review file, for ``reason``.
    The first entry that matches a case reviews it."""

    signature: str
    defect: str
    reason: str
    interpreter: str = "any"
    detail: str = "*"

    def matches(self, case: Case) -> bool:
        first = case.differences[0]
        return (self.interpreter in ("any", case.interpreter) and fnmatch.fnmatchcase(case.signature, self.signature)
                and fnmatch.fnmatchcase(first.detail, self.detail))


def load_reviews(path: Path, engine: str, version: str) -> list[Review]:
    """The reviews of ``path``; each must name a defect of the release's review file."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"plan_agreement: {path}: {exc}") from None
    known_path = REVIEWS_DIR / f"{engine}-{version}.toml"
    known = {d["id"] for d in tomllib.loads(known_path.read_text(encoding="utf-8")).get("defect", [])} \
        if known_path.is_file() else set()
    reviews = []
    for i, entry in enumerate(data.get("review", [])):
        where = f"{path}: review {i + 1}"
        missing = {"signature", "defect", "reason"} - set(entry)
        if missing or set(entry) - {"signature", "defect", "reason", "interpreter", "detail"}:
            raise UsageError(f"plan_agreement: {where}: needs signature, defect, reason "
                             "(and optionally interpreter, detail)")
        if entry["defect"] not in known:
            raise UsageError(f"plan_agreement: {where}: defect {entry['defect']!r} is not reviewed in {known_path.name}")
        if entry.get("interpreter", "any") not in ("any", "normal", "optimized"):
            raise UsageError(f"plan_agreement: {where}: interpreter must be any, normal or optimized")
        reviews.append(Review(entry["signature"], entry["defect"], entry["reason"], entry.get("interpreter", "any"),
                              entry.get("detail", "*")))
    return reviews


# -- cases -----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Case:
    """One table planned under one setting in one interpreter, and what differs."""

    input: Input
    hybrid: bool
    block_outermost: bool
    interpreter: str
    differences: tuple[Difference, ...]
    review: Review | None = None

    @property
    def signature(self) -> str:
        return self.differences[0].signature_in(self.hybrid) if self.differences else ""


def compare_inputs(inputs: Sequence[Input], engine: Any, reviews: Sequence[Review], interpreter: str = "normal",
                   answers: Mapping[str, Sequence[EnginePlan | BaseException]] | None = None,
                   progress: Callable[[str], None] | None = None) -> list[Case]:
    """Every input under every setting: the reference's plan against the engine's (planned
    here, or taken from ``answers``, per input in :data:`SETTINGS` order)."""
    cases = []
    for n, item in enumerate(inputs):
        if progress and n % 50 == 0:
            progress(f"{interpreter}: {n}/{len(inputs)} tables")
        for i, (hybrid, block_outermost) in enumerate(SETTINGS):
            expected = reference_answer(item.table, hybrid, block_outermost)
            answer = answers[item.name][i] if answers is not None else \
                engine_answer(engine, item.table, hybrid, block_outermost)
            differences = tuple(compare(expected, answer, engine if answers is None else None, table=item.table))
            case = Case(item, hybrid, block_outermost, interpreter, differences)
            if differences:
                review = next((r for r in reviews if r.matches(case)), None)
                case = dataclasses.replace(case, review=review)
            cases.append(case)
    return cases


# -- the report ------------------------------------------------------------------------------------


def summary(cases: Sequence[Case]) -> dict[str, Any]:
    differing = [c for c in cases if c.differences]
    by_class = Counter(c.differences[0].what for c in differing)
    return {"cases": len(cases), "tables": len({(c.input.origin, c.input.name) for c in cases}),
            "agree": len(cases) - len(differing), "differ": len(differing),
            "reviewed": sum(1 for c in differing if c.review), "unreviewed": sum(1 for c in differing if not c.review),
            "by_class": {k: by_class[k] for k in CLASSES if by_class[k]},
            "by_origin": {o: {"cases": sum(1 for c in cases if c.input.origin == o),
                              "differ": sum(1 for c in differing if c.input.origin == o)}
                          for o in sorted({c.input.origin for c in cases})}}


def to_json(cases: Sequence[Case], engine: str, version: str) -> dict[str, Any]:
    """The summary and every differing case (agreeing ones are counted, not listed)."""
    return {"engine": engine, "engine_version": version, "settings": [setting_name(*s) for s in SETTINGS],
            "summary": summary(cases),
            "differences": [{"table": c.input.name, "origin": c.input.origin, "setting": setting_name(
                c.hybrid, c.block_outermost), "interpreter": c.interpreter, "signature": c.signature,
                "defect": c.review.defect if c.review else None, "first": str(c.differences[0]),
                "more": [d.signature for d in c.differences[1:]]}
                for c in cases if c.differences]}


def dump_json(data: Mapping[str, Any]) -> str:
    """The report's JSON: one line per differing case (a diff of two reports reads line by line)."""
    head = {k: v for k, v in data.items() if k != "differences"}
    cases = ",\n".join("  " + json.dumps(d) for d in data["differences"])
    return json.dumps(head, indent=1)[:-2] + ',\n "differences": [' + (f"\n{cases}\n ]" if cases else "]") + "\n}\n"


def render_markdown(cases: Sequence[Case], engine: str, version: str, inputs_note: str) -> str:
    from kvcontract.reports import markdown_table

    s = summary(cases)
    classes = ", ".join(f"{k} {v}" for k, v in s["by_class"].items()) or "none"
    lines = [f"# Plan agreement: the reference and {engine} {version}", "",
             "Generated by `python scripts/plan_agreement.py`; do not edit. Every table is planned by the "
             "reference (`kvcontract.reference.plan`) and by the engine with the hybrid manager on and off, "
             "in the layer- and block-outermost layouts, within the PLAN laws' budget, and the whole plans "
             "are compared as clause PLAN-MATCH-1 compares them.", "",
             f"**{s['cases']} cases ({s['tables']} tables x {len(SETTINGS)} settings"
             f"{' x 2 interpreters' if len({c.interpreter for c in cases}) > 1 else ''}): {s['agree']} agree, "
             f"{s['differ']} differ ({s['reviewed']} reviewed engine defects, {s['unreviewed']} unreviewed).** "
             f"Differing cases by the class of their first difference: {classes}.", "",
             f"Inputs: {inputs_note}. Per input: " + "; ".join(
                 f"{o} {v['cases']} cases, {v['differ']} differ" for o, v in s["by_origin"].items()) + ".", ""]
    differing = [c for c in cases if c.differences]
    normal = [c for c in differing if c.interpreter == "normal"]
    if normal:
        rows = [[c.input.name, c.input.origin, setting_name(c.hybrid, c.block_outermost),
                 f"`{c.signature}`: {c.differences[0].detail}", len(c.differences) - 1,
                 c.review.defect if c.review else "**unreviewed**"] for c in normal]
        lines += ["## Cases that differ", "", "One row per table and setting, in the normal interpreter.", "",
                  *markdown_table(["table", "input", "setting", "first difference", "more", "engine defect"], rows,
                                  ["<", "<", "<", "<", ">", "<"]), ""]
    optimized = [c for c in differing if c.interpreter == "optimized"]
    if optimized:
        by_signature: dict[tuple[str, str], list[Case]] = {}
        for c in optimized:
            by_signature.setdefault((c.signature, c.review.defect if c.review else "**unreviewed**"), []).append(c)
        rows = [[f"`{sig}`", len(group), ", ".join(sorted({c.input.name for c in group})[:3])
                 + (f" +{len({c.input.name for c in group}) - 3}" if len({c.input.name for c in group}) > 3 else ""),
                 defect] for (sig, defect), group in sorted(by_signature.items())]
        lines += ["## Under python -O", "",
                  f"{len(optimized)} cases differ when the engine plans under `python -O` (its asserts gone), "
                  "grouped by their first difference; every one is listed in the JSON.", "",
                  *markdown_table(["first difference", "cases", "tables", "engine defect"], rows,
                                  ["<", ">", "<", "<"]), ""]
    used = Counter(c.review for c in differing if c.review)
    if used:
        rows = [[r.defect, f"`{r.signature}`", r.interpreter, count, r.reason]
                for r, count in sorted(used.items(), key=lambda kv: (kv[0].defect, kv[0].signature))]
        lines += ["## Reviewed engine defects", "",
                  f"Each names a defect reviewed in `conformance/xfails/reviews/{engine}-{version}.toml`.", "",
                  *markdown_table(["defect", "first difference", "interpreter", "cases", "why"], rows,
                                  ["<", "<", "<", ">", "<"]), ""]
    return "\n".join(lines)


__all__ = ["Case", "Input", "Review", "SETTINGS", "compare_inputs", "corpus_inputs", "dump_json", "load_reviews",
           "optimized_answers", "peer_inputs", "render_markdown", "shipped_inputs", "summary", "to_json",
           "worker_main"]

if __name__ == "__main__":
    raise SystemExit(worker_main())
