"""Values at the boundary into an engine's native code (torch tensors, kernels).

The symbolic search (:mod:`kvcontract.conformance.run.symbolic.values`) hands adapters
CrossHair integers so that the engine's Python branches on them are solved; native code cannot
take them. An adapter passes values bound for native code through :func:`concrete_ints`: plain
integers, a symbolic one realized there (a value of its path condition), and nowhere before.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any


def concrete_int(value: Any) -> int:
    """``value`` as a plain ``int`` (a CrossHair integer realized; others through ``int()``)."""
    core = sys.modules.get("crosshair.core")  # loaded only by a symbolic search
    if core is not None:
        value = core.realize(value)
    return int(value)


def concrete_ints(values: Iterable[Any]) -> tuple[int, ...]:
    return tuple(concrete_int(v) for v in values)
