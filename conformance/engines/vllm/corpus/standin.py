"""What stands in for a GPU while a vLLM release builds its models on this CPU-only machine.

The corpus is built by the release's own model code (``initialize_model`` on the meta
device, the runner's spec loop), which expects a CUDA platform. What stands in, and why,
each as small as it can be:

- **the platform**: a subclass of the release's ``CudaPlatformBase`` that reports a node of
  Hopper GPUs (SM 9.0, 80 GiB, 132 SMs, eight in the node) whose current device is ``meta``: the backend, block size
  and layout vLLM picks are those it picks for that GPU (recorded with every table);
- **compiled extensions**: an importable empty module for each compiled module the
  package ships (found by its ``.so`` file, not by a list): nothing here runs a kernel;
- **the device**: while a model is initialised, a tensor asked for on ``cuda`` is made on
  ``meta`` (the Transformers backend and some layers name the device explicitly);
- **compiled ops**: after the model classes are imported, ``torch.ops.<namespace>`` of
  those extensions resolve to placeholders that raise if called (a layer's
  ``__init__`` looks an op up; only ``forward`` would call it), and the three capability
  queries vLLM makes at import time answer ``False``;
- **CUDA streams and events**: placeholders (created in some layers' ``__init__``, used
  only in ``forward``);
- **model inspection**: the registry inspects a model class in a subprocess (to keep
  CUDA uninitialised); here it runs in the building process, which has the stand-ins.
- **declared dependencies with no CPU build here** (:data:`IMPORT_ONLY`): packages vLLM's
  metadata requires, so a Hopper deployment has them, whose build here would need the CUDA
  torch (torchvision, torchaudio) or would move the kit's pins (mistral_common needs another
  numpy; tiktoken comes with it). Model modules import them at the top for their input
  processors and tokenizers (never for a layer's KV cache); here they import as inert
  modules whose every name raises when called. transformers' own availability checks are
  answered first (absent, which is true here), so it takes its fallbacks as on any machine
  without them.
- **GPU libraries a layer's ``__init__`` asks about** (:data:`AVAILABILITY`): the answer a
  Hopper deployment of the release gives, only in the module whose ``__init__`` asks: the
  sparse attention indexer requires DeepGEMM on CUDA (the wheel vendors it,
  ``vllm/third_party/deep_gemm``, whose compiled part is a stand-in here).

:func:`install` puts them in place once per process, before vLLM's platform is resolved.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DEVICE_NAME = "NVIDIA H100 80GB HBM3 (stand-in)"
CAPABILITY = (9, 0)
MEMORY_BYTES = 80 * 2**30
DEVICE_COUNT = 8
"""GPUs in the node: an 8-GPU HGX H100 (the configuration refuses a tensor-parallel size
larger than the node's GPUs; the corpus builds up to TP=8, :mod:`.parallel`)."""
COMPUTE_UNITS = 132
"""An H100 SXM's streaming multiprocessors (some attention backends size work by them in
``__init__``)."""
CAPABILITY_QUERIES = ("cutlass_scaled_mm_supports_block_fp8", "cutlass_scaled_mm_supports_fp4",
                      "cutlass_scaled_mm_supports_fp8")
"""``_custom_ops`` functions vLLM calls at import time to ask the compiled ops what the
GPU supports."""


IMPORT_ONLY = {"torchvision": "torchvision", "torchaudio": "torchaudio",
               "mistral_common": "mistral_common", "tiktoken": "tiktoken", "openai": "openai"}
"""Top-level package -> the distribution the release's metadata requires for it: imported as
inert stand-ins where not installed (see the module docstring)."""
KERNEL_DSL = {"cutlass": "nvidia-cutlass-dsl", "cuda": "nvidia-cutlass-dsl",
              "quack": "quack-kernels"}
"""Top-level package -> the distribution the release requires for it (``cuda``: the CUDA
Python bindings ``nvidia-cutlass-dsl`` brings): the CuteDSL kernel language. Modules that
define CuteDSL kernels are imported by some layers' ``__init__`` to register the kernels'
JIT warmup (the MoE router's SM90 GEMM, DeepSeek-V4's compressor); a Hopper deployment has
the DSL. Here it is an inert stand-in whose names can be called, subclassed and used as
decorators at import time and return inert names: a kernel is only compiled and launched in
``forward`` or warmup, never here, and no KV-cache spec reads the DSL."""
TRANSFORMERS_AVAILABILITY = ("is_torchvision_available", "is_torchaudio_available",
                             "is_mistral_common_available", "is_tiktoken_available")
"""transformers' cached availability checks, answered before the stand-ins are importable."""
AVAILABILITY = {
    "vllm.model_executor.layers.sparse_attn_indexer": {
        "has_deep_gemm": "DeepGEMM: vendored in the wheel (vllm/third_party/deep_gemm); "
                         "SparseAttnIndexer.__init__ raises on CUDA without it"},
}
"""Module -> availability query it binds -> why it answers True (as on a Hopper deployment)."""


ACCELERATOR_ANSWERS: dict[str, Any] = {
    "current_device_index": lambda: 0,
    "empty_cache": lambda: None,
    "max_memory_allocated": lambda *args, **kwargs: 0,
}
"""``torch.accelerator`` queries answered while a model is initialised (the one GPU, index 0;
nothing allocated on the meta device): a backend's ``__init__`` sizes work by the device's
units, and the loader frees and reports memory after (dummy) weights."""


COMPILED_LIST = "{package}.compiled-extensions"
"""Beside a source tree's package: the compiled extensions its wheel ships and the tree leaves
out (``scripts/vllm_history.py``'s trees), so the corpus build stands in for them too."""


class StandInError(RuntimeError):
    """The release cannot be given its stand-ins (a layout this module does not know)."""


class _CompiledExtensions(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Empty modules for the compiled extensions the package ships (``<name>*.so``), and for those
    a source tree unpacked without its compiled code lists beside the package
    (:data:`COMPILED_LIST`: one ``.so`` path per line, relative to the package)."""

    def __init__(self, package: str, root: Path) -> None:
        self.package = package
        self.names = {_module_name(package, root, so) for so in root.rglob("*.so")}
        listed = root.parent / COMPILED_LIST.format(package=package)
        if listed.is_file():
            self.names |= {_module_name(package, root, root / line.strip())
                           for line in listed.read_text().splitlines() if line.strip().endswith(".so")}

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname in self.names:
            return importlib.machinery.ModuleSpec(fullname, self)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return types.ModuleType(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__doc__ = "stand-in for a compiled extension (kvcontract corpus build)"

    @property
    def namespaces(self) -> list[str]:
        """The ``torch.ops`` namespaces these extensions would register (their last part)."""
        return sorted({n.rsplit(".", 1)[-1] for n in self.names} | {"_C", "_C_cache_ops",
                                                                    "_C_custom_ar"})


def _module_name(package: str, root: Path, so: Path) -> str:
    rel = so.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    parts[-1] = parts[-1].split(".", 1)[0]
    return ".".join([package, *parts])


class UnavailableOp:
    """A compiled op looked up in a layer's ``__init__``: calling it is an error."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"stand-in: the compiled op {self._name} does not run here")

    def __getattr__(self, attr: str) -> UnavailableOp:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return UnavailableOp(f"{self._name}.{attr}")


class _Placeholder:
    """A CUDA stream or event made in ``__init__`` (used only in ``forward``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return UnavailableOp(f"torch.cuda stand-in .{attr}")


class _InertModule(types.ModuleType):
    """A stand-in package module: every public name is an :class:`InertName`."""

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return InertName(f"{self.__name__}.{attr}")


class InertName(UnavailableOp):
    """A name of a stand-in package: usable as a base class (dropped from the bases) and in
    annotations; calling it raises."""

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[Any, ...]:
        return ()

    def __getattr__(self, attr: str) -> InertName:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return InertName(f"{self._name}.{attr}")


class _DSLMeta(type):
    """The kernel-language stand-in's names are classes of this metaclass: they can be called
    (a decorator keeps the function it decorates; anything else gives another name),
    subscripted, subclassed and read from, and nothing is an instance of them (a library that
    probes ``isinstance(x, cuda.bindings.driver.CUstream)`` gets False)."""

    def __getattr__(cls, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return dsl_name(f"{cls.__qualname__}.{attr}")

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], _DSLMeta):
            return args[0]
        return dsl_name(f"{cls.__qualname__}(...)")

    def __getitem__(cls, key: Any) -> Any:
        return dsl_name(f"{cls.__qualname__}[...]")


def dsl_name(name: str) -> Any:
    """A name of the kernel-language stand-in (:class:`_DSLMeta`)."""
    return _DSLMeta(name, (), {"__qualname__": name, "__module__": "kvcontract.standin"})


class _DSLModule(types.ModuleType):
    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return dsl_name(f"{self.__name__}.{attr}")


class _ImportOnly(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Inert modules for :data:`IMPORT_ONLY` packages not installed here (any submodule), and
    :data:`KERNEL_DSL`'s."""

    def __init__(self, tops: tuple[str, ...], dsl: tuple[str, ...] = ()) -> None:
        self.tops = tuple(t for t in (*tops, *dsl) if importlib.util.find_spec(t) is None)
        self.dsl = frozenset(dsl) & frozenset(self.tops)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname.split(".", 1)[0] in self.tops:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        dsl = spec.name.split(".", 1)[0] in self.dsl
        module = _DSLModule(spec.name) if dsl else _InertModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        module.__doc__ = "inert stand-in for a package not installable here (kvcontract corpus build)"


def _declared(package: str, wanted: dict[str, str]) -> tuple[str, ...]:
    """The packages of ``wanted`` whose distribution the release's metadata requires (a
    stand-in only ever stands in for what a deployment of the release has)."""
    import importlib.metadata
    import re

    required = set()
    for line in importlib.metadata.requires(package) or []:
        if "extra ==" not in line:
            name = re.split(r"[\s\[<>=!~;]", line, maxsplit=1)[0]
            required.add(name.lower().replace("-", "_"))
    return tuple(top for top, dist in wanted.items() if dist.lower().replace("-", "_") in required)


def _answer_transformers_first() -> list[str]:
    """transformers' cached availability checks, answered while the packages are absent."""
    utils = importlib.import_module("transformers.utils.import_utils")
    answered = []
    for name in TRANSFORMERS_AVAILABILITY:
        check = getattr(utils, name, None)
        if check is not None:
            check()
            answered.append(name)
    return answered


def _answer_availability() -> dict[str, str]:
    """Bind :data:`AVAILABILITY`'s answers in the modules that ask."""
    done = {}
    for module_name, queries in AVAILABILITY.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                continue  # a release without the module has no layer that asks
            raise
        for query, why in queries.items():
            if not hasattr(module, query):
                continue  # nor does one whose module does not ask it
            setattr(module, query, lambda *args, **kwargs: True)
            done[f"{module_name}.{query}"] = why
    return done


_INSTALLED: dict[str, Any] = {}


def install(package: str = "vllm") -> dict[str, Any]:
    """Put the stand-ins in place for ``package`` (once per process); returns what was
    installed (recorded with the corpus)."""
    if package in _INSTALLED:
        done: dict[str, Any] = _INSTALLED[package]
        return done
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise StandInError(f"{package} is not an importable package here")
    root = Path(next(iter(spec.submodule_search_locations)))
    extensions = _CompiledExtensions(package, root)
    sys.meta_path.insert(0, extensions)
    answered = _answer_transformers_first()
    import_only = _ImportOnly(_declared(package, IMPORT_ONLY), _declared(package, KERNEL_DSL))
    sys.meta_path.append(import_only)

    import torch

    platforms = importlib.import_module(f"{package}.platforms")
    cuda = importlib.import_module(f"{package}.platforms.cuda")
    interface = importlib.import_module(f"{package}.platforms.interface")
    capability = interface.DeviceCapability(*CAPABILITY)

    class StandInCudaPlatform(cuda.CudaPlatformBase):  # type: ignore[name-defined, misc]
        """Hopper GPUs whose current device is ``meta`` (kvcontract corpus build)."""

        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> Any:
            return capability

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return DEVICE_NAME

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            return MEMORY_BYTES

        @classmethod
        def is_fully_connected(cls, physical_device_ids: list[int]) -> bool:
            return True

        @classmethod
        def device_count(cls) -> int:
            return DEVICE_COUNT

        @classmethod
        def current_device(cls) -> Any:
            return torch.device("meta")

        @classmethod
        def num_compute_units(cls, device_id: int = 0) -> int:
            return COMPUTE_UNITS

        @classmethod
        def is_integrated_gpu(cls, device_id: int = 0) -> bool:
            return False

    setattr(platforms, "current_platform", StandInCudaPlatform())  # noqa: B010 - the module's own __setattr__
    ops = importlib.import_module(f"{package}._custom_ops")
    for name in CAPABILITY_QUERIES:
        if hasattr(ops, name):
            setattr(ops, name, lambda *args, **kwargs: False)
    registry = importlib.import_module(f"{package}.model_executor.models.registry")
    if hasattr(registry, "_run_in_subprocess"):
        setattr(registry, "_run_in_subprocess", lambda fn: fn())  # noqa: B010
    torch.cuda.Stream = _Placeholder  # type: ignore[misc, assignment]
    torch.cuda.Event = _Placeholder  # type: ignore[misc, assignment]
    availability = _answer_availability()
    _INSTALLED[package] = {
        "platform": f"{StandInCudaPlatform.__name__}({cuda.CudaPlatformBase.__name__}): "
                    f"{DEVICE_COUNT} x {DEVICE_NAME}, SM {CAPABILITY[0]}.{CAPABILITY[1]}, "
                    "current device meta",
        "compiled_extensions": sorted(extensions.names),
        "op_namespaces": extensions.namespaces,
        "capability_queries": [n for n in CAPABILITY_QUERIES if hasattr(ops, n)],
        "placeholders": ["torch.cuda.Stream", "torch.cuda.Event"],
        "accelerator_while_initialising": sorted(ACCELERATOR_ANSWERS),
        "inspection": "the model registry inspects model classes in the building process",
        "import_only": sorted(set(import_only.tops) - import_only.dsl),
        "kernel_dsl": sorted(import_only.dsl),
        "transformers_answered_absent": answered,
        "availability": availability,
    }
    installed: dict[str, Any] = _INSTALLED[package]
    return installed


def _cuda_is_meta() -> Any:
    """A torch function mode in which a tensor asked for on ``cuda`` is made on ``meta``."""
    import torch
    from torch.overrides import TorchFunctionMode

    def meta(device: Any) -> Any:
        is_cuda = (isinstance(device, str) and device.startswith("cuda")) or \
            (isinstance(device, torch.device) and device.type == "cuda") or \
            (isinstance(device, int) and not isinstance(device, bool))
        return torch.device("meta") if is_cuda else device

    class CudaIsMeta(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = dict(kwargs or {})
            if "device" in kwargs:
                kwargs["device"] = meta(kwargs["device"])
            name = getattr(func, "__name__", "")
            if name == "cuda" and args:  # Tensor.cuda(): stays where it is (meta)
                return args[0]
            if name == "to" and len(args) > 1 and not isinstance(args[1], torch.Tensor):
                args = (args[0], meta(args[1]), *args[2:])
            return func(*args, **kwargs)

    return CudaIsMeta()


@contextlib.contextmanager
def model_init(package: str = "vllm") -> Iterator[None]:
    """While a model is initialised: the GPU is the meta device (a tensor asked for on ``cuda``
    is made on ``meta``), and the compiled extensions' ``torch.ops`` namespaces resolve to
    placeholders (a layer's ``__init__`` looks an op up). Only then: a module imported outside
    it sees the real (empty) namespaces, as its import-time ``hasattr`` checks expect."""
    import torch

    namespaces = install(package)["op_namespaces"]
    for namespace in namespaces:
        setattr(torch.ops, namespace, UnavailableOp(f"torch.ops.{namespace}"))
    saved = {name: getattr(torch.accelerator, name) for name in ACCELERATOR_ANSWERS}
    for name, answer in ACCELERATOR_ANSWERS.items():
        setattr(torch.accelerator, name, answer)
    try:
        with _cuda_is_meta(), torch.device("meta"):
            yield
    finally:
        for namespace in namespaces:
            with contextlib.suppress(AttributeError):
                delattr(torch.ops, namespace)
        for name, original in saved.items():
            setattr(torch.accelerator, name, original)
