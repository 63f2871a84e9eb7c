"""The corpus: real models' layer tables, as the contract's specs, with the settings they run with.

Every engine under check is fed the same corpus (the reference, the mutant catalogue,
third-party adapters), not only the adapter that built it. A table is what an engine's model
runner collects for one architecture (layer name -> spec, in the runner's order), built by
the engine's own model code (:mod:`kvcontract.conformance.engines.vllm.corpus` for vLLM), or
read from a user's layer-table file (their model, their fork). Its :class:`Settings` are the
ones the engine picks for that model: block size, cache dtype, layout, whether the hybrid
KV-cache manager is on, tensor-parallel size, the draft it is served with.

A corpus file is JSON: ``{"corpus": 1, "engine", "release", "digest", "tables": [...],
"skipped": [...], "specs": [...]}``; each table's layers index ``specs`` (a release's 400
tables share a few hundred distinct specs). A user's table file is the reference's layer-table
format (:mod:`kvcontract.reference.schema`) with an optional ``"settings"`` object and
``"architecture"``; a malformed one is a :class:`CorpusFileError` naming the entry and field.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import hashlib
import json
import os
import pickle
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvcontract.reference import KVCacheSpec
from kvcontract.reference.schema import LayerTableError, parse_layer_table

CORPUS_FORMAT = 1
BUILT_BY_MODEL_CODE = "model-code"
BUILT_BY_FILE = "file"


class CorpusFileError(ValueError):
    """A corpus or table file that cannot be read; the message names the file, entry and field."""


@dataclass(frozen=True)
class Settings:
    """What the engine runs a table with (what it picks for the model, unless a variant says)."""

    block_size: int | None = None
    cache_dtype: str = "auto"
    layout: str | None = None
    """The engine's layout name (vLLM: ``KVCacheLayout``, e.g. ``LBNHC``); ``B...``: block outermost."""
    hybrid: bool = True
    """The hybrid KV-cache manager on (vLLM's config decides per model)."""
    tensor_parallel_size: int = 1
    draft: str | None = None
    """The speculative-decoding method whose draft layers the table holds (``eagle3``, ``mtp``...)."""
    runner: str = "generate"
    model_dtype: str | None = None
    max_model_len: int | None = None
    backends: Mapping[str, str] = field(default_factory=dict)
    """Spec kind -> the attention backend(s) its layers run with."""

    @property
    def block_outermost(self) -> bool:
        return bool(self.layout) and str(self.layout).startswith("B")

    def to_json(self) -> dict[str, Any]:
        return {f.name: (dict(v) if isinstance(v := getattr(self, f.name), Mapping) else v)
                for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str = "settings") -> Settings:
        known = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise CorpusFileError(f"{where}: unknown setting {unknown[0]!r} (known: {', '.join(known)})")
        values: dict[str, Any] = {}
        for name, value in data.items():
            expected = _SETTING_TYPES[name]
            if value is None and name in _REQUIRED_SETTINGS:
                raise CorpusFileError(f"{where}.{name}: must not be null")
            wrong_bool = isinstance(value, bool) and expected is not bool  # bool is an int subclass
            if value is not None and (wrong_bool or not isinstance(value, expected)):
                raise CorpusFileError(f"{where}.{name}: {value!r} is not {_type_words(expected)}")
            values[name] = dict(value) if isinstance(value, Mapping) else value
        return cls(**values)


_SETTING_TYPES: dict[str, Any] = {
    "block_size": int, "cache_dtype": str, "layout": str, "hybrid": bool,
    "tensor_parallel_size": int, "draft": str, "runner": str, "model_dtype": str,
    "max_model_len": int, "backends": dict,
}
_REQUIRED_SETTINGS = frozenset({"cache_dtype", "hybrid", "tensor_parallel_size", "runner", "backends"})


def _type_words(tp: Any) -> str:
    return {int: "an integer", str: "a string", bool: "true or false", dict: "an object"}.get(tp, str(tp))


@dataclass(frozen=True)
class CorpusTable:
    """One model's layer table as the engine builds it, with its settings and provenance."""

    name: str
    """Unique in the corpus: the architecture, plus ``+<variant>`` (``+fp8``, ``+eagle3``)."""
    architecture: str
    layers: tuple[tuple[str, KVCacheSpec], ...]
    settings: Settings
    built_by: str = BUILT_BY_MODEL_CODE
    source: Mapping[str, Any] = field(default_factory=dict)
    """How it was built: model class, config class and values (each with its source), modules."""
    engine_only: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Layer name -> engine field values the contract's spec cannot hold (their repr)."""

    def specs(self) -> dict[str, KVCacheSpec]:
        return dict(self.layers)

    def kinds(self) -> dict[str, int]:
        """Spec kind -> how many layers have it."""
        out: dict[str, int] = {}
        for _, spec in self.layers:
            out[type(spec).__name__] = out.get(type(spec).__name__, 0) + 1
        return out


