"""``kvcontract plan``: the reference's KV-cache plan of a layer table within a memory budget
(groups, page sizes, blocks, the tokens each group's blocks hold — states for a
state-space or ring group —, what one request holds), and with ``--engine`` the
engine's plan beside it with the differences: capacity planning without a GPU.

A table is a corpus table's (``--list`` shows the names: the model code of the engine's release
built them, ``kvcontract tables``) or a layer-table JSON file (``kvcontract tables --export``
writes one; ``kvcontract.reference.load_layer_table``'s format, with optional settings). A
corpus table is planned with the settings the engine picks for it (its hybrid-manager decision,
its layout) unless ``--hybrid-off`` / ``--layout`` say otherwise.
The engine plans in a worker process with a time limit: an engine that hangs or crashes is
reported, never waited on forever. Exit 0: planned (differences where the contract leaves a
choice are shown, not failed); 1: the reference or the engine could not plan the table;
2: usage error.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvcontract.conformance.cli.options import add_corpus, add_engine, add_json, writable_file
from kvcontract.usage import UsageError

if TYPE_CHECKING:
    from kvcontract.conformance.engines.protocol import Engine

ENGINE_TIMEOUT_S = 300
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20,
          "g": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tib": 1 << 40,
          "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}


def parse_bytes(text: str) -> int:
    """``"8GiB"``, ``"512 MiB"``, ``"80GB"``, ``"1073741824"`` -> bytes."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    unit = m.group(2).lower() if m else None
    if m is None or unit not in _UNITS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size: give bytes or a number with one of "
                                         "KiB, MiB, GiB, TiB, KB, MB, GB, TB (e.g. 8GiB)")
    return int(float(m.group(1)) * _UNITS[unit])


def _size(n: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor:
            return f"{n / factor:.2f} {unit}"
    return f"{n} B"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "plan", help="plan a model's KV cache (groups, blocks, tokens) with the reference, and an engine",
        description="Plan a layer table's KV cache within a memory budget with the reference "
                    "(kvcontract.reference.plan); with --engine, plan it with the engine too and show "
                    "the differences.")
    p.add_argument("table", nargs="?", help="a corpus table's name (see --list) or a layer-table JSON file")
    p.add_argument("--list", action="store_true", help="list the corpus's tables and exit")
    add_corpus(p, tables=False)
    p.add_argument("--memory", type=parse_bytes, default=parse_bytes("8GiB"), metavar="SIZE",
                   help="the KV-cache memory budget (default 8GiB; e.g. 512MiB, 80GB, bytes)")
    p.add_argument("--layout", choices=("layer-outermost", "block-outermost"), default=None,
                   help="cache layout: each layer's blocks contiguous, or each block all layers' pages side by "
                        "side (layers of different pages then share blocks, packed); default: the corpus table's "
                        "own (the layout the engine resolves for it), else layer-outermost")
    p.add_argument("--hybrid-off", action="store_true",
                   help="plan with the hybrid KV-cache manager off (PLAN-HYBRID-1)")
    p.add_argument("--max-model-len", type=int, default=8192, metavar="TOKENS",
                   help="request length for the per-request figures (default 8192)")
    p.add_argument("--dcp", type=int, default=1, metavar="RANKS",
                   help="decode-context-parallel ranks, for the block-table widths (default 1)")
    p.add_argument("--in-flight", type=int, default=None, metavar="TOKENS",
                   help="tokens scheduled but not yet computed, for windows (default: --max-model-len)")
    add_engine(p, required=False, what="also plan with this engine (e.g. vllm, vllm@/path/to/tree)")
    add_json(p, "both plans and their differences")
    p.add_argument("--verbose", action="store_true", help="list every group's layers")
    p.set_defaults(func=run)


# -- the table ---------------------------------------------------------------------------------


def corpus_tables(engine: str | None = None, corpus: str = "auto") -> dict[str, Any]:
    """The corpus's tables by name (:mod:`kvcontract.conformance.engines.corpora`)."""
    from kvcontract.conformance.contract.corpus import read_corpus
    from kvcontract.conformance.engines.corpora import resolve

    chosen = resolve(engine or "reference", corpus)
    return {} if chosen.path is None else read_corpus(chosen.path).by_name()


