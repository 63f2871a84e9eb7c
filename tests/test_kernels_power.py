"""Teeth of the ground truth: declared arithmetic, kernel mutants, plug-in backends (NUM-TOL-1, NUM-DISPATCH-1)."""

from __future__ import annotations

import dataclasses
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from kvcontract.cli import main
from kvcontract.kernels import CaseSpec, Kind, RequestSpec, build_batch, get_backend
from kvcontract.kernels.arithmetic import get_arithmetic, round_to_tf32
from kvcontract.kernels.backends import UnknownBackendError
from kvcontract.kernels.generation import default_case_specs
from kvcontract.kernels.harness import check_batch
from kvcontract.kernels.mutants import MUTANTS, MutantBackend, power_table
from kvcontract.kernels.testing import (
    GroundTruthMismatch,
    assert_matches_ground_truth,
    production_case,
)


def _wide(*requests: tuple[Kind, int, int], **fields: object) -> CaseSpec:
    base: dict[str, object] = {"num_heads": 16, "kv_lora_rank": 512, "rope_dim": 64, "block_size": 64}
    base.update(fields)
    return CaseSpec(requests=tuple(RequestSpec(k, n, length) for k, n, length in requests), **base)  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.parametrize("mutant", ["zeros", "uniform-weights"])
def test_zero_and_uniform_outputs_fail_at_4096_keys_width_576_float32(mutant: str) -> None:
    """NUM-TOL-1: at production width and context the float32 allowance rejects both."""
    spec = _wide((Kind.DECODE, 1, 4096), (Kind.DRAFT, 4, 4096), dtype="float32")
    result = check_batch(MutantBackend(mutant), build_batch(spec))
    assert [r.passed for r in result.records] == [False, False]
    assert min(r.worst_ratio for r in result.records) > 100
    assert all(r.passed for r in check_batch(get_backend("reference"), build_batch(spec)).records)


def test_uniform_weights_fail_for_a_draft_block_at_256_keys() -> None:
    """NUM-TOL-1: the draft block the issue names, float32 and bfloat16."""
    for dtype in ("float32", "bfloat16"):
        spec = _wide((Kind.DRAFT, 8, 256), dtype=dtype, num_heads=1)
        assert not check_batch(MutantBackend("uniform-weights"), build_batch(spec)).passed


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_float32_accumulating_reference_passes_production_cases(dtype: str) -> None:
    """NUM-TOL-1: a reference-equal kernel passes whatever the dtype, at width 576 and 8k keys."""
    spec = _wide((Kind.DECODE, 1, 8192), (Kind.VERIFY, 4, 1000), dtype=dtype)
    result = check_batch(get_backend("reference-float32"), build_batch(spec))
    assert result.passed, [r.message for r in result.records]


def test_undeclared_tf32_fails_and_declared_tf32_passes() -> None:
    """NUM-TOL-1: the allowance follows the declaration; TF32 declared as IEEE float32 fails."""

    class Tf32:
        name, description = "tf32-kernel", "float32 with TF32 operands"
        modes = frozenset({"decode", "draft"})

        def __init__(self, arithmetic: str) -> None:
            self.arithmetic = arithmetic

        def unavailable_reason(self, dtype: str) -> str | None:
            return None

        def run(self, batch, out, lse):  # type: ignore[no-untyped-def]
            q, keys = round_to_tf32(batch.q), round_to_tf32(batch.kv_cache)
            from kvcontract.kernels import mla_reference

            result = mla_reference(batch.with_query(q).__class__(**{**batch.__dict__, "q": q, "kv_cache": keys}),
                                   accumulate=torch.float32)
            out.copy_(result.out)
            lse.copy_(result.lse)

    spec = _wide((Kind.DECODE, 1, 600), (Kind.DRAFT, 3, 200), dtype="float32", num_heads=4)
    batch = build_batch(spec)
    assert not check_batch(Tf32("float32"), batch).passed
    assert check_batch(Tf32("tf32"), batch).passed


def test_arithmetic_names_and_errors() -> None:
    """NUM-ACCUM-1: no declaration below float32 accumulation exists."""
    assert get_arithmetic("mixed+lse-storage").lse == "storage"
    with pytest.raises(ValueError, match="unknown arithmetic"):
        get_arithmetic("bfloat16")
    with pytest.raises(ValueError, match="NUM-ACCUM-1"):
        get_arithmetic("float32").__class__("x", "y", accumulator=torch.bfloat16)


def test_default_cases_look_like_production() -> None:
    """The default run has width 576, one and sixteen heads, 8k contexts, and bfloat16."""
    specs = default_case_specs(MUTANTS[0].touches | {"decode", "draft"}, "bfloat16", cases_per_mode=1)
    wide = [s for s in specs if s.head_dim == 576]
    assert {1, 16} <= {s.num_heads for s in wide}
    assert max(r.seq_len for s in wide for r in s.requests) >= 8192
    assert {s.dtype for s in specs} == {"bfloat16"}