@dataclass(frozen=True)
class Skipped:
    """An architecture (or variant) that could not be built, with the precise reason."""

    name: str
    architecture: str
    reason: str


@dataclass
class Corpus:
    """Every table an engine release builds, and what it could not build."""

    engine: str
    release: str
    tables: list[CorpusTable]
    skipped: list[Skipped] = field(default_factory=list)
    digest: str = ""
    """A digest of the engine source the corpus was built from (what the cache is keyed by)."""
    meta: dict[str, Any] = field(default_factory=dict)
    """How it was built: stand-ins, build seconds, the kit's version."""

    def by_name(self) -> dict[str, CorpusTable]:
        return {t.name: t for t in self.tables}

    def architectures(self) -> list[str]:
        return sorted({t.architecture for t in self.tables})

    def with_tables(self, extra: Iterable[CorpusTable]) -> Corpus:
        """This corpus plus ``extra`` (a user's own tables); a name seen twice is an error."""
        tables = list(self.tables)
        names = {t.name for t in tables}
        for table in extra:
            if table.name in names:
                raise CorpusFileError(f"table {table.name!r} is in the corpus already (rename the file's "
                                      "\"model\")")
            names.add(table.name)
            tables.append(table)
        return dataclasses.replace(self, tables=tables)


# -- JSON ------------------------------------------------------------------------------------

def corpus_to_json(corpus: Corpus) -> dict[str, Any]:
    from kvcontract.conformance.contract.codec import spec_to_json

    index: dict[str, int] = {}
    specs: list[dict[str, Any]] = []
    tables = []
    for table in corpus.tables:
        layers = []
        for name, spec in table.layers:
            data = spec_to_json(spec)
            key = json.dumps(data, sort_keys=True)
            if key not in index:
                index[key] = len(specs)
                specs.append(data)
            layers.append([name, index[key]])
        tables.append({"name": table.name, "architecture": table.architecture, "built_by": table.built_by,
                       "settings": table.settings.to_json(), "source": dict(table.source),
                       "engine_only": {k: dict(v) for k, v in table.engine_only.items()},
                       "layers": layers})
    return {"corpus": CORPUS_FORMAT, "engine": corpus.engine, "release": corpus.release,
            "digest": corpus.digest, "meta": corpus.meta, "tables": tables,
            "skipped": [dataclasses.asdict(s) for s in corpus.skipped], "specs": specs}


def corpus_from_json(data: Mapping[str, Any], where: str = "corpus") -> Corpus:
    from kvcontract.conformance.contract.codec import spec_from_json

    if data.get("corpus") != CORPUS_FORMAT:
        raise CorpusFileError(f"{where}: not a corpus file of format {CORPUS_FORMAT} "
                              f"(\"corpus\": {data.get('corpus')!r})")
    try:
        specs = [spec_from_json(s) for s in data["specs"]]
        tables = [CorpusTable(name=t["name"], architecture=t["architecture"],
                              layers=tuple((str(n), specs[i]) for n, i in t["layers"]),
                              settings=Settings.from_json(t["settings"], f"{where}: {t['name']}: settings"),
                              built_by=t.get("built_by", BUILT_BY_MODEL_CODE), source=t.get("source", {}),
                              engine_only=t.get("engine_only", {}))
                  for t in data["tables"]]
        skipped = [Skipped(**s) for s in data.get("skipped", [])]
    except (KeyError, IndexError, TypeError, LayerTableError) as exc:
        raise CorpusFileError(f"{where}: malformed corpus ({type(exc).__name__}: {exc})") from None
    return Corpus(engine=str(data["engine"]), release=str(data["release"]), tables=tables, skipped=skipped,
                  digest=str(data.get("digest", "")), meta=dict(data.get("meta", {})))


def write_corpus(corpus: Corpus, path: str | Path) -> None:
    """The corpus as JSON (gzip where the name ends in ``.gz``), written atomically."""
    from kvcontract.reports import write_atomic

    path = Path(path)
    text = json.dumps(corpus_to_json(corpus), separators=(",", ":"), sort_keys=False)
    if path.suffix == ".gz":
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))
        tmp.replace(path)
    else:
        write_atomic(path, text)