def load_table(spec: str, tables: Mapping[str, Any] | None = None) -> tuple[str, dict[str, Any], str, Any]:
    """``(name, layer table, where it comes from, its settings or None)`` for a table name or a JSON file."""
    from kvcontract.conformance.contract.corpus import CorpusFileError, read_table_file

    tables = corpus_tables() if tables is None else tables
    if spec in tables:
        t = tables[spec]
        return spec, t.specs(), f"{t.architecture}, built by {t.built_by}", t.settings
    path = Path(spec)
    if path.suffix == ".json" or path.exists():
        if not path.is_file():
            raise UsageError(f"kvcontract plan: no such file: {spec}")
        try:
            loaded = read_table_file(path)
        except CorpusFileError as exc:
            raise UsageError(f"kvcontract plan: {exc}") from None
        return loaded.name or path.stem, loaded.specs(), str(path), loaded.settings
    close = difflib.get_close_matches(spec, list(tables), n=3, cutoff=0.6) or \
        [n for n in tables if spec.lower() in n.lower()]
    hint = f"; did you mean {', '.join(close[:5])}?" if close else "; --list shows the names"
    raise UsageError(f"kvcontract plan: {spec!r} is neither a corpus table nor a file{hint}")


# -- plans as plain data ------------------------------------------------------------------------


def _group_row(names: Sequence[str], specs: Mapping[str, Any], merged: bool) -> dict[str, Any]:
    kinds = sorted({type(specs[n]).__name__ for n in names})
    return {"layers": list(names), "kinds": kinds, "form": "merged" if merged else "per-member",
            "block_size": specs[names[0]].block_size,
            "pages": sorted({specs[n].page_size_bytes for n in names})}


def reference_plan(table: Mapping[str, Any], memory: int, hybrid: bool, max_len: int, in_flight: int,
                   dcp: int = 1, block_outermost: bool = False) -> dict[str, Any]:
    from kvcontract.reference import GroupingError, sizing

    try:
        planned = sizing.plan(dict(table), memory, hybrid=hybrid, block_outermost=block_outermost)
    except GroupingError as exc:
        return {"error": str(exc)}
    groups = []
    for g, per_request in zip(planned.groups, sizing.request_blocks(planned.groups, max_len, in_flight, dcp),
                              strict=True):
        row = _group_row(g.layer_names, dict(g.layer_specs), g.spec is not None)
        row["bytes_per_block"] = sizing.bytes_per_block([g])
        row["blocks_per_request"] = per_request
        row["block_table_width"] = max(sizing.block_table_width(s, max_len, dcp) for _, s in g.layer_specs)
        groups.append(row)
    return {"num_blocks": planned.num_blocks, "bytes_per_block": planned.bytes_per_block,
            "scheduler_block_size": sizing.scheduler_block_size(planned.groups, dcp),
            "used_bytes": planned.used_bytes, "groups": groups,
            "tensors": [{"layers": list(t.layer_names), "size": t.size_bytes} for t in planned.tensors]}


def engine_plan_here(engine_name: str, table: Mapping[str, Any], memory: int, hybrid: bool,
                     block_outermost: bool = False) -> dict[str, Any]:
    """The engine's plan, in this process (the worker's body)."""
    from kvcontract.conformance.engines.protocol import load_engine

    return plan_with(load_engine(engine_name), table, memory, hybrid, block_outermost)


def plan_with(engine: Engine, table: Mapping[str, Any], memory: int, hybrid: bool,
              block_outermost: bool = False) -> dict[str, Any]:
    """A loaded engine's plan of ``table`` as plain data (``error``: why it has none), in this
    process: only ever called in a worker."""
    from kvcontract.conformance.engines.protocol import Planning

    if not isinstance(engine, Planning):
        return {"error": f"the {engine.name} adapter does not drive its engine's planner"}
    problem = engine.planning_unavailable()
    if problem:
        return {"error": problem}
    try:
        planned = engine.plan_layers({n: engine.to_engine(s) for n, s in table.items()}, memory, hybrid=hybrid,
                                     block_outermost=block_outermost)
    except Exception as exc:  # noqa: BLE001 - the engine's refusal is the answer
        return {"engine": f"{engine.name} {engine.version}", "error": f"{type(exc).__name__}: {exc}"}
    groups = []
    for g in planned.groups:
        specs: dict[str, Any] = dict(g.member_specs or {}) or {n: g.spec for n in g.layer_names}
        groups.append(_group_row(g.layer_names, specs, g.spec is not None))
    return {"engine": f"{engine.name} {engine.version}", "num_blocks": planned.num_blocks,
            "used_bytes": max((t.size_bytes for t in planned.tensors), default=0), "groups": groups,
            "tensors": [{"layers": list(t.layer_names), "size": t.size_bytes} for t in planned.tensors]}


