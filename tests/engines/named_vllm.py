"""Engines that call themselves ``vllm`` 0.34.0 and are not vLLM's own distribution:
the bundled vLLM expectations must not apply to them (they are keyed on the declared
distribution, never on the display name).

- ``fork``: declares the distribution ``acme-vllm``;
- ``undeclared``: declares no distribution.
"""

from __future__ import annotations

from kvcontract.conformance.engines.reference import ReferenceEngine


class UndeclaredEngine(ReferenceEngine):
    name = "vllm"
    version = "0.34.0"


class ForkEngine(UndeclaredEngine):
    distribution = "acme-vllm"


def fork() -> ForkEngine:
    return ForkEngine()


def undeclared() -> UndeclaredEngine:
    return UndeclaredEngine()
