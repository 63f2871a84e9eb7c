"""Expected failures per engine release, each with a pinned witness example.

File format (TOML)::

    engine = "vllm"
    version = "0.34.0"

    [[xfail]]
    clause = "ERROR-DETECT-1"
    mode = "optimized"          # "normal", "optimized" or "both"
    reason = "FullAttentionSpec.merge guards with bare asserts"
    witness = { specs = [ {kind = "FullAttentionSpec", ...}, ... ] }

The witness is replayed instead of a hypothesis search, so an xfail (witness
still fails) or xpass (witness now passes) never depends on what hypothesis
happens to draw.
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path
from typing import Any

from kvcontract.spec import load_catalogue

XFAILS_DIR = Path(__file__).parent / "xfails"
MODES = ("normal", "optimized")


class XfailsError(ValueError):
    """An expectations file that cannot be used; the message names the entry."""


@dataclasses.dataclass(frozen=True)
class Expectation:
    clause: str
    mode: str
    reason: str
    witness: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Expectations:
    path: str
    engine: str
    version: str
    entries: tuple[Expectation, ...]

    def get(self, clause: str, mode: str) -> Expectation | None:
        for e in self.entries:
            if e.clause == clause and e.mode == mode:
                return e
        return None


def load_xfails(path: str | Path) -> Expectations:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise XfailsError(f"cannot read expectations file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise XfailsError(f"expectations file {path} is not TOML: {exc}") from None
    known = {c.id for c in load_catalogue()}
    entries = []
    for i, entry in enumerate(data.get("xfail", [])):
        where = f"{path}: xfail #{i + 1}"
        for key in ("clause", "mode", "reason", "witness"):
            if key not in entry:
                raise XfailsError(f"{where}: missing {key!r}")
        if entry["clause"] not in known:
            raise XfailsError(f"{where}: unknown clause {entry['clause']!r}")
        modes = MODES if entry["mode"] == "both" else (entry["mode"],)
        if any(m not in MODES for m in modes):
            raise XfailsError(f"{where}: mode must be normal, optimized or both, not {entry['mode']!r}")
        for mode in modes:
            entries.append(Expectation(entry["clause"], mode, entry["reason"], entry["witness"]))
    return Expectations(str(path), str(data.get("engine", "")), str(data.get("version", "")), tuple(entries))


def default_xfails(engine_name: str, engine_version: str) -> Path | None:
    """The bundled expectations file for this engine release, if there is one."""
    candidate = XFAILS_DIR / f"{engine_name}-{engine_version}.toml"
    return candidate if candidate.exists() else None
