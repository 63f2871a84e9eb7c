"""Which corpus a run feeds the engine under check, found before the engine loads.

The corpus (:mod:`kvcontract.conformance.contract.corpus`) is the same input for every engine:

- ``--corpus auto`` (the default): an engine whose adapter builds a corpus of its own (vLLM,
  installed or a source tree) gets the one built from exactly its source — shipped with the
  kit, else in the kit's cache, else built now (minutes, with progress; cached after); every
  other engine (the reference, the mutant catalogue, a third-party adapter) gets the corpus of
  the kit's pinned vLLM release, shipped with the kit;
- ``--corpus FILE``: that corpus file; ``--corpus none``: no corpus (the contract's own inputs only);
- ``--tables FILE ...``: a user's layer-table files, members like any other (their model, their
  fork), added to whichever corpus.

A bad file is a :class:`~kvcontract.usage.UsageError` naming the file, the entry and the field.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kvcontract.conformance.contract.corpus import (
    CorpusFileError,
    read_corpus,
    read_table_file,
    write_corpus,
)
from kvcontract.conformance.engines.protocol import SOURCE_SEPARATOR
from kvcontract.usage import UsageError

CORPUS_CHOICES = ("auto", "none")
BUILDS_OWN: dict[str, tuple[str, str]] = {"vllm": ("vllm", "vllm")}
"""Engine name -> (package, distribution) of an adapter whose engine's own model code builds its
corpus (:mod:`kvcontract.conformance.engines.vllm.corpus`)."""


@dataclass(frozen=True)
class Chosen:
    """The corpus a run uses: its file (None: no corpus) and, in words, where it comes from."""

    path: Path | None
    how: str
    warning: str = ""
    """Set where the run is fed less than it should be (the engine's own corpus could not be built):
    the check's report carries it."""


def resolve(engine_name: str, option: str = "auto", tables: Sequence[str] = (), *,
            progress: Callable[[str], None] | None = None, scratch: str | None = None) -> Chosen:
    """The corpus for ``engine_name`` (``name`` or ``name@DIR``) as ``--corpus`` and ``--tables`` say."""
    extra = []
    for path in tables:
        try:
            extra.append(read_table_file(path))
        except CorpusFileError as exc:
            raise UsageError(f"--tables: {exc}") from None
    chosen = _base(engine_name, option, progress)
    if not extra:
        return chosen
    from kvcontract.conformance.contract.corpus import Corpus

    try:
        corpus = read_corpus(chosen.path) if chosen.path else Corpus(engine="", release="", tables=[])
        merged = corpus.with_tables(extra)
    except CorpusFileError as exc:
        raise UsageError(f"--tables: {exc}") from None
    folder = Path(scratch or tempfile.mkdtemp(prefix="kvcontract-corpus-"))
    target = folder / "corpus-with-tables.json"
    write_corpus(merged, target)
    return Chosen(target, f"{chosen.how} + {len(extra)} table file{'s' * (len(extra) != 1)}")


def _base(engine_name: str, option: str, progress: Callable[[str], None] | None) -> Chosen:
    if option == "none":
        return Chosen(None, "none")
    if option != "auto":
        path = Path(option)
        if not path.is_file():
            raise UsageError(f"--corpus {option}: no such file (or give auto / none)")
        try:
            corpus = read_corpus(path)
        except CorpusFileError as exc:
            raise UsageError(f"--corpus: {exc}") from None
        return Chosen(path, f"{path} ({len(corpus.tables)} tables of {corpus.engine} {corpus.release})")
    from kvcontract.conformance.engines.vllm import corpus as vllm_corpus

    name, _, source = engine_name.partition(SOURCE_SEPARATOR)
    own = BUILDS_OWN.get(name)
    if own is None:
        return _pinned(vllm_corpus, f"the pinned vLLM {vllm_corpus.PINNED_RELEASE}'s (engine {name} builds none)")
    package, distribution = own
    ident = vllm_corpus.identity(package, source or None, distribution)
    if ident is None:
        return _pinned(vllm_corpus, f"the pinned vLLM {vllm_corpus.PINNED_RELEASE}'s ({name} is not installed here)")
    found = vllm_corpus.find(ident)
    if found is not None:
        kind = "shipped" if found.parent == vllm_corpus.SHIPPED_DIR else "cached"
        return Chosen(found, f"{kind}, built from {name} {ident.release}'s model code")
    say = progress or (lambda line: None)
    say(f"[corpus] no corpus of {name} {ident.release} from {ident.where} yet: building it from its model "
        "code (every registered architecture, in supervised workers; a few minutes, cached after)")
    env = dict(os.environ)
    if source:
        env["PYTHONPATH"] = os.pathsep.join([source, *filter(None, [env.get("PYTHONPATH")])])

    def each(done: int, total: int, table: str, outcome: str) -> None:
        if done == total or done % 50 == 0:
            say(f"[corpus] {done}/{total} built or skipped (last: {table}: {outcome[:60]})")

    try:
        path = vllm_corpus.build_and_keep(ident, env=env, progress=each)
    except Exception as exc:  # noqa: BLE001 - a corpus that cannot be built: the run goes on without
        # Not another release's corpus: its tables are models this engine may not have, so its
        # "reachable" claims would rest on someone else's code.
        why = (f"the corpus of {name} {ident.release} could not be built from its model code "
               f"({type(exc).__name__}: {exc}); checked without a corpus: no defect can be shown reachable")
        say(f"[corpus] {why}")
        return Chosen(None, "none (the build failed)", warning=why)
    return Chosen(path, f"built now from {name} {ident.release}'s model code (cached)")


def _pinned(vllm_corpus: object, how: str) -> Chosen:
    shipped = vllm_corpus.shipped_path(vllm_corpus.PINNED_RELEASE)  # type: ignore[attr-defined]
    return Chosen(shipped if shipped.is_file() else None, how if shipped.is_file() else "none (not shipped)")
