"""The examples a check's workers would each work out for themselves, worked out once and shared.

A check runs the same laws in two workers (a normal and a ``python -O`` interpreter). What
they judge before any engine answers is the same in both: each shape's enumerated examples
and its random draws (a seed draws the same sequence in every process, :mod:`.draws`). Drawing
a default check's 17 shapes took 5.2 s in each worker, enumerating them 0.65 s.

So before its first clause the ``-O`` worker *prepares* (:func:`prepare`): it claims shapes no
worker has claimed (a file created with ``O_EXCL`` in the run's share directory), works out
each one's examples, their facts (:mod:`.facts`) and the reference's answers the shape
declares (``Shape.answers``), and writes them there (one pickle per shape, enumerated and
drawn examples together, so an object in both stays one object). When the examples are only
enumerated (quick) it claims them all first; when they are drawn too, it claims them one at a
time from the last shape back, and the normal worker claims the first ones it needs, so that
neither pass waits on the other's share (:data:`~kvcontract.conformance.run.execution.CLAIM_ALL_PROFILES`).
A clause takes its shape's examples from there (:func:`shared`): from memory, from the file,
or after waiting for a claimed file being written; a shape nobody claimed is claimed and worked
out by the clause that needs it, and when a claimed file does not come (the other worker died,
the engine hung it) the clause works it out itself. The files are written by
the check's own workers for each other, in a directory the check creates and removes.

What they write is kept between checks (:func:`seed_run`, :func:`keep_run`): a *store* in the
kit's cache, one folder per digest of the kit's own source, the files named by shape, domain
mode, a digest of the engine's domain, budget and seed. A check links what the store holds into
its directory, claimed, before its workers start, and adds what they wrote after; a second
check of the same engine with the same kit works nothing out again (a quick check's workers
spent 1.9 s each on it). ``KVCONTRACT_CACHE_DIR=off`` keeps nothing.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from kvcontract.conformance.contract.model import Law
from kvcontract.conformance.run.worker import Emit, begin

WAIT_S = 2.5
"""How long a clause waits for a shape another worker has claimed (it takes at most 0.7 s to
draw one); less than the per-example limit a hung engine leaves (3 s)."""

Prepared = tuple[Any, ...]
"""A shape as shared: its ``(enumerated, drawn)`` example tuples, then what the preparing worker
adds (their facts and the reference's answers, :func:`kvcontract.conformance.run.execution.prepare_shared`)."""

_DIR: Path | None = None
_HELD: dict[str, Prepared] = {}


def use_share(path: str | None) -> None:
    """Share through ``path`` (a check's share directory), or not at all (None)."""
    global _DIR
    directory = Path(path) if path else None
    if directory != _DIR:
        _DIR = directory
        _HELD.clear()


STORE_KEPT = 64
"""Files the store keeps (the most recently used); a shape's file is a few hundred kB."""


def domain_key(domain_mode: str, domain: Any) -> str:
    """``domain_mode`` with a digest of the engine's ``domain`` (its kinds, pinned fields and value
    sets, written in order): shapes shared across checks are the same engine's."""
    parts = [
        ",".join(k.__name__ for k in domain.kinds),
        ";".join(f"{k.__name__}:{','.join(sorted(names))}" for k, names in domain.pinned),
        ";".join(f"{key}:{values!r}" for key, values in domain.values),
        ";".join(f"{k.__name__}.{name}:{values!r}" for k, name, values in domain.restricted),
    ]
    return f"{domain_mode}-{hashlib.sha256('|'.join(parts).encode()).hexdigest()[:12]}"


def store_dir() -> Path | None:
    """The store for this kit's source, None when the kit's cache is off."""
    from kvcontract.reports import cache_dir, kit_digest

    base = cache_dir()
    return None if base is None else base / "share" / kit_digest()


def seed_run(directory: Path, store: Path | None) -> int:
    """Link every shape file ``store`` holds into the check's ``directory``, claimed (no worker
    works it out again). Returns how many."""
    if store is None or not store.is_dir():
        return 0
    linked = 0
    for kept in store.glob("*.pkl"):
        target = directory / kept.name
        try:
            os.link(kept, target)
        except OSError:
            continue
        (directory / f"{kept.name[:-len('.pkl')]}.claim").touch()
        os.utime(kept)  # used: kept longest
        linked += 1
    return linked


def keep_run(directory: Path, store: Path | None) -> None:
    """Add the shape files the check's workers wrote to ``store``; keep its newest :data:`STORE_KEPT`
    files and drop the stores of other kit sources. A file that cannot be kept is left."""
    if store is None:
        return
    try:
        store.mkdir(parents=True, exist_ok=True)
        for written in directory.glob("*.pkl"):
            target = store / written.name
            if not target.exists():
                tmp = store / f".{written.name}.{os.getpid()}"
                tmp.write_bytes(written.read_bytes())
                tmp.replace(target)
        kept = sorted(store.glob("*.pkl"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in kept[STORE_KEPT:]:
            old.unlink(missing_ok=True)
        for other in store.parent.iterdir():
            if other != store and other.is_dir():
                for f in other.iterdir():
                    f.unlink(missing_ok=True)
                other.rmdir()
    except OSError:
        return


def _name(law_: Law, domain_mode: str, budget: int, seed_value: int) -> str:
    return f"{law_.shape.name}-{domain_mode}-{budget}-{seed_value}"


def prepare(laws: Sequence[Law], work_out: Any, *, domain_mode: str, budgets: dict[str, int],
            seed_value: int, emit: Emit | None = None, claim_all: bool = True) -> list[str]:
    """Claim and write each shape of ``laws`` no other worker has claimed, in order;
    ``work_out(law_)`` gives a shape's (enumerated, drawn) examples; ``budgets``: the random
    examples per clause. ``claim_all``: every shape claimed first, then worked out (the other
    worker waits for them all); else each claimed as its turn comes (the other claims those it
    needs before then). Returns the shapes this worker wrote."""
    if _DIR is None:
        return []
    written: list[str] = []
    claimed = _claimed(_DIR, laws, domain_mode, budgets, seed_value)
    for name, law_ in list(claimed) if claim_all else claimed:
        begin(emit, {"clause": law_.clause, "phase": "prepare"}, name)
        examples = work_out(law_)
        _HELD[name] = examples
        part = _DIR / f"{name}.part{os.getpid()}"
        try:
            part.write_bytes(pickle.dumps(examples, protocol=pickle.HIGHEST_PROTOCOL))
            part.replace(_DIR / f"{name}.pkl")
        except OSError:
            return written
        written.append(name)
    return written


def _claimed(directory: Path, laws: Sequence[Law], domain_mode: str, budgets: dict[str, int],
             seed_value: int) -> Iterator[tuple[str, Law]]:
    """Each shape of ``laws`` this worker claims in ``directory``, as ``(name, law)`` in order, each
    claimed when asked for (a list of them: all at once); none more once the directory is gone."""
    seen: set[str] = set()
    for law_ in laws:
        name = _name(law_, domain_mode, budgets[law_.clause], seed_value)
        if name in seen:
            continue
        seen.add(name)
        try:
            claim = os.open(directory / f"{name}.claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            continue
        except OSError:
            return  # the directory is gone: the check is ending
        os.close(claim)
        yield name, law_


def shared(law_: Law, *, domain_mode: str, budget: int, seed_value: int) -> Prepared | None:
    """``law_``'s shape as a worker prepared it (:data:`Prepared`), or None: not
    sharing, never claimed, or not written within :data:`WAIT_S`."""
    if _DIR is None:
        return None
    name = _name(law_, domain_mode, budget, seed_value)
    held = _HELD.get(name)
    if held is not None:
        return held
    path, claim = _DIR / f"{name}.pkl", _DIR / f"{name}.claim"
    deadline = time.monotonic() + WAIT_S
    while not path.exists():
        if not claim.exists() or time.monotonic() > deadline:
            return None
        time.sleep(0.01)
    try:
        loaded: Prepared = pickle.loads(path.read_bytes())
    except (OSError, pickle.UnpicklingError, EOFError):
        return None
    _HELD[name] = loaded
    return loaded
