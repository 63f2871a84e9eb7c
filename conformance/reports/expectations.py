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

import contextlib
import dataclasses
import hashlib
import json
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

import pydantic

from kvcontract.conformance.engines.protocol import DistributionIdentity
from kvcontract.conformance.reports.witness import PinnedWitness, describe_errors
from kvcontract.reports import cache_dir, write_atomic
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
    defect: str = ""
    """The reviewed defect (engine function x outcome class) the finding comes from."""


@dataclasses.dataclass(frozen=True)
class Expectations:
    path: str
    engine: str
    version: str
    entries: tuple[Expectation, ...]

    def for_clause(self, clause: str, mode: str) -> list[Expectation]:
        """The expected findings of ``clause`` in ``mode``."""
        return [e for e in self.entries if e.clause == clause and e.mode == mode]


class PinnedFinding(pydantic.BaseModel):
    """``[[xfail.finding]]``: one expected finding and the witness that reproduces it."""

    model_config = pydantic.ConfigDict(extra="forbid")

    signature: str
    witness: PinnedWitness


class XfailEntry(pydantic.BaseModel):
    """``[[xfail]]``: a reviewed reason, for one finding (``signature`` and ``witness``)
    or for several (``[[xfail.finding]]`` tables) of a clause and mode."""

    model_config = pydantic.ConfigDict(extra="forbid")

    clause: str
    mode: Literal["normal", "optimized", "both"]
    reason: str
    defect: str | None = None
    """The id of the defect the findings come from (``function:class``), as the review names it."""
    signature: str | None = None
    witness: PinnedWitness | None = None
    finding: list[PinnedFinding] | None = None

    @pydantic.model_validator(mode="after")
    def _one_form(self) -> XfailEntry:
        if self.finding is not None:
            if self.signature is not None or self.witness is not None:
                raise ValueError("give signature and witness, or [[xfail.finding]] tables, not both")
        elif self.signature is None or self.witness is None:
            missing = "signature" if self.signature is None else "witness"
            raise ValueError(f"missing {missing!r} (or [[xfail.finding]] tables)")
        return self

    @property
    def findings(self) -> list[PinnedFinding]:
        if self.finding is not None:
            return self.finding
        return [PinnedFinding.model_construct(signature=self.signature, witness=self.witness)]

    @property
    def modes(self) -> tuple[str, ...]:
        return MODES if self.mode == "both" else (self.mode,)


class ExpectationsFile(pydantic.BaseModel):
    """The whole file: the engine release it is for, and its entries."""

    model_config = pydantic.ConfigDict(extra="forbid")

    engine: str = ""
    version: str = ""
    xfail: list[Any] = []
    """Validated entry by entry (:class:`XfailEntry`), so that an error names its entry."""


def _entry_label(index: int, raw: Any) -> str:
    clause = raw.get("clause") if isinstance(raw, dict) else None
    return f"xfail #{index + 1}" + (f" ({clause})" if isinstance(clause, str) else "")


_LOADED: dict[tuple[str, int, int], Expectations] = {}
"""Expectations files read in this process, by (path, mtime, size): a check's worker judges
every clause against the same file, and parsing a release's file (a thousand pinned witnesses)
took longer than most clauses."""


def load_xfails(path: str | Path) -> Expectations:
    """Read an expectations file; :class:`XfailsError` names the file and the entry at fault.
    A file read before in this process, unchanged since, is not parsed again (the result is
    shared: treat it as read-only)."""
    path = Path(path)
    try:
        stat = path.stat()
    except OSError as exc:
        raise XfailsError(f"cannot read expectations file {path}: {exc.strerror}") from None
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    if key not in _LOADED:
        _LOADED.clear()  # one file at a time is what a run uses; never grow without bound
        _LOADED[key] = _parse_xfails(path)
    return _LOADED[key]


def _toml_data(path: Path) -> dict[str, Any]:
    """An expectations file's TOML data. Parsing a release's file (a thousand pinned witnesses)
    took 0.15 s in each of a check's three processes: the data is kept as JSON in the kit's cache
    (:func:`~kvcontract.reports.cache_dir`), named by a digest of the file's bytes, and read from
    there (0.01 s) while the file is unchanged. A cache that cannot be read or written is skipped."""
    raw = path.read_bytes()
    base = cache_dir()
    kept = base / "expectations" / f"{hashlib.sha256(raw).hexdigest()[:32]}.json" if base is not None else None
    if kept is not None:
        with contextlib.suppress(OSError, ValueError):
            held = json.loads(kept.read_text())
            if isinstance(held, dict):
                return held
    data = tomllib.loads(raw.decode())
    if kept is not None:
        with contextlib.suppress(OSError, TypeError, ValueError):
            text = json.dumps(data)
            if json.loads(text) == data:  # TOML's dates (and NaN) do not come back from JSON: not kept
                write_atomic(kept, text)
    return data


def _parse_xfails(path: Path) -> Expectations:
    try:
        data = _toml_data(path)
    except OSError as exc:
        raise XfailsError(f"cannot read expectations file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise XfailsError(f"expectations file {path} is not TOML: {exc}") from None
    try:
        document = ExpectationsFile.model_validate(data)
    except pydantic.ValidationError as exc:
        raise XfailsError(f"expectations file {path}: {describe_errors(exc)}") from None
    known = {c.id for c in load_catalogue()}
    entries: list[Expectation] = []
    seen: set[tuple[str, str, str]] = set()
    for i, raw in enumerate(document.xfail):
        where = f"{path}: {_entry_label(i, raw)}"
        try:
            entry = XfailEntry.model_validate(raw)
        except pydantic.ValidationError as exc:
            raise XfailsError(f"{where}: {describe_errors(exc, numbered=('finding',))}") from None
        if entry.clause not in known:
            raise XfailsError(f"{where}: unknown clause {entry.clause!r}")
        for j, finding in enumerate(entry.findings):
            at = f"{where}, finding #{j + 1}" if entry.finding is not None else where
            for mode in entry.modes:
                key3 = (entry.clause, mode, finding.signature)
                if key3 in seen:
                    raise XfailsError(f"{at}: {entry.clause} [{mode}] [{finding.signature}] is expected twice")
                seen.add(key3)
                entries.append(Expectation(entry.clause, mode, finding.signature, entry.reason, finding.witness,
                                           entry.defect or ""))
    return Expectations(str(path), document.engine, document.version, tuple(entries))


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


def default_xfails(distribution: str | None, engine_version: str) -> Path | None:
    """The bundled expectations file of this release of the distribution (``vllm``), if
    there is one; none without a distribution."""
    if not distribution:
        return None
    candidate = XFAILS_DIR / f"{re.sub(r'[-_.]+', '-', distribution).lower()}-{engine_version}.toml"
    return candidate if candidate.exists() else None


def bundled_xfails(engine: Any) -> Path | None:
    """The bundled expectations file for ``engine``: found by the distribution it declares
    (:class:`~kvcontract.conformance.engines.protocol.DistributionIdentity`) and its
    version, never by its display name; an engine that declares none gets none."""
    distribution = engine.distribution if isinstance(engine, DistributionIdentity) else None
    return default_xfails(distribution, engine.version)


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
