"""Each model's layer table through vLLM's own grouping and merge, in both interpreter modes.

``python [-O] -m kvcontract.conformance.engines.vllm.tables.run [FAMILY ...]`` rebuilds the
tables from the installed vLLM (:mod:`.build`), hands each to the model's grouping (its
``SupportsKVCacheGrouping`` class where the family has one, else
``kv_cache_planning.get_kv_cache_groups``) with the adapter's neutral config (every path of
``VllmEngine.NEUTRAL_CONFIG``), merges each group's layer specs with the first spec's
``merge``, and prints one JSON object: family -> outcome. :func:`run_modes` runs that in
a normal and an ``-O`` subprocess (asserts are stripped under ``-O``, so an engine check
written as ``assert`` vanishes there).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import traceback
from typing import Any

MODES = {"normal": [], "optimized": ["-O"]}
FLAGS = ("is_draft", "non_causal_multi_token_decode")
"""Boolean spec fields a group's spec summary carries where the spec kind has them."""


def innermost(exc: BaseException) -> str:
    """``file:line`` of the innermost frame (``vllm/...`` relative where it is vLLM's)."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "?"
    frame = frames[-1]
    path = frame.filename.replace(os.sep, "/")
    cut = path.rfind("/vllm/")
    return f"{path[cut + 1:] if cut >= 0 else path}:{frame.lineno}"


def failure(exc: BaseException) -> dict[str, str]:
    return {"type": type(exc).__name__, "message": str(exc)[:300], "frame": innermost(exc)}


def spec_summary(spec: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": type(spec).__name__}
    for name in ("block_size", "num_kv_heads", "head_size", "sliding_window", "tokens_per_state"):
        try:
            out[name] = getattr(spec, name)
        except Exception:  # noqa: BLE001, S112 - a property this kind does not define
            continue
    for name in FLAGS:  # recorded only where the kind has the field
        if hasattr(spec, name):
            out[name] = bool(getattr(spec, name))
    try:
        out["page_size_bytes"] = int(spec.page_size_bytes)
    except Exception as exc:  # noqa: BLE001 - recorded, not raised
        out["page_size_bytes"] = failure(exc)
    return out


def grouping_config() -> Any:
    """Grouping's config: every neutral value of the adapter (features off)."""
    from kvcontract.conformance.engines.vllm.engine import VllmEngine

    engine = VllmEngine()
    engine._config_values = {path: engine._neutral(path) for path in engine.NEUTRAL_CONFIG}
    return engine.grouping_config()


def group_table(specs: dict[str, Any], grouping: str | None) -> dict[str, Any]:
    """One table through grouping and per-group merge: the groups, or the failure."""
    from kvcontract.conformance.engines.vllm.config import ConfigGap

    if grouping:
        module, _, name = grouping.partition(":")
        group_fn = getattr(importlib.import_module(module), name).get_kv_cache_groups
    else:
        group_fn = importlib.import_module("vllm.v1.core.kv_cache_planning").get_kv_cache_groups
    try:
        groups = group_fn(grouping_config(), dict(specs))
    except ConfigGap as gap:
        return {"config_gap": str(gap)}
    except Exception as exc:  # noqa: BLE001 - the engine's own failure is the finding
        return {"error": failure(exc)}
    out = []
    for group in groups:
        entry: dict[str, Any] = {"layers": list(group.layer_names),
                                 "spec": spec_summary(group.kv_cache_spec)}
        members = [specs[n] for n in group.layer_names if n in specs]
        # A UniformTypeKVCacheSpecs group keeps each layer's spec: merge per distinct spec.
        uniform_type = type(group.kv_cache_spec).__name__ == "UniformTypeKVCacheSpecs"
        parts: list[list[Any]] = []
        if not uniform_type and members:
            parts.append(members)
        for spec in members if uniform_type else ():
            part = next((p for p in parts if p[0] == spec), None)
            if part is None:
                parts.append([spec])
            else:
                part.append(spec)
        try:
            merged = [type(part[0]).merge(part) for part in parts]
            entry["merge"] = "ok" if parts else "no members"
            if len(merged) == 1 and spec_summary(merged[0]) != entry["spec"]:
                entry["merged_spec"] = spec_summary(merged[0])
        except Exception as exc:  # noqa: BLE001 - recorded per group
            entry["merge"] = failure(exc)
        out.append(entry)
    return {"groups": out}


def run_here(names: list[str] | None = None) -> dict[str, Any]:
    """Build and group the families in this interpreter."""
    from kvcontract.conformance.engines.vllm.tables.build import FamilySkipped, collect
    from kvcontract.conformance.engines.vllm.tables.catalogue import families

    results: dict[str, Any] = {}
    for family in families():
        if names and family.name not in names:
            continue
        try:
            built = family.build()
            specs = collect(built)
        except FamilySkipped as why:
            results[family.name] = {"skipped": str(why)}
            continue
        results[family.name] = group_table(specs, built.grouping)
    return results


def run_modes(names: list[str] | None = None, timeout: float = 600) -> dict[str, dict[str, Any]]:
    """mode -> family -> outcome, each mode in its own subprocess."""
    env = dict(os.environ, VLLM_LOGGING_LEVEL="ERROR")
    out: dict[str, dict[str, Any]] = {}
    for mode, flags in MODES.items():
        cmd = [sys.executable, *flags, "-m", __name__, *(names or [])]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                              check=False)
        line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("{")), None)
        if proc.returncode != 0 or line is None:
            raise RuntimeError(f"{mode} run failed (rc {proc.returncode}): {proc.stderr[-2000:]}")
        out[mode] = json.loads(line)
    return out


def main(argv: list[str]) -> int:
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    results = run_here(argv or None)
    print(json.dumps(results, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
