"""The plan agreement a report adds to its drawings: ``docs/plan-agreement.json``
(:mod:`kvcontract.conformance.reports.plan_agreement`, ``scripts/plan_agreement.py``), every table
planned by the reference and the engine in all four settings (hybrid manager on / off, layer- /
block-outermost) and both interpreters, compared whole. It lists the cases that differ (not the
plans: the drawings come from :mod:`.plans`), each with its first difference and the reviewed
defect; a report shows, under each corpus table drawn, the differing cases of the tables it
stands for. Used only when its engine and release are the report's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
DEFAULT = ROOT / "docs" / "plan-agreement.json"


class AgreementFileError(ValueError):
    """A ``--agreement`` file that is not a plan agreement."""


@dataclass(frozen=True)
class Agreement:
    path: str
    engine: str
    engine_version: str
    settings: tuple[str, ...]
    summary: Mapping[str, Any]
    by_table: Mapping[str, Sequence[Mapping[str, Any]]]

    def rows(self, names: Sequence[str]) -> list[dict[str, Any]]:
        """The differing cases of these tables, one per setting x interpreter x first difference."""
        seen: dict[tuple[str, str, str], dict[str, Any]] = {}
        for name in names:
            for row in self.by_table.get(name, []):
                key = (row.get("setting", ""), row.get("interpreter", ""), row.get("signature", ""))
                held = seen.setdefault(key, {**row, "tables": []})
                held["tables"].append(name)
        return sorted(seen.values(), key=lambda r: (r.get("interpreter", ""), r.get("setting", "")))


def read_agreement(path: str | Path) -> Agreement:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise AgreementFileError(f"{path}: not readable as JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("differences"), list) or "summary" not in data:
        raise AgreementFileError(f"{path}: not a plan agreement (scripts/plan_agreement.py writes "
                                 "docs/plan-agreement.json: summary, settings, differences)")
    by_table: dict[str, list[dict[str, Any]]] = {}
    for i, row in enumerate(data["differences"]):
        if not isinstance(row, dict) or "table" not in row:
            raise AgreementFileError(f"{path}: differences[{i}]: needs a table")
        if row.get("origin", "corpus") == "corpus":
            by_table.setdefault(str(row["table"]), []).append(row)
    return Agreement(str(path), str(data.get("engine", "")), str(data.get("engine_version", "")),
                     tuple(data.get("settings", [])), data["summary"], by_table)


__all__ = ["DEFAULT", "Agreement", "AgreementFileError", "read_agreement"]
