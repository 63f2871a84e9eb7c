"""Engine environments: where an engine that cannot live in the kit's own environment is
installed, and how the check's workers run in it.

A fork or plugin whose packages would disturb the pinned vLLM the kit checks by default (a
plugin needs its own base vLLM) is installed by ``bash scripts/install-engine.sh NAME`` into an
environment of its own: folders of packages (``pip install --target``) that the workers put
first on their path, over the kit's interpreter (torch and the kit itself come from there).
``<root>/<name>/kvcontract-env.json`` records those folders once the install has finished;
``<root>`` is ``$KVCONTRACT_ENGINE_ENVS``, default ``~/.cache/kvcontract/engines``.

The command line reads only the engine's declaration here (no engine is imported): a
declared environment that is not installed is a usage error naming the install step.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

STATE = "kvcontract-env.json"
PATH_ENV = "PYTHONPATH"


class EnvironmentMissing(LookupError):
    """An engine's declared environment is not installed here (the message says how to install it)."""


def root() -> Path:
    """Where engine environments live."""
    return Path(os.environ.get("KVCONTRACT_ENGINE_ENVS", Path.home() / ".cache" / "kvcontract" / "engines"))


def env_dir(name: str) -> Path:
    return root() / name


def state(name: str) -> dict[str, Any] | None:
    """The environment's record (``paths``: the folders put first; ``versions``), or None when
    it is not installed (or its install did not finish)."""
    try:
        data = json.loads((env_dir(name) / STATE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not data.get("ok") or not isinstance(data.get("paths"), list):
        return None
    return data


def paths(name: str, install: str = "") -> list[str]:
    """The folders the environment puts first on a worker's path; raises :class:`EnvironmentMissing`
    when it is not installed, or one of its folders has gone."""
    found = state(name)
    how = f"; install it with: {install}" if install else ""
    if found is None:
        raise EnvironmentMissing(f"the engine environment {name!r} is not installed here "
                                 f"(no {env_dir(name) / STATE}){how}")
    missing = [p for p in found["paths"] if not Path(p).is_dir()]
    if missing:
        raise EnvironmentMissing(f"the engine environment {name!r} lacks {', '.join(missing)}{how}")
    return [str(p) for p in found["paths"]]


def worker_env(name: str, base: Mapping[str, str], install: str = "") -> dict[str, str]:
    """``base`` with the environment's folders first on ``PYTHONPATH`` (:func:`paths`)."""
    env = dict(base)
    ahead = paths(name, install)
    rest = [p for p in env.get(PATH_ENV, "").split(os.pathsep) if p and p not in ahead]
    env[PATH_ENV] = os.pathsep.join([*ahead, *rest])
    return env
