"""aphrodite-engine: a fork of vLLM (0.29.0 with picks from later releases) under its own
package, ``aphrodite``. One declaration: vLLM's homes moved under ``aphrodite``, its own config
class and log variable. It needs the kit's torch (2.13.0) and nothing that clashes with the
pinned vLLM, but it is installed into an engine environment of its own
(``bash scripts/install-engine.sh aphrodite``), so that its light packages never change the
kit's environment.

``kvcontract check --engine aphrodite`` checks the installed release; its bundled expectations
are ``conformance/xfails/aphrodite-engine-<version>.toml``.
"""

from __future__ import annotations

from kvcontract.conformance.engines.vllm.adapter import adapter_factory
from kvcontract.conformance.engines.vllm.homes import (
         VLLM_HOMES,
         EngineDeclaration,
         FieldRole,
     )

_READ = ("aphrodite/v1/worker/utils.py:428 (the worker views a group's MLA cache in blocks of "
         "storage_block_size tokens)")
FIELD_ROLES = (
    FieldRole("MLAAttentionSpec", "storage_block_size", "layout", (None, 64), _READ),
    FieldRole("HiddenStateCacheSpec", "storage_block_size", "layout", (None, 64), _READ),
)
"""The field the fork adds to its MLA kinds (``aphrodite/v1/kv_cache_interface.py`` l.540), set by
its Qwen4-exp and GLM-5-next layers: it shapes the cache view the kernels see, a LAYOUT field. Its
new class ``KpoolTailSpec`` (a one-block circular ``SlidingWindowSpec``) is left to the drift
guard: the contract does not classify it."""

DECLARATION = EngineDeclaration(
    name="aphrodite",
    distribution="aphrodite-engine",
    homes=VLLM_HOMES.rebased("aphrodite", config_class="aphrodite.config.AphroditeConfig",
                             logging_env="APHRODITE_LOGGING_LEVEL"),
    field_roles=FIELD_ROLES,
    environment="aphrodite",
    install="bash scripts/install-engine.sh aphrodite",
    base="a fork of vLLM 0.29.0 with picks from later releases",
)


factory = adapter_factory(DECLARATION)
"""The adapter (``--engine aphrodite``)."""