def read_corpus(path: str | Path) -> Corpus:
    """The corpus in file ``path``; parsed once per machine (kept in the kit's cache, keyed by the
    file's bytes and the kit's source: a check's every worker reads it, 0.3 s each from JSON)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CorpusFileError(f"{path}: cannot read a corpus: {exc}") from None
    kept = _parsed_path(raw)
    if kept is not None:
        try:
            corpus = pickle.loads(kept.read_bytes())
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError):
            pass
        else:
            if isinstance(corpus, Corpus):
                return corpus
    try:
        text = gzip.decompress(raw).decode("utf-8") if raw[:2] == b"\x1f\x8b" else raw.decode("utf-8")
        data = json.loads(text)
    except (OSError, ValueError) as exc:
        raise CorpusFileError(f"{path}: cannot read a corpus: {exc}") from None
    corpus = corpus_from_json(data, str(path))
    if kept is not None:
        with contextlib.suppress(OSError):
            kept.parent.mkdir(parents=True, exist_ok=True)
            tmp = kept.with_name(f".{kept.name}.{os.getpid()}")
            tmp.write_bytes(pickle.dumps(corpus, protocol=pickle.HIGHEST_PROTOCOL))
            tmp.replace(kept)
    return corpus


def _parsed_path(raw: bytes) -> Path | None:
    from kvcontract.reports import cache_dir, kit_digest

    base = cache_dir()
    if base is None:
        return None
    return base / "corpus-parsed" / f"{hashlib.sha256(raw).hexdigest()[:20]}-{kit_digest()}.pkl"


# -- a user's table file ---------------------------------------------------------------------

def read_table_file(path: str | Path) -> CorpusTable:
    """A user's layer-table file as a corpus member (:class:`CorpusFileError` on bad input)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CorpusFileError(f"{path}: cannot read: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise CorpusFileError(f"{path}: not JSON: {exc}") from None
    return table_from_file_json(data, str(path))


def table_from_file_json(data: Any, where: str) -> CorpusTable:
    if not isinstance(data, Mapping):
        raise CorpusFileError(f"{where}: a table file is a JSON object with \"model\" and \"layers\"")
    rest = {k: v for k, v in data.items() if k not in ("settings", "architecture", "source")}
    raw_settings = data.get("settings", {})
    if not isinstance(raw_settings, Mapping):
        raise CorpusFileError(f"{where}: settings: must be an object")
    settings = Settings.from_json(raw_settings, f"{where}: settings")
    try:
        table = parse_layer_table(rest, where)
    except LayerTableError as exc:
        raise CorpusFileError(str(exc)) from None
    architecture = data.get("architecture", table.model)
    if not isinstance(architecture, str):
        raise CorpusFileError(f"{where}: architecture: must be a string")
    source = data.get("source", {})
    return CorpusTable(name=table.model, architecture=architecture,
                       layers=tuple(table.specs_by_layer.items()), settings=settings,
                       built_by=f"{BUILT_BY_FILE}:{where}",
                       source={"description": table.description, **(source if isinstance(source, Mapping) else {})})


_INDEX = re.compile(r"^(.*?)(\d+)(\D*)$")


def _compress(names: Sequence[str]) -> list[str]:
    """Runs of names that differ only in one number -> ``prefix{a..b}suffix`` patterns."""
    out: list[str] = []
    run: list[tuple[str, int, str]] = []

    def flush() -> None:
        if len(run) > 2:
            out.append(f"{run[0][0]}{{{run[0][1]}..{run[-1][1]}}}{run[0][2]}")
        else:
            out.extend(f"{a}{n}{b}" for a, n, b in run)
        run.clear()

    for name in names:
        match = _INDEX.match(name)
        if match is None:
            flush()
            out.append(name)
            continue
        part = (match.group(1), int(match.group(2)), match.group(3))
        follows = bool(run) and (run[-1][0], run[-1][2]) == (part[0], part[2]) \
            and part[1] == run[-1][1] + 1 and str(part[1]) == match.group(2)
        if follows:
            run.append(part)
            continue
        flush()
        run.append(part)
    flush()
    return out


def table_to_file_json(table: CorpusTable) -> dict[str, Any]:
    """The table as a layer-table file (:func:`read_table_file` reads it back equal)."""
    from kvcontract.conformance.contract.codec import spec_to_json

    groups: dict[str, tuple[dict[str, Any], list[str]]] = {}
    order: list[str] = []
    for name, spec in table.layers:
        data = spec_to_json(spec)
        key = json.dumps(data, sort_keys=True)
        if key not in groups:
            groups[key] = (data, [])
            order.append(key)
        groups[key][1].append(name)
    description = str(table.source.get("description") or
                      f"{table.architecture}: built by {table.built_by} ({len(table.layers)} layers)")
    return {"model": table.name, "architecture": table.architecture, "description": description,
            "settings": table.settings.to_json(),
            "layers": [{"names": _compress(groups[k][1]), "spec": groups[k][0]} for k in order]}