def engine_plan(engine_name: str, table: Mapping[str, Any], memory: int, hybrid: bool,
                timeout: float = ENGINE_TIMEOUT_S, block_outermost: bool = False) -> dict[str, Any]:
    """The engine's plan, from a worker process that may hang or crash (then an ``error``)."""
    from kvcontract.conformance.contract.codec import spec_to_json

    request = json.dumps({"engine": engine_name, "memory": memory, "hybrid": hybrid,
                          "block_outermost": block_outermost,
                          "table": {n: spec_to_json(s) for n, s in table.items()}})
    env = {**os.environ, "VLLM_LOGGING_LEVEL": os.environ.get("VLLM_LOGGING_LEVEL", "ERROR")}
    try:
        done = subprocess.run([sys.executable, "-m", "kvcontract.conformance.cli.plan"], input=request,
                              capture_output=True, text=True, timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"the engine did not answer within {timeout:.0f} s (worker stopped)"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"the engine's worker failed (exit {done.returncode}): {tail}"}
    answer: dict[str, Any] = json.loads(lines[-1])
    return answer


def _worker() -> int:
    from kvcontract.conformance.contract.codec import spec_from_json

    request = json.loads(sys.stdin.read())
    table = {n: spec_from_json(s) for n, s in request["table"].items()}
    print(json.dumps(engine_plan_here(request["engine"], table, request["memory"], request["hybrid"],
                                      bool(request.get("block_outermost")))))
    return 0


# -- output -------------------------------------------------------------------------------------


def _partition(plan: Mapping[str, Any]) -> set[frozenset[str]]:
    return {frozenset(g["layers"]) for g in plan.get("groups", [])}


def differences(ref: Mapping[str, Any], eng: Mapping[str, Any]) -> list[str]:
    """What differs between the reference's plan and the engine's, one line each."""
    if "error" in ref or "error" in eng:
        if ("error" in ref) != ("error" in eng):
            who = "the reference" if "error" in ref else "the engine"
            return [f"only {who} refuses the table"]
        return []
    out = []
    if _partition(ref) != _partition(eng):
        out.append(f"groups differ: reference {len(ref['groups'])} groups, engine {len(eng['groups'])} "
                   "(a choice the contract may leave free: GROUP-SHARE-1)")
    else:
        eng_by = {frozenset(g["layers"]): g for g in eng["groups"]}
        for i, g in enumerate(ref["groups"]):
            other = eng_by[frozenset(g["layers"])]
            for key in ("form", "block_size", "pages"):
                if g[key] != other[key]:
                    out.append(f"G{i}: {key} reference {g[key]}, engine {other[key]}")
    if ref["num_blocks"] != eng["num_blocks"]:
        out.append(f"blocks: reference {ref['num_blocks']}, engine {eng['num_blocks']}")
    if len(ref["tensors"]) != len(eng["tensors"]):
        out.append(f"tensors: reference {len(ref['tensors'])}, engine {len(eng['tensors'])}")
    return out


def _kinds(kinds: Sequence[str]) -> str:
    text = "+".join(k.removesuffix("Spec") for k in kinds)
    return text if len(text) <= 34 else text[:31] + "..."


def _pages(pages: Sequence[int]) -> str:
    text = "/".join(str(p) for p in pages)
    return text if len(text) <= 22 else f"{pages[0]}..{pages[-1]} ({len(pages)})"


