"""vLLM's MLA router behind :data:`~kvcontract.conformance.engines.dispatch.Router` (spec chapter DISPATCH).

The code under test is vLLM's own: ``MLACommonMetadataBuilder.__init__`` (the
capability read from the group's layers, ``_init_reorder_batch_threshold``)
and ``MLACommonMetadataBuilder.build`` (the non-causal checks, then
``split_decodes_and_prefills`` of ``vllm/v1/attention/backends/utils.py`` with
``decode_threshold=reorder_batch_threshold`` and
``require_uniform=(query_len_support != VARLEN)``), from
``vllm.model_executor.layers.attention.mla_attention``.

It runs on the CPU without an engine, as vLLM's own builder unit tests do: the
builder is constructed through its real ``__init__`` with a
``SimpleNamespace`` config (speculative tokens set so that
``max_decode_query_len`` is the request's decode threshold, no context
parallelism) and a ``static_forward_context`` holding a target MLA layer and,
when the group has the capability, a DSpark draft layer marked
``non_causal_multi_token_decode`` (vLLM 0.34.0 reads the flag from the group's
layers). The backend's ``query_len_support`` and
``supports_non_causal_multi_token_decode`` are class variables of a subclass of
``MLACommonMetadataBuilder``, as in vLLM's tests; ``TritonMLAMetadataBuilder``
is ``UNIFORM`` with support. One platform detail is patched, only during the
calls: without an accelerator vLLM's ``PIN_MEMORY`` flag (read from an
unspecified platform) is set to False, as pinned memory cannot be allocated.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from kvcontract.conformance.contract.model import KitFailure
from kvcontract.conformance.engines.native import concrete_ints
from kvcontract.conformance.engines.protocol import EngineUnavailable
from kvcontract.conformance.engines.vllm.config import StrictConfig
from kvcontract.conformance.engines.vllm.homes import VLLM_HOMES, EngineHomes
from kvcontract.conformance.run.worker import last_frame
from kvcontract.reference import QueryLenSupport, Routing, RoutingRequest

BUILDER_NEEDS = ("QueryLenSupport", "MLACommonMetadataBuilder")
"""What the builder's module must define for the adapter to drive it."""
CAPABILITY = "supports_non_causal_multi_token_decode"
"""The builder's class variable for the non-causal multi-token decode capability (DISPATCH)."""