@pytest.mark.slow
def test_every_mutant_is_killed_in_float32_and_bfloat16() -> None:
    """The power table: each defect fails in every mode it touches, in both dtypes."""
    table = power_table(("float32", "bfloat16"), cases_per_mode=6)
    survivors = [(o.mutant, o.dtype, o.touches, o.killed_modes) for o in table.outcomes if not o.killed]
    assert not survivors
    assert len(table.outcomes) == 2 * len(MUTANTS)


@pytest.mark.slow
def test_each_mutant_fails_a_small_case_of_a_mode_it_touches() -> None:
    """Fast lane: every mutant fails on one small hand-picked case (float32)."""
    spec = CaseSpec(
        requests=(RequestSpec(Kind.VERIFY, 4, 39), RequestSpec(Kind.DECODE, 1, 33)),
        num_heads=2, kv_lora_rank=32, rope_dim=16, block_size=4, sliding_window=13, seed=5,
    )
    shaped = {  # defects that only production shapes show: more than 16 heads, logits past exp's range
        "heads-beyond-16-unwritten": dataclasses.replace(spec, num_heads=20),
        "softmax-without-max": dataclasses.replace(spec, query_scale=48.0),
    }
    for mutant in MUTANTS:
        batch = build_batch(shaped.get(mutant.name, spec))
        assert not check_batch(MutantBackend(mutant), batch).passed, mutant.name


# ------------------------------------------------------------ plug-in backends


PLUGIN = '''
import torch
from kvcontract.kernels import mla_reference

class OutsideKernel:
    name = "outside"
    description = "a backend defined outside the package"
    modes = frozenset({"decode", "verify", "draft"})
    arithmetic = "float32"

    def __init__(self, broken=False):
        self.broken = broken

    def unavailable_reason(self, dtype):
        return None

    def run(self, batch, out, lse):
        result = mla_reference(batch, accumulate=torch.float32)
        out.copy_(result.out * (0 if self.broken else 1))
        lse.copy_(result.lse)

def make():
    return OutsideKernel()

def make_broken():
    return OutsideKernel(broken=True)

def not_a_backend():
    return 42
'''


@pytest.fixture
def plugin_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "outside_kernels.py").write_text(textwrap.dedent(PLUGIN))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "outside_kernels"
    sys.modules.pop("outside_kernels", None)


@pytest.mark.slow
def test_module_factory_backend_is_checked_by_the_cli(
    plugin_module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """NUM-DISPATCH-1: ``--backend module:factory`` loads and checks a backend from outside."""
    args = ["kernels", "--backend", f"{plugin_module}:make", "--dtype", "float32",
            "--cases", "2", "--max-seq-len", "600"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "backend outside" in out and "result: pass" in out
    assert main(["kernels", "--backend", f"{plugin_module}:make_broken", "--dtype", "float32",
                 "--cases", "2", "--max-seq-len", "600"]) == 1


def test_bad_factories_are_usage_errors(plugin_module: str) -> None:
    with pytest.raises(UnknownBackendError, match="lacks"):
        get_backend(f"{plugin_module}:not_a_backend")
    with pytest.raises(UnknownBackendError, match="cannot import"):
        get_backend("no_such_module_here:make")
    with pytest.raises(UnknownBackendError, match="no attribute"):
        get_backend(f"{plugin_module}:missing")


def test_entry_point_backends_are_found(monkeypatch: pytest.MonkeyPatch, plugin_module: str) -> None:
    """The ``kvcontract.backends`` group: an installed package's backend by its name."""
    import importlib.metadata

    from kvcontract.kernels import backends

    point = importlib.metadata.EntryPoint("outside", f"{plugin_module}:make", "kvcontract.backends")
    monkeypatch.setattr(backends, "entry_point_backends", lambda: {"outside": point})
    assert "outside" in backends.backend_names()
    assert get_backend("outside").name == "outside"


def test_pytest_helper_passes_a_good_kernel_and_names_a_bad_one(plugin_module: str) -> None:
    """kvcontract.kernels.testing: one kernel call against the ground truth in a few lines."""
    import outside_kernels  # type: ignore[import-not-found]

    case = production_case("decode", dtype="float32", max_seq_len=512)
    result = assert_matches_ground_truth(outside_kernels.make(), case)
    assert result.passed
    with pytest.raises(GroundTruthMismatch, match="off the ground truth"):
        assert_matches_ground_truth(outside_kernels.make_broken(), case)

    def plain(batch, out, lse):  # type: ignore[no-untyped-def]
        outside_kernels.make().run(batch, out, lse)

    assert assert_matches_ground_truth(plain, case, arithmetic="float32").passed


def test_cuda_device_without_a_gpu_is_skipped_with_its_reason(capsys: pytest.CaptureFixture[str]) -> None:
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the CUDA path runs (scripts/gpu_kernels_check.sh)")
    assert main(["kernels", "--device", "cuda", "--cases", "1"]) == 1
    assert "torch.cuda.is_available() is False" in capsys.readouterr().out
