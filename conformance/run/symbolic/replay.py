"""A path CrossHair could not replay: the same choices took another path, so something the
search reads changed between two runs of it. Diagnosed concretely (:func:`replay_failed`): the
engine's answer that changes is the clause's finding; the search never aborts."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from kvcontract.conformance.contract.laws import law
from kvcontract.conformance.contract.model import Example, Violation, signature
from kvcontract.conformance.engines.protocol import Engine
from kvcontract.conformance.reports.check import Record
from kvcontract.conformance.run.worker import last_frame

if TYPE_CHECKING:
    from kvcontract.conformance.run.symbolic.search import Group, Search


def _outcome(engine: Engine, law_: Any, ex: Example) -> tuple[tuple[str, ...] | None, Violation | None]:
    """``law_`` judged on a copy of ``ex``, outside CrossHair: its signatures (``()`` when it
    holds, None when the kit could not judge it) and the violation."""
    try:
        law_.check(engine, copy.deepcopy(ex))
    except Violation as violation:
        violation.example = ex
        return tuple(violation.signatures), violation
    except Exception:  # noqa: BLE001 - the kit could not judge it: no evidence either way
        return None, None
    return (), None


def replay_failed(search: Search, group: Group, exc: BaseException) -> None:
    """CrossHair could not replay a path of ``group``: the same choices took another path, so
    something the search reads changed between two runs of it. The kit hands the engine
    copies only, so the cause is the engine's answers changing: each recent example is judged
    again, twice, outside CrossHair, and one whose answer changes is that clause's finding
    (``nondeterministic``), with its witness and repro. None changing is the kit's error.
    Either way the group's path tree starts afresh and the search goes on."""
    group.stats.replay_failures += 1
    found = False
    for clause, ex, first, seen in list(group.recent)[::-1]:
        law_ = law(clause)
        (second, violation), (third, other) = _outcome(search.engine, law_, ex), _outcome(search.engine, law_, ex)
        answers = [a for a in (first, second, third) if a is not None]
        shown_by = seen or violation or other  # a run that violated: its repro shows the failing answer
        if len(set(answers)) <= 1 or shown_by is None:
            continue
        shown = " / ".join(", ".join(a) or "holds" for a in dict.fromkeys(answers))
        sig = signature("nondeterministic", ex.kinds())
        if (clause, sig) not in search.records:
            evidence = Violation(f"the engine answers the same input differently from run to run ({shown}); "
                                 "the repro shows the failing answer, which may take several runs",
                                 shown_by.expect, sig)
            evidence.example = ex
            search._record(group, law_, clause, sig, ex, evidence)
        found = True
        break
    if not found:
        key = f"{group.stats.operation}{':' + group.stats.kind if group.stats.kind else ''}: CrossHair " \
              f"could not replay a path ({type(exc).__name__})"
        last = group.recent[-1] if group.recent else None
        if key not in search.errors:
            search.errors[key] = Record(
                clause=last[0] if last else "ROLE-COVER-1", title=law(last[0]).title if last else "",
                level=law(last[0]).level if last else "MUST", mode=search.mode, status="error",
                signature=f"kit-error:{type(exc).__name__}", phase="symbolic",
                message=f"{key}; the engine's answers to the last {len(group.recent)} examples did not change "
                        "when judged again, so the cause was not found; the group's search started afresh",
                where=last_frame(exc), witness=(last[1].to_json() or None) if last else None)
    group.recent.clear()
    group.fresh_tree()