# -- the corpus a process's laws are fed (a worker's tasks name it) ---------------------------

_CURRENT: dict[str, Any] = {"path": None, "corpus": None}


def use_corpus(path: str | None) -> None:
    """The corpus file this process's laws are fed from now on (None: none); read once per path."""
    if path == _CURRENT["path"]:
        return
    _CURRENT["path"] = path
    _CURRENT["corpus"] = read_corpus(path) if path else None


def current_corpus() -> Corpus | None:
    """The corpus :func:`use_corpus` named, if any."""
    corpus: Corpus | None = _CURRENT["corpus"]
    return corpus


def distinct_tables(corpus: Corpus) -> list[tuple[CorpusTable, list[str]]]:
    """The corpus's tables up to what a planner can tell apart (the same specs in the same order,
    whatever the layer names): one representative each, with the names of every table it stands
    for (the representative first). Worked out once per corpus object."""
    held = _DISTINCT.get(id(corpus))
    if held is not None and held[0] is corpus:
        return held[1]
    if len(_DISTINCT) >= 4:
        _DISTINCT.clear()
    found = _distinct_tables(corpus)
    _DISTINCT[id(corpus)] = (corpus, found)
    return found


_DISTINCT: dict[int, tuple[Corpus, list[tuple[CorpusTable, list[str]]]]] = {}


def _distinct_tables(corpus: Corpus) -> list[tuple[CorpusTable, list[str]]]:
    seen: dict[tuple[Any, ...], tuple[CorpusTable, list[str]]] = {}
    for table in corpus.tables:
        key = (tuple(spec for _, spec in table.layers), table.settings.hybrid, table.settings.layout)
        held = seen.get(key)
        if held is None:
            seen[key] = (table, [table.name])
        else:
            held[1].append(table.name)
    return list(seen.values())


def planning_key(table: CorpusTable) -> tuple[Any, ...]:
    """What a planner can tell apart of a table: per layer its kind, its page as a multiple of the
    table's common page unit, its block size and its other ALLOCATION values, in order, and the
    settings it is planned with. Planning decides groups from kinds, page relations, block sizes and
    allocation fields, and sizes blocks from a budget the kit derives from the table's own pages;
    two tables with the same key get plans equal up to that scale (head counts and widths scaled)."""
    import math

    from kvcontract.reference import Role, role_of

    pages = [spec.page_size_bytes for _, spec in table.layers]
    unit = math.gcd(*pages) if pages else 1
    layers = []
    for _, spec in table.layers:
        fields = _allocation_fields(type(spec), role_of, Role.ALLOCATION)
        layers.append((type(spec), spec.page_size_bytes // unit, spec.block_size,
                       tuple(getattr(spec, name) for name in fields)))
    return (tuple(layers), table.settings.hybrid, table.settings.layout)


_ALLOCATION: dict[type, tuple[str, ...]] = {}


def _allocation_fields(kind: type, role_of: Any, allocation: Any) -> tuple[str, ...]:
    if kind not in _ALLOCATION:
        _ALLOCATION[kind] = tuple(f.name for f in dataclasses.fields(kind)
                                  if role_of(f) is allocation and f.name != "block_size")
    return _ALLOCATION[kind]


def planning_classes(corpus: Corpus) -> list[tuple[CorpusTable, list[str]]]:
    """The corpus's tables by :func:`planning_key`: one representative each (a base architecture's
    text-generation table where the class has one), with the names of the tables of its class. The
    table laws (grouping, planning) judge one table per class; worked out once per corpus."""
    held = _CLASSES.get(id(corpus))
    if held is not None and held[0] is corpus:
        return held[1]
    if len(_CLASSES) >= 4:
        _CLASSES.clear()
    members: dict[tuple[Any, ...], list[tuple[CorpusTable, list[str]]]] = {}
    for table, names in distinct_tables(corpus):
        members.setdefault(planning_key(table), []).append((table, names))
    found = []
    for group in members.values():
        rep = min(group, key=lambda tn: _representative_rank(tn[0]))[0]
        names = [n for _, ns in group for n in ns]
        found.append((rep, [rep.name, *[n for n in names if n != rep.name]]))
    _CLASSES[id(corpus)] = (corpus, found)
    return found


_CLASSES: dict[int, tuple[Corpus, list[tuple[CorpusTable, list[str]]]]] = {}


def _representative_rank(table: CorpusTable) -> tuple[bool, bool, int, str]:
    """Which table of a class stands for it: a base architecture's table before a variant's, a
    text-generation model's (``...ForCausalLM``) first, then the shortest name."""
    return ("+" in table.name, not table.architecture.endswith("ForCausalLM"), len(table.name), table.name)