def render(title: str, plan: Mapping[str, Any], max_len: int, verbose: bool) -> list[str]:
    if "error" in plan:
        return [f"{title}: cannot plan: {plan['error']}"]
    groups = plan["groups"]
    lines = [f"{title}: {len(groups)} group{'s' * (len(groups) != 1)}, {plan['num_blocks']} blocks, "
             f"{_size(plan['used_bytes'])} used"]
    lines.append(f"  {'group':<5} {'layers':>6}  {'kinds':<34} {'form':<10} {'block':>6} {'page (B)':<22} "
                 f"{'tokens':>9}")
    for i, g in enumerate(groups):
        states = {"MambaSpec", "CircularBufferSpec"} & set(g["kinds"])
        tokens = f"{plan['num_blocks']} st" if states else str(plan["num_blocks"] * g["block_size"])
        lines.append(f"  G{i:<4} {len(g['layers']):>6}  {_kinds(g['kinds']):<34} {g['form']:<10} "
                     f"{g['block_size']:>6} {_pages(g['pages']):<22} {tokens:>9}")
        if verbose:
            lines.append(f"        {', '.join(g['layers'])}")
    per_request = [g["blocks_per_request"] for g in groups if "blocks_per_request" in g]
    if per_request and sum(per_request):
        need = sum(per_request)
        lines.append(f"  a request of {max_len} tokens holds {need} blocks across the groups "
                     f"({'+'.join(map(str, per_request)) if len(per_request) <= 8 else '...'}): "
                     f"{plan['num_blocks'] // need} such requests fit at once")
    widths = sorted({g["block_table_width"] for g in groups if "block_table_width" in g})
    if widths:
        lines.append(f"  block-table entries per request: {'/'.join(map(str, widths))}; blocks align to "
                     f"{plan['scheduler_block_size']} tokens")
    return lines


def run(args: argparse.Namespace) -> int:
    if args.list:
        for name, t in corpus_tables(args.engine, args.corpus).items():
            kinds = sorted(t.kinds())
            print(f"{name:<48} {len(t.layers):>4} layers  {', '.join(kinds) or '(no KV cache)'}")
        return 0
    if not args.table:
        raise UsageError("kvcontract plan: give a table (a real model's name, see --list, or a JSON file)")
    if args.max_model_len < 1 or (args.in_flight is not None and args.in_flight < 0) or args.dcp < 1:
        raise UsageError("kvcontract plan: --max-model-len and --dcp must be >= 1 and --in-flight >= 0")
    writable_file(args.json, "--json")
    if args.engine:
        from kvcontract.conformance.engines.protocol import check_engine_name

        try:
            check_engine_name(args.engine)
        except LookupError as exc:
            raise UsageError(f"kvcontract plan: {exc}") from None
    name, table, origin, settings = load_table(args.table, corpus_tables(args.engine, args.corpus))
    if not table:
        raise UsageError(f"kvcontract plan: {name} has no KV-cache layers: nothing to plan")
    hybrid = not args.hybrid_off and (settings is None or settings.hybrid)
    if args.layout is None:
        args.layout = "block-outermost" if settings is not None and settings.block_outermost else "layer-outermost"
    in_flight = args.max_model_len if args.in_flight is None else args.in_flight
    print(f"kvcontract plan: {name} ({len(table)} layers; {origin}), budget {_size(args.memory)}, "
          f"hybrid manager {'on' if hybrid else 'off'}, {args.layout}", flush=True)
    block_outermost = args.layout == "block-outermost"
    ref = reference_plan(table, args.memory, hybrid, args.max_model_len, in_flight, args.dcp, block_outermost)
    lines = render("reference", ref, args.max_model_len, args.verbose)
    out: dict[str, Any] = {"table": name, "memory": args.memory, "hybrid": hybrid, "reference": ref}
    failed = "error" in ref
    if args.engine:
        print("\n".join(lines), flush=True)
        lines = []
        print(f"planning with {args.engine} in a worker ...", file=sys.stderr, flush=True)
        eng = engine_plan(args.engine, table, args.memory, hybrid, block_outermost=block_outermost)
        out["engine"] = eng
        lines += render(f"engine ({eng.get('engine', args.engine)})", eng, args.max_model_len, args.verbose)
        diffs = differences(ref, eng)
        out["differences"] = diffs
        lines.append("differences: " + ("none" if not diffs else f"{len(diffs)}"))
        lines += [f"  {d}" for d in diffs[:10]] + ([f"  ... and {len(diffs) - 10} more"] if len(diffs) > 10 else [])
        failed = failed or "error" in eng
    print("\n".join(lines))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 1 if failed else 0


__all__ = ["differences", "engine_plan", "load_table", "parse_bytes", "plan_with", "reference_plan", "register",
           "run"]

if __name__ == "__main__":
    raise SystemExit(_worker())
