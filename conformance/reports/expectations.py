"""Expected failures per engine release, each with a pinned witness example.

File format (TOML)::

    engine = "vllm"
    version = "0.34.0"

    [[xfail]]
    clause = "ERROR-DETECT-1"
    mode = "optimized"          # "normal", "optimized" or "both"
    signature = "accepted:FullAttentionSpec:block_size"
    reason = "FullAttentionSpec.merge guards with bare asserts"
    witness = { specs = [ {kind = "FullAttentionSpec", ...}, ... ] }

One reviewed reason may cover several findings of a clause and mode::

    [[xfail]]
    clause = "ERROR-DETECT-1"
    mode = "optimized"
    reason = "..."
    [[xfail.finding]]
    signature = "accepted:FullAttentionSpec:block_size"
    witness = { ... }
    [[xfail.finding]]
    signature = "accepted:FullAttentionSpec:dtype"
    witness = { ... }

An entry expects one *finding*: clause x mode x signature. Its witness is
replayed on every run: it must still fail with that signature (xfail), else
the entry is an xpass (fixed, or failing differently). The search runs
regardless, so a finding with a signature no entry names is a failure even
in a clause that has xfails: a known failure never hides a new one.
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from pathlib import Path
from typing import Any

from kvcontract.spec import load_catalogue

XFAILS_DIR = Path(__file__).parent.parent / "xfails"
MODES = ("normal", "optimized")


class XfailsError(ValueError):
    """An expectations file that cannot be used; the message names the entry."""


@dataclasses.dataclass(frozen=True)
class Expectation:
    clause: str
    mode: str
    signature: str
    reason: str
    witness: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Expectations:
    path: str
    engine: str
    version: str
    entries: tuple[Expectation, ...]

    def for_clause(self, clause: str, mode: str) -> list[Expectation]:
        """The expected findings of ``clause`` in ``mode``."""
        return [e for e in self.entries if e.clause == clause and e.mode == mode]


def load_xfails(path: str | Path) -> Expectations:
    """Read an expectations file; :class:`XfailsError` names the entry at fault."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise XfailsError(f"cannot read expectations file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise XfailsError(f"expectations file {path} is not TOML: {exc}") from None
    known = {c.id for c in load_catalogue()}
    entries: list[Expectation] = []
    seen: set[tuple[str, str, str]] = set()
    for i, entry in enumerate(data.get("xfail", [])):
        where = f"{path}: xfail #{i + 1}"
        for key in ("clause", "mode", "reason"):
            if key not in entry:
                raise XfailsError(f"{where}: missing {key!r}")
        if entry["clause"] not in known:
            raise XfailsError(f"{where}: unknown clause {entry['clause']!r}")
        modes = MODES if entry["mode"] == "both" else (entry["mode"],)
        if any(m not in MODES for m in modes):
            raise XfailsError(f"{where}: mode must be normal, optimized or both, not {entry['mode']!r}")
        findings = entry.get("finding")
        if findings is None:
            findings = [{k: entry[k] for k in ("signature", "witness") if k in entry}]
        elif "signature" in entry or "witness" in entry:
            raise XfailsError(f"{where}: give signature and witness, or [[xfail.finding]] tables, not both")
        for j, finding in enumerate(findings):
            at = f"{where}, finding #{j + 1}" if "finding" in entry else where
            for key in ("signature", "witness"):
                if key not in finding:
                    raise XfailsError(f"{at}: missing {key!r}")
            if not isinstance(finding["witness"], dict):
                raise XfailsError(f"{at}: witness must be a table")
            for mode in modes:
                key3 = (entry["clause"], mode, str(finding["signature"]))
                if key3 in seen:
                    raise XfailsError(f"{at}: {entry['clause']} [{mode}] [{finding['signature']}] is "
                                      "expected twice")
                seen.add(key3)
                entries.append(Expectation(entry["clause"], mode, str(finding["signature"]),
                                           str(entry["reason"]), finding["witness"]))
    return Expectations(str(path), str(data.get("engine", "")), str(data.get("version", "")), tuple(entries))


def check_xfails_options(xfails: str | None, no_xfails: bool) -> None:
    """The command lines' ``--xfails FILE`` / ``--no-xfails``: they exclude each other, and
    a given file must load. Raises :class:`kvcontract.usage.UsageError`."""
    from kvcontract.usage import UsageError  # imports nothing: no cycle

    if xfails and no_xfails:
        raise UsageError("--xfails and --no-xfails exclude each other")
    if xfails:
        try:
            load_xfails(xfails)
        except XfailsError as exc:
            raise UsageError(str(exc)) from None


def default_xfails(engine_name: str, engine_version: str) -> Path | None:
    """The bundled expectations file for this engine release, if there is one."""
    candidate = XFAILS_DIR / f"{engine_name}-{engine_version}.toml"
    return candidate if candidate.exists() else None


def toml_value(value: object) -> str:
    """``value`` (JSON data: a pinned witness) as a TOML inline value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {value!r} as TOML")