def _maybe_import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _accepted(cls: Any, values: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments a release's dataclass takes (its fields vary by release);
    a required field missing here makes the constructor raise, which the probe reports."""
    if not dataclasses.is_dataclass(cls):
        return values
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    return {k: v for k, v in values.items() if k in names}


def _import_engine(homes: EngineHomes) -> tuple[Any, Any, Any, Any]:
    """torch, the builder's module, the metadata's module and the spec module, from where the
    engine's homes say (the first of each that imports and has what is looked for)."""
    os.environ.setdefault(homes.logging_env, "ERROR")
    try:
        import torch

        # The builder's module imports vLLM's Triton kernels: without a GPU, import them
        # as the kernels backend needs them (Triton's interpreter, Triton kept enabled),
        # so a process that later runs the kernels finds them usable.
        wanted = {} if torch.cuda.is_available() else {"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
        previous = {name: os.environ.get(name) for name in wanted}
        os.environ.update(wanted)
        try:
            mla, problems = None, []
            for name in homes.routing_builders:
                try:
                    candidate = importlib.import_module(name)
                except ImportError as exc:
                    problems.append(f"{name}: {type(exc).__name__}: {exc}")
                    continue
                if hasattr(candidate, "MLACommonMetadataBuilder"):
                    mla = candidate
                    break
                problems.append(f"{name} has no MLACommonMetadataBuilder")
            if mla is None:
                raise ImportError("; ".join(problems))
        finally:
            for name, value in previous.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        backend = next((m for m in (_maybe_import(n) for n in homes.routing_metadata)
                        if m is not None and hasattr(m, "CommonAttentionMetadata")), None)
        if backend is None:
            raise ImportError(f"no CommonAttentionMetadata in {', '.join(homes.routing_metadata)}")
        interface = importlib.import_module(homes.interface)
    except Exception as exc:  # noqa: BLE001 - any import failure means "not here"
        raise EngineUnavailable(f"the engine's MLA metadata builder is not importable here: "
                                f"{type(exc).__name__}: {exc}") from None
    return torch, mla, backend, interface


class RouterUnavailable(KitFailure):
    """This release's MLA metadata builder cannot be driven by the adapter (the reason says why)."""


def _strict(value: Any, path: str = "") -> Any:
    """A config namespace whose unknown attributes raise :class:`ConfigGap` (never a finding)."""
    if isinstance(value, SimpleNamespace):
        return StrictConfig(path, {k: _strict(v, f"{path}{k}.") for k, v in vars(value).items()})
    return value


class VllmRouter:
    """Routes a :class:`RoutingRequest` with vLLM's ``MLACommonMetadataBuilder.build``.

    Release-independent by discovery: the builder's module is whichever of the engine's
    ``homes.routing_builders`` (:mod:`.homes`; vLLM's by default) defines it; it must define ``QueryLenSupport`` and the
    builder the ``supports_non_causal_multi_token_decode`` capability (else
    :class:`RouterUnavailable` names what is missing); the config is strict (a read
    of an attribute the recipe does not give is a :class:`ConfigGap`, the kit's); and
    one causal decode is routed on construction, so a release the recipe does not
    fit is unavailable with that call's exception, not a finding.
    """

    def __init__(self, homes: EngineHomes = VLLM_HOMES, name: str = "vllm") -> None:
        self.homes = homes
        self.torch, self.mla, self.backend, self.interface = _import_engine(homes)
        package = importlib.import_module(homes.package)
        self.version = str(getattr(package, "__version__", "unknown"))
        lacking = [n for n in BUILDER_NEEDS if not hasattr(self.mla, n)]
        if not lacking and not hasattr(self.mla.MLACommonMetadataBuilder, CAPABILITY):
            lacking.append(f"MLACommonMetadataBuilder.{CAPABILITY}")
        if lacking:
            raise RouterUnavailable(f"{name} {self.version}'s {self.mla.__name__} has no {', '.join(lacking)}")
        self._builders: dict[tuple[Any, ...], Any] = {}
        probe = RoutingRequest(query_lens=(1,), seq_lens=(8,), causal=True,
                               query_len_support=QueryLenSupport.UNIFORM, backend_non_causal=False,
                               capability=False, decode_threshold=1)
        try:
            self.route(probe)
        except Exception as exc:  # noqa: BLE001 - the recipe does not fit this release
            self._builders.clear()
            raise RouterUnavailable(f"{name} {self.version}: routing one causal decode with the adapter's "
                                    f"builder recipe raised {type(exc).__name__}: {exc} "
                                    f"(at {last_frame(exc)})") from None

    @contextlib.contextmanager
    def _no_pinned_memory(self) -> Iterator[None]:
        if self.torch.cuda.is_available():
            yield
            return
        modules = [self.mla]
        for name in self.homes.pinned_flags:
            try:
                modules.append(importlib.import_module(name))
            except ImportError:
                continue
        # A release reads the flag (PIN_MEMORY) or asks the platform (is_pin_memory_available,
        # 0.32.0's async_tensor_h2d); without an accelerator both must say no.
        names = {"PIN_MEMORY": False, "is_pin_memory_available": lambda: False}
        saved = [(m, n, getattr(m, n)) for m in modules for n in names if hasattr(m, n)]
        for m, n, _ in saved:
            setattr(m, n, names[n])  # a module global vLLM reads at call time
        try:
            yield
        finally:
            for m, n, value in saved:
                setattr(m, n, value)

    def builder_class(self, support: QueryLenSupport, non_causal: bool) -> type:
        """A builder class with the backend's routing class variables (as vLLM's tests define them)."""
        mla = self.mla
        return type(f"KvcontractMLABuilder_{support.name}_{non_causal}", (mla.MLACommonMetadataBuilder,), {
            "query_len_support": mla.QueryLenSupport[support.name],
            "supports_non_causal_multi_token_decode": non_causal,
        })

    def _layer(self, marked: bool) -> SimpleNamespace:
        def clone() -> SimpleNamespace:
            return SimpleNamespace(get_name=lambda: "KVCONTRACT_STUB", prepare_metadata=lambda _m: None)

        return SimpleNamespace(non_causal_multi_token_decode=marked, q_lora_rank=None, kv_lora_rank=512,
                               qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
                               prefill_backend=SimpleNamespace(clone=clone))

    def config(self, decode_threshold: int, context: dict[str, Any]) -> Any:
        """The part of a VllmConfig the builder reads: speculative tokens give the threshold."""
        torch = self.torch
        speculative = None
        if decode_threshold > 1:
            speculative = SimpleNamespace(method="dspark", num_speculative_tokens=decode_threshold - 1,
                                          max_num_new_slots_for_drafting=0, parallel_drafting=False)
        return _strict(SimpleNamespace(
            speculative_config=speculative,
            parallel_config=SimpleNamespace(decode_context_parallel_size=1, prefill_context_parallel_size=1,
                                            cp_kv_cache_interleave_size=1),
            compilation_config=SimpleNamespace(static_forward_context=context),
            model_config=SimpleNamespace(dtype=torch.bfloat16, max_model_len=4096,
                                         get_num_attention_heads=lambda _p: 16, get_head_size=lambda: 576),
            cache_config=SimpleNamespace(cache_dtype="auto", block_size=16),
            scheduler_config=SimpleNamespace(max_num_seqs=8),
            attention_config=SimpleNamespace(use_prefill_query_quantization=False,
                                             trtllm_ragged_backend=None),
        ))

    def builder(self, request: RoutingRequest) -> Any:
        """vLLM's builder for the request's group and backend, constructed through ``__init__``."""
        key = (request.query_len_support, request.backend_non_causal, request.capability,
               request.decode_threshold)
        if key not in self._builders:
            context = {"target": self._layer(False), "draft": self._layer(True)}
            layer_names = ["target", "draft"] if request.capability else ["target"]
            mla_spec = self.interface.MLAAttentionSpec
            spec = mla_spec(**_accepted(mla_spec, dict(
                block_size=16, num_kv_heads=1, head_size=576, dtype=self.torch.bfloat16, dcp_sharded=False,
                non_causal_multi_token_decode=request.capability)))
            cls = self.builder_class(request.query_len_support, request.backend_non_causal)
            with self._no_pinned_memory():
                self._builders[key] = cls(spec, layer_names, self.config(request.decode_threshold, context),
                                          self.torch.device("cpu"))
        return self._builders[key]

    def metadata(self, request: RoutingRequest) -> Any:
        """The ``CommonAttentionMetadata`` of the invocation (CPU tensors). vLLM reads the lengths
        from tensors: they are made plain integers here (the symbolic search's values are
        realized where native code needs them, and nowhere before)."""
        torch = self.torch
        request = dataclasses.replace(request, query_lens=concrete_ints(request.query_lens),
                                      seq_lens=concrete_ints(request.seq_lens))
        starts = [0]
        for n in request.query_lens:
            starts.append(starts[-1] + n)
        num_reqs, num_tokens = request.num_reqs, starts[-1]
        max_pages = max(1, *(-(-s // 16) for s in request.seq_lens))
        seq_lens = torch.tensor(request.seq_lens, dtype=torch.int32)
        metadata = self.backend.CommonAttentionMetadata
        return metadata(**_accepted(metadata, dict(
            query_start_loc=torch.tensor(starts, dtype=torch.int32),
            query_start_loc_cpu=torch.tensor(starts, dtype=torch.int32),
            seq_lens=seq_lens, num_reqs=num_reqs, num_actual_tokens=num_tokens,
            max_query_len=max(request.query_lens), max_seq_len=max(request.seq_lens),
            block_table_tensor=torch.zeros((num_reqs, max_pages), dtype=torch.int32),
            slot_mapping=torch.arange(num_tokens), causal=request.causal,
            seq_lens_cpu_upper_bound=seq_lens.clone(), seq_lens_cpu=seq_lens.clone(),
            num_computed_tokens_cpu=seq_lens - torch.tensor(request.query_lens, dtype=torch.int32))))

    def route(self, request: RoutingRequest) -> Routing:
        """vLLM's routing of ``request``; vLLM's exceptions propagate (DISPATCH-NONCAUSAL-1)."""
        builder = self.builder(request)
        with self._no_pinned_memory():
            built = builder.build(0, self.metadata(request))
        prefill_tokens = 0
        if built.prefill is not None:
            prefill_tokens = int(built.prefill.query_start_loc[-1])
        return Routing(int(built.num_decodes), int(built.num_prefills), int(built.num_decode_tokens),
                       prefill_tokens)

    def effective_threshold(self, request: RoutingRequest) -> int:
        """The builder's ``reorder_batch_threshold`` for the request's group (DISPATCH-CAUSAL-1)."""
        return int(self.builder(request).reorder_batch_threshold)
