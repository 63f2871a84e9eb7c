"""The config objects the vLLM adapters hand the engine: the part of a ``VllmConfig``
grouping and routing read, learned by trying (shared by the merge/grouping adapter
and the routing adapter, without one importing the other)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvcontract.conformance.contract.model import KitFailure


class ConfigGap(KitFailure, AttributeError):
    """The release read a config attribute the adapter does not give (grouping: no
    neutral value; routing: not in the builder recipe): the kit could not drive the
    engine there (an error, never a finding).
    An ``AttributeError`` too, so ``getattr(config, name, default)`` in the engine
    takes its own default, as it would for a config without that attribute."""

    def __init__(self, path: str) -> None:
        super().__init__(f"the release reads vllm_config.{path}, which the adapter's config does not give")
        self.path = path


class StrictConfig:
    """The part of a ``VllmConfig`` grouping reads, learned by trying: the values
    given; any other attribute read raises :class:`ConfigGap` naming its path."""

    def __init__(self, path: str, values: Mapping[str, Any]) -> None:
        self._path = path
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise ConfigGap(f"{self._path}{name}")

    def __repr__(self) -> str:
        shown = {k: v for k, v in vars(self).items() if not k.startswith("_")}
        return f"StrictConfig({self._path or 'vllm_config'}, {shown})"
