"""``kvcontract tables``: the corpus of real models a check feeds the engine.

Lists the corpus (one line per architecture: layers, kinds, settings, how it was built; the
architectures that could not be built, counted by reason), shows one table, exports one as a
layer-table file (which ``--tables`` takes back, in ``check`` and ``plan``), or builds the
corpus of the installed vLLM (or a source tree) from its own model code. Exit 0; 1 when a build
built nothing; 2 on a usage error (an unknown table, a malformed table file naming the entry
and field).
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from kvcontract.conformance.cli.options import add_corpus, add_engine, add_json, writable_file
from kvcontract.conformance.contract.corpus import (
    Corpus,
    CorpusTable,
    read_corpus,
    table_to_file_json,
)
from kvcontract.usage import UsageError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "tables", help="the corpus: real models' layer tables, built by the engine's own model code",
        description="List the corpus a check feeds the engine (every architecture the engine registers, "
                    "built by its own model code; your own --tables files), show or export one table, "
                    "or build the corpus of the installed engine or a source tree.")
    p.add_argument("table", nargs="?", help="show this table (a name from the list)")
    add_engine(p, default="vllm", what="whose corpus (an engine that builds none is fed the pinned vLLM's)")
    p.add_argument("--engine-path", metavar="DIR", help="the corpus of a source checkout (built if not cached)")
    add_corpus(p)
    p.add_argument("--all", action="store_true", help="list every table (each cache-dtype variant too)")
    p.add_argument("--skipped", action="store_true", help="list every architecture not built, with its reason")
    p.add_argument("--export", metavar="FILE", help="write the table as a layer-table file (with its settings)")
    p.add_argument("--build", action="store_true",
                   help="build the corpus now from the engine's model code (in workers; a few minutes)")
    p.add_argument("--out", metavar="FILE", help="with --build: write the corpus here (default: the kit's cache)")
    p.add_argument("--jobs", type=int, default=2, metavar="N", help="with --build: workers side by side (default 2)")
    add_json(p, "the listing (or the table) as JSON")
    p.set_defaults(func=run)


def _engine_name(args: argparse.Namespace) -> str:
    from kvcontract.conformance.engines.protocol import SOURCE_SEPARATOR

    if args.engine_path:
        if not Path(args.engine_path).is_dir():
            raise UsageError(f"--engine-path {args.engine_path}: no such directory")
        return f"{args.engine}{SOURCE_SEPARATOR}{Path(args.engine_path).resolve()}"
    return str(args.engine)


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _build(args: argparse.Namespace) -> int:
    from kvcontract.conformance.engines.corpora import BUILDS_OWN
    from kvcontract.conformance.engines.vllm import corpus as vllm_corpus

    if args.engine not in BUILDS_OWN:
        raise UsageError(f"--build: engine {args.engine!r} builds no corpus of its own "
                         f"(engines that do: {', '.join(BUILDS_OWN)})")
    if args.jobs < 1:
        raise UsageError("--jobs must be >= 1")
    writable_file(args.out, "--out")
    package, distribution = BUILDS_OWN[args.engine]
    ident = vllm_corpus.identity(package, args.engine_path, distribution)
    if ident is None:
        raise UsageError(f"--build: {args.engine} is not installed here (and no --engine-path)")
    _say(f"building the corpus of {args.engine} {ident.release} ({ident.where}) with {args.jobs} workers ...")

    def each(done: int, total: int, table: str, outcome: str) -> None:
        if done == total or done % 25 == 0:
            _say(f"  {done}/{total} ({table}: {outcome[:70]})")

    import os

    env = dict(os.environ)
    if args.engine_path:
        env["PYTHONPATH"] = os.pathsep.join([str(Path(args.engine_path).resolve()),
                                             *filter(None, [env.get("PYTHONPATH")])])
    path = vllm_corpus.build_and_keep(ident, env=env, jobs=args.jobs, progress=each,
                                      out=Path(args.out) if args.out else None)
    corpus = read_corpus(path)
    print(f"{path}: {_headline(corpus)} in {corpus.meta.get('build_seconds', '?')} s")
    return 0 if corpus.tables else 1


def _headline(corpus: Corpus) -> str:
    built = {t.architecture for t in corpus.tables}
    with_kv = {t.architecture for t in corpus.tables if t.layers}
    skipped = {s.architecture for s in corpus.skipped} - built
    return (f"{len(built)} architectures built ({len(with_kv)} with KV-cache layers), {len(corpus.tables)} tables, "
            f"{len(skipped)} architectures not built")


def _settings_text(t: CorpusTable) -> str:
    s = t.settings
    parts = [f"block {s.block_size}", s.cache_dtype, s.layout or "-", "hybrid" if s.hybrid else "hybrid off"]
    if s.tensor_parallel_size != 1:
        parts.append(f"tp{s.tensor_parallel_size}")
    if s.draft:
        parts.append(f"draft {s.draft}")
    return ", ".join(parts)


def _kinds_text(t: CorpusTable) -> str:
    return " ".join(f"{k.removesuffix('Spec')}x{n}" for k, n in sorted(t.kinds().items())) or "(no KV cache)"


def _listing(corpus: Corpus, how: str, every: bool) -> list[str]:
    lines = [f"corpus of {corpus.engine} {corpus.release} ({how}): {_headline(corpus)}"]
    by_arch: dict[str, list[CorpusTable]] = {}
    for t in corpus.tables:
        by_arch.setdefault(t.architecture, []).append(t)
    for arch in sorted(by_arch):
        shown = by_arch[arch] if every else by_arch[arch][:1]
        for t in shown:
            more = len(by_arch[arch]) - 1
            variants = f" (+{more} variant{'s' * (more != 1)})" if more and not every else ""
            built = "" if t.built_by == "model-code" else f" [{t.built_by}]"
            lines.append(f"  {t.name:<44} {len(t.layers):>4} layers  {_kinds_text(t):<40} {_settings_text(t)}"
                         f"{variants}{built}")
    from kvcontract.conformance.engines.vllm.corpus import reason_class

    reasons = Counter(reason_class(s.reason) for s in corpus.skipped
                      if s.architecture not in by_arch)
    if reasons:
        lines.append(f"not built ({sum(reasons.values())}; --skipped lists each with its reason):")
        lines += [f"  {n:>4}  {r}" for r, n in reasons.most_common()]
    return lines


def _show(t: CorpusTable) -> list[str]:
    data = table_to_file_json(t)
    lines = [f"{t.name}: {t.architecture}, {len(t.layers)} layers, built by {t.built_by}",
             f"  settings: {_settings_text(t)}; backends: "
             f"{', '.join(f'{k}={v}' for k, v in t.settings.backends.items()) or '-'}"]
    source = t.source.get("config") if isinstance(t.source.get("config"), dict) else None
    if source:
        lines.append(f"  config: {source.get('source', source.get('class', ''))}")
    if t.source.get("model_class"):
        lines.append(f"  model class: {t.source['model_class']}")
    for entry in data["layers"]:
        spec = entry["spec"]
        fields = ", ".join(f"{k}={v}" for k, v in spec.items() if k != "kind")
        lines.append(f"  {', '.join(entry['names'])}")
        lines.append(f"      {spec['kind']}({fields})")
    return lines


def _find(corpus: Corpus, name: str) -> CorpusTable:
    tables = corpus.by_name()
    if name in tables:
        return tables[name]
    close = difflib.get_close_matches(name, list(tables), n=3, cutoff=0.6) or \
        [n for n in tables if name.lower() in n.lower()][:5]
    hint = f"; did you mean {', '.join(close)}?" if close else "; `kvcontract tables` lists them"
    raise UsageError(f"kvcontract tables: no table {name!r} in the corpus{hint}")


def run(args: argparse.Namespace) -> int:
    writable_file(args.json, "--json")
    writable_file(args.export, "--export")
    if args.build:
        return _build(args)
    if args.export and not args.table:
        raise UsageError("--export needs a table name")
    from kvcontract.conformance.engines.corpora import resolve

    chosen = resolve(_engine_name(args), args.corpus, args.tables, progress=_say)
    if chosen.path is None:
        print("no corpus (--corpus none)")
        return 0
    corpus = read_corpus(chosen.path)
    if args.table:
        table = _find(corpus, args.table)
        if args.export:
            Path(args.export).write_text(json.dumps(table_to_file_json(table), indent=1) + "\n", encoding="utf-8")
            print(f"{args.export}: {table.name} ({len(table.layers)} layers) as a layer-table file")
        else:
            print("\n".join(_show(table)))
        if args.json:
            Path(args.json).write_text(json.dumps(table_to_file_json(table), indent=1) + "\n", encoding="utf-8")
        return 0
    if args.skipped:
        for s in sorted(corpus.skipped, key=lambda s: s.name):
            print(f"{s.name}: {s.reason}")
    else:
        print("\n".join(_listing(corpus, chosen.how, args.all)))
    if args.json:
        payload: dict[str, Any] = {"engine": corpus.engine, "release": corpus.release, "how": chosen.how,
                                   "tables": [{"name": t.name, "architecture": t.architecture,
                                               "layers": len(t.layers), "kinds": t.kinds(),
                                               "settings": t.settings.to_json(), "built_by": t.built_by}
                                              for t in corpus.tables],
                                   "skipped": [{"name": s.name, "architecture": s.architecture, "reason": s.reason}
                                               for s in corpus.skipped]}
        Path(args.json).write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    return 0


__all__ = ["register", "run"]
