"""What a vLLM release actually builds: the spec fields its own code sets, read from its source.

Every module of the release's ``vllm`` package is read mechanically (``ast``, nothing is
imported): each call of a spec class of ``vllm/v1/kv_cache_interface.py`` (every class that
derives from ``KVCacheSpec`` there) and each ``replace(spec, ...)`` whose first argument's
kind is evident (a parameter or variable annotated with a spec class, a variable assigned a
spec constructor, ``self`` in a spec class's method). Per kind and field: the call sites that
set it (relative ``file:line``), and the literal values passed when the keyword is a constant
(``True``/``False``/``None``/int/str).

- A constructor call counts for its own class only (a field a subclass's call sets is not set
  on its base); so does a ``replace`` whose evident class the engine constructs itself (narrowed by
  ``isinstance(spec, FullAttentionSpec)``: not an MLA spec's); one on a class the engine never
  constructs (a base: ``AttentionSpec``) counts for every class derived from it.
- ``**name`` is resolved when ``name`` is assigned a ``dict(...)`` or ``{...}`` literal in the same
  function; positional arguments map to the dataclass's positional field order. A constructor
  call with arguments that cannot be read records :data:`ANY_FIELD` (none in 0.34.0).
- ``replace_as(spec, Target, drop=..., **changes)`` (:data:`REBUILD`, vLLM's helper) constructs
  ``Target`` with every field of ``spec``'s kind that ``Target`` has and that kind sets somewhere,
  as given there; a ``Target`` looked up in a ``{Kind: Kind}`` dict literal (the grouping's
  ``promotions``: ``SlidingWindowMLASpec`` to ``MLAAttentionSpec``) gives each pair of the dict.
- A ``replace`` whose first argument's kind is not evident but whose keywords are all fields of
  ``KVCacheSpec`` (``replace(spec, is_draft=True)`` on what a layer returned) counts for every
  kind, as ``inferred`` (it is a spec, of some kind). One with keywords no spec class has is
  not a spec's and is left out.

:func:`scan_source` is cached per source root (0.34.0: 3,604 modules read, 71 parsed, 2 to 4 s
on a 2-core machine; only files that call a spec class, ``replace`` with a spec field or
``replace_as`` are parsed, and only the statements around those calls walked; the AST reading is
:mod:`.producible_ast`). :class:`VllmProducible` is the adapter's ``ProducibleDomain`` capability
(:mod:`kvcontract.conformance.engines.protocol`).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import os
import pickle
import re
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kvcontract.conformance.engines.vllm import producible_ast
from kvcontract.conformance.engines.vllm.producible_ast import (
    NOT_LITERAL,
    SPEC_BASE,
    Found,
    Scope,
    find_calls,
    keywords_of,
    literal_of,
    name_of,
    positional_fields,
    read_classes,
    spec_classes,
)
from kvcontract.reports import cache_dir

INTERFACE_PATH = ("v1", "kv_cache_interface.py")
"""Where vLLM's spec classes live, relative to its package directory (another engine's: its
declared spec module, :meth:`VllmProducible.producible_source`)."""
REBUILD = "replace_as"
"""vLLM's ``replace_as(spec, target_cls, *, drop=(), **changes)`` (``kv_cache_interface``): ``spec``
rebuilt as another kind, its fields carried over (grouping's promotion of sliding-window kinds)."""
ANY_FIELD = "*"
"""The pseudo-field of a constructor call whose arguments cannot all be read (``**kwargs`` of
unknown content): any field may be set there, so none of that kind's is pinned."""


@dataclasses.dataclass(frozen=True)
class CallSite:
    """One place that sets a field: ``path:line`` relative to the package's parent, how
    (``constructor``, ``replace``, ``inferred`` replace) and the value when it is a literal."""

    path: str
    line: int
    how: str
    value: Any = NOT_LITERAL

    @property
    def literal(self) -> bool:
        return self.value is not NOT_LITERAL

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclasses.dataclass(frozen=True)
class ProducibleField:
    """One field of one engine kind as the engine's code sets it."""

    kind: str
    field: str
    sites: tuple[CallSite, ...]
    always_set: bool = False
    """Whether every constructor call of the kind passes it (its default is never built)."""

    @property
    def literals(self) -> tuple[Any, ...] | None:
        """The values passed, when every site passes a literal; None otherwise."""
        if not self.sites or any(not s.literal for s in self.sites):
            return None
        out: list[Any] = []
        for s in self.sites:
            if not any(s.value == v and type(s.value) is type(v) for v in out):
                out.append(s.value)
        return tuple(out)


@dataclasses.dataclass(frozen=True)
class ProducibleScan:
    """The scan of one source root: per engine kind, its constructor call sites and the fields set."""

    root: str
    kinds: tuple[str, ...]
    """Every spec class of the interface module (``KVCacheSpec`` and its subclasses)."""
    constructors: Mapping[str, tuple[CallSite, ...]]
    """Per kind, its own constructor calls (those that set no field too)."""
    fields: Mapping[str, Mapping[str, ProducibleField]]
    """Per kind, per field set somewhere: where (own constructors and replaces that reach it)."""
    files: int
    parsed: int
    seconds: float

    def sets(self, kind: str, name: str) -> bool:
        return name in self.fields.get(kind, {})


# -- the scan -------------------------------------------------------------------------------------


@functools.cache
def _scan_cached(root: str, extra: tuple[str, ...] = (), spec_files: tuple[str, ...] = ()) -> ProducibleScan:
    """The scan of ``root``, from the kit's disk cache (:func:`~kvcontract.reports.cache_dir`)
    when no ``.py`` file under it (nor this scanner) changed since it was stored: every worker
    of every run needs it, and parsing the release takes over a second. Any problem with the
    cache means a fresh scan."""
    roots = (Path(root), *(Path(e) for e in extra))
    path = _cache_path(roots, spec_files)
    if path is not None:
        try:
            with path.open("rb") as fh:
                cached = pickle.load(fh)
            if isinstance(cached, ProducibleScan) and cached.root == root:
                return cached
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError):
            pass
    scan = _scan(roots, tuple(Path(f) for f in spec_files))
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            with tmp.open("wb") as fh:
                pickle.dump(scan, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only cache: scan again next time
    return scan


def _cache_path(packages: tuple[Path, ...], spec_files: tuple[str, ...]) -> Path | None:
    """The cache file for ``packages`` as they are now: named by a digest of the scanner's own
    source (this module and its AST helpers), the spec files named and every ``.py`` file's
    path, size and modification time."""
    base = cache_dir()
    if base is None:
        return None
    digest = hashlib.sha256()
    try:
        for scanner in (Path(__file__), Path(producible_ast.__file__)):
            digest.update(scanner.read_bytes())
        digest.update(repr(spec_files).encode())
        for package in packages:
            digest.update(str(package).encode())
            for directory, dirs, files in os.walk(package):
                dirs.sort()
                for name in sorted(files):
                    if name.endswith(".py"):
                        st = os.stat(os.path.join(directory, name))
                        digest.update(f"{directory}/{name}:{st.st_size}:{st.st_mtime_ns};".encode())
    except OSError:
        return None
    return base / "producible" / f"{digest.hexdigest()[:32]}.pickle"


def scan_source(package_dir: str | os.PathLike[str], extra: tuple[str | os.PathLike[str], ...] = (),
                spec_files: tuple[str | os.PathLike[str], ...] = ()) -> ProducibleScan:
    """The spec fields the release under ``package_dir`` (its package directory) sets, per kind,
    with their call sites; cached per directory. ``spec_files``: the files defining the spec
    classes (default: vLLM's ``v1/kv_cache_interface.py`` there); ``extra``: more package
    directories whose calls count (a plugin's, whose spec files come after the base's)."""
    return _scan_cached(str(Path(package_dir).resolve()), tuple(str(Path(e).resolve()) for e in extra),
                        tuple(str(Path(f).resolve()) for f in spec_files))


def _scan(packages: tuple[Path, ...], spec_files: tuple[Path, ...] = ()) -> ProducibleScan:
    start = time.perf_counter()
    package = packages[0]
    interfaces = spec_files or (package.joinpath(*INTERFACE_PATH),)
    classes: dict[str, Any] = {}
    for interface in interfaces:
        if not interface.is_file():
            raise FileNotFoundError(f"{interface} is not a file (the spec classes of {package})")
        classes.update(read_classes(ast.parse(interface.read_text(encoding="utf-8"), str(interface))))
    mro = spec_classes(classes)
    positional = {k: positional_fields(k, classes, mro) for k in mro}
    all_fields = {k: {f for c in mro[k] for f, _ in classes[c].fields} for k in mro}
    wanted = {*mro, "replace", REBUILD}
    every_field = sorted({f for names in all_fields.values() for f in names})
    # Cheap filters first: a file is parsed only where it calls a spec class, or calls ``replace``
    # with a spec field as its first keyword (what every counted replace has); and only the
    # statements around those lines are walked.
    candidate = re.compile(r"Specs?\s*\(|replace\(|" + REBUILD + r"\(")
    replace_call = re.compile(r"replace\(\s*[\w.\[\]\"']+\s*,\s*(?:" + "|".join(every_field) + r")\s*=")
    kinds_set = set(mro)
    constructors: dict[str, list[CallSite]] = {k: [] for k in mro}
    sets: dict[str, dict[str, list[CallSite]]] = {k: {} for k in mro}
    files = parsed = 0
    for path, top in ((p, root.parent) for root in packages for p in sorted(root.rglob("*.py"))):
        files += 1
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if "Spec" not in text and "replace" not in text:
            continue
        lines = sorted({text.count("\n", 0, m.start()) + 1 for m in candidate.finditer(text)
                        if _wanted_at(text, m, kinds_set, replace_call)})
        if not lines:
            continue
        try:
            tree = ast.parse(text, str(path))
        except SyntaxError:
            continue
        parsed += 1
        rel = path.relative_to(top).as_posix()
        found: Found = []
        find_calls(tree, None, None, wanted, found, lines, {}, mro)
        scopes: dict[int, Scope] = {}
        for call, fn, owner, narrow in found:
            key = id(fn)
            if key not in scopes:
                scopes[key] = (Scope(fn.body, mro, fn.args, owner if owner in mro else None) if fn is not None
                               else Scope(tree.body, mro, None, None))
            _record(call, rel, scopes[key], narrow, mro, positional, all_fields, constructors, sets)
    _spread_replaces(sets, constructors, mro, all_fields)
    _carry(sets)
    fields = {k: {n: ProducibleField(k, n, tuple(s), _always(constructors[k], s)) for n, s in sorted(by.items())}
              for k, by in sets.items()}
    return ProducibleScan(root=str(package), kinds=tuple(mro), constructors={k: tuple(v) for k, v in constructors.items()},
                          fields=fields, files=files, parsed=parsed, seconds=round(time.perf_counter() - start, 3))


def _always(calls: list[CallSite], sites: list[CallSite]) -> bool:
    own = {(s.path, s.line) for s in sites if s.how in ("constructor", "rebuild")}
    return bool(calls) and all((c.path, c.line) in own for c in calls)


def _wanted_at(text: str, match: re.Match[str], kinds: set[str], replace_call: re.Pattern[str]) -> bool:
    """Whether a candidate match is a call of a spec class, or a ``replace`` with a spec field."""
    if match.group().startswith(REBUILD):
        return True
    if match.group().startswith("replace"):
        before = text[match.start() - 1] if match.start() else " "
        after_module = text.endswith("dataclasses.", 0, match.start())
        return (after_module or not (before.isalnum() or before in "_.")) and \
            replace_call.match(text, match.start()) is not None
    start = match.start()
    while start and (text[start - 1].isalnum() or text[start - 1] == "_"):
        start -= 1
    end = match.start() + (5 if match.group().startswith("Specs") else 4)
    return text[start:end] in kinds


def _record(node: ast.Call, rel: str, scope: Scope, narrow: Mapping[str, str], mro: Mapping[str, list[str]],
            positional: Mapping[str, list[str]], all_fields: Mapping[str, set[str]],
            constructors: dict[str, list[CallSite]], sets: dict[str, dict[str, list[CallSite]]]) -> None:
    called = name_of(node.func)
    if called is not None and called in mro:
        site = CallSite(rel, node.lineno, "constructor")
        constructors[called].append(site)
        pairs, opaque = keywords_of(node, scope)
        if opaque:  # any field may be set here: the kind's fields are not narrowed (ANY_FIELD)
            sets[called].setdefault(ANY_FIELD, []).append(site)
        pairs += [(n, a) for n, a in zip(positional[called], node.args, strict=False)
                  if not isinstance(a, ast.Starred)]
        for name, value in pairs:
            sets[called].setdefault(name, []).append(dataclasses.replace(site, value=literal_of(value)))
        return
    if called == REBUILD and len(node.args) >= 2:
        _record_rebuild(node, rel, scope, narrow, mro, all_fields, constructors, sets)
        return
    if called != "replace" or not node.args:
        return
    pairs, _opaque = keywords_of(node, scope)
    if not pairs:
        return
    target = node.args[0]
    kind = (narrow.get(target.id) or scope.types.get(target.id)) if isinstance(target, ast.Name) else None
    how = "replace"
    if kind is None:
        names = {n for n, _ in pairs}
        if not names <= all_fields.get(SPEC_BASE, set()):
            return  # not evidently a spec (a config, a batch descriptor)
        kind, how = SPEC_BASE, "inferred"
    excluded = narrow.get("!" + target.id, "") if isinstance(target, ast.Name) else ""
    for name, value in pairs:
        sets.setdefault(REPLACED, {}).setdefault(f"{kind}.{name}.{excluded}", []).append(
            CallSite(rel, node.lineno, how, literal_of(value)))


def _record_rebuild(node: ast.Call, rel: str, scope: Scope, narrow: Mapping[str, str],
                    mro: Mapping[str, list[str]], all_fields: Mapping[str, set[str]],
                    constructors: dict[str, list[CallSite]], sets: dict[str, dict[str, list[CallSite]]]) -> None:
    """``replace_as(spec, Target, drop=(...), **changes)``: a construction of ``Target`` passing every
    field of ``spec``'s kind that ``Target`` has (less ``drop``), and the changes."""
    source = node.args[0]
    source_kind = (narrow.get(source.id) or scope.types.get(source.id)) if isinstance(source, ast.Name) else None
    pairs, _opaque = keywords_of(node, scope)
    drop = {str(literal_of(e)) for name, value in pairs if name == "drop"
            for e in getattr(value, "elts", ()) if isinstance(literal_of(e), str)}
    changes = [(n, v) for n, v in pairs if n != "drop"]
    for src, target in scope.rebuilds(node.args[1], source_kind, mro):
        if target not in mro or src not in mro:
            continue
        site = CallSite(rel, node.lineno, "rebuild")
        constructors[target].append(site)
        carried = sorted((all_fields[src] & all_fields[target]) - drop - {n for n, _ in changes})
        for name in carried:  # counted once every site is known, where the source sets it (_carry)
            sets.setdefault(CARRIED, {}).setdefault(f"{src}.{target}.{name}", []).append(site)
        for name, value in changes:
            if name in all_fields[target]:
                sets[target].setdefault(name, []).append(dataclasses.replace(site, value=literal_of(value)))


CARRIED = "<carried>"
"""Where the scan keeps what a rebuild carries (``source.target.field`` -> sites)."""


def _carry(sets: dict[str, dict[str, list[CallSite]]]) -> None:
    """A field a rebuild carries counts for its target where its source kind sets it (else the
    source's default is carried: ``SlidingWindowMLASpec`` never sets ``head_size_v``)."""
    for key, sites in sets.pop(CARRIED, {}).items():
        src, target, name = key.split(".")
        if name not in sets[src]:
            continue
        literals = ProducibleField(src, name, tuple(sets[src][name])).literals  # carried as they were given
        sets[target].setdefault(name, []).extend(
            sites if literals is None else [dataclasses.replace(c, value=v) for c in sites for v in literals])


REPLACED = "<replaced>"
"""Where the scan keeps the replaces (``kind.field.excluded kind`` -> sites) until every constructor
is known (``excluded``: ``and not isinstance(spec, MLAAttentionSpec)``)."""


def _spread_replaces(sets: dict[str, dict[str, list[CallSite]]], constructors: Mapping[str, list[CallSite]],
                     mro: Mapping[str, list[str]], all_fields: Mapping[str, set[str]]) -> None:
    """A replace counts for its evident kind when the engine builds that kind itself (``isinstance(spec,
    FullAttentionSpec)`` in a layer that builds full-attention specs is no MLA layer's); for a kind the
    engine never builds (``AttentionSpec``, ``KVCacheSpec``: a base), for every kind derived from it."""
    for key, sites in sets.pop(REPLACED, {}).items():
        kind, name, excluded = key.split(".")
        reached = [kind] if constructors.get(kind) else [k for k, chain in mro.items() if kind in chain
                                                         and excluded not in chain]
        for k in reached:
            if name in all_fields[k]:
                sets[k].setdefault(name, []).extend(sites)


class VllmProducible:
    """The ``ProducibleDomain`` capability of the vLLM adapter: the fields the release's own code sets."""

    _package: Any
    _plugin_package: Any
    _plugin_classes: dict[str, type]
    interface: Any

    def producible_source(self) -> Path:
        """The engine's package directory the adapter loaded (a source tree's, or the installed one)."""
        return Path(getattr(self._package, "__file__", "") or "").resolve().parent

    def producible_scan(self) -> ProducibleScan:
        """The scan of the engine's package, and a plugin's (its spec files after the base's)."""
        interface = Path(getattr(self.interface, "__file__", "") or "").resolve()
        if self._plugin_package is None:
            return scan_source(self.producible_source(), spec_files=(interface,))
        plugin_dir = Path(getattr(self._plugin_package, "__file__", "") or "").resolve().parent
        plugin_files = tuple(dict.fromkeys(
            Path(getattr(sys.modules.get(c.__module__), "__file__", "") or "").resolve()
            for c in self._plugin_classes.values()))
        return scan_source(self.producible_source(), extra=(plugin_dir,), spec_files=(interface, *plugin_files))

    def producible_fields(self) -> Mapping[str, Mapping[str, ProducibleField]]:
        """Per engine kind (the contract kind's name), per field the engine's code sets: the call
        sites. A plugin's class counts for the kind it replaces, together with the base's."""
        fields = self.producible_scan().fields
        if not self._plugin_classes:
            return fields
        out = {k: dict(v) for k, v in fields.items()}
        for kind, cls in self._plugin_classes.items():
            for name, record in fields.get(cls.__name__, {}).items():
                have = out.setdefault(kind, {}).get(name)
                out[kind][name] = record if have is None else dataclasses.replace(
                    have, sites=have.sites + record.sites, always_set=have.always_set and record.always_set)
        return out
