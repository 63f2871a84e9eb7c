"""Where the checked vLLM comes from: a source checkout put first on ``sys.path``
(``check --engine-path DIR``), that tree's git state, and the installed distribution
that ships the imported ``vllm`` package (which bundled expectations apply to it)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from types import ModuleType
from urllib.parse import unquote, urlparse

from kvcontract.conformance.engines.protocol import EngineUnavailable


def use_source_tree(path: str | os.PathLike[str], package: str = "vllm") -> Path:
    """Put a source checkout first on ``sys.path`` so that ``import PACKAGE`` (``vllm``, or a
    fork's package) resolves to it (``check --engine-path DIR``). Any directory whose package
    imports with this environment's dependencies will do; compiled extensions are not needed
    for the KV-cache code on the CPU."""
    root = Path(path).expanduser().resolve()
    if not (root / package / "__init__.py").is_file():
        what = "a vLLM" if package == "vllm" else f"an {package}" if package[0] in "aeiou" else f"a {package}"
        raise EngineUnavailable(f"{root} is not {what} source tree (no {package}/__init__.py)")
    loaded = sys.modules.get(package)
    if loaded is not None and not Path(getattr(loaded, "__file__", "") or "").resolve().is_relative_to(root):
        raise EngineUnavailable(f"another {package} ({getattr(loaded, '__file__', '?')}) is already imported in "
                                f"this process; {root} cannot replace it")
    if str(root) not in sys.path[:1]:
        sys.path.insert(0, str(root))
    return root


def git_state(root: Path) -> dict[str, str]:
    """``path``, ``describe`` (``git describe --tags --always --dirty`` without the
    suffix, or ``not a git tree``) and ``dirty`` (``yes`` / ``no`` / ``unknown``) of a tree."""
    def git(*args: str) -> subprocess.CompletedProcess[str] | None:
        try:
            return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None

    info = {"path": str(root), "describe": "not a git tree", "dirty": "unknown"}
    inside = git("rev-parse", "--is-inside-work-tree")
    if inside is None or inside.returncode != 0 or inside.stdout.strip() != "true":
        return info
    described = git("describe", "--tags", "--always")
    if described is not None and described.returncode == 0:
        info["describe"] = described.stdout.strip()
    status = git("status", "--porcelain", "--untracked-files=no", "--", ".")
    if status is not None and status.returncode == 0:
        info["dirty"] = "yes" if status.stdout.strip() else "no"
    return info


def distribution_of(module: ModuleType) -> str | None:
    """The installed distribution that ships ``module``'s file, by the name its metadata
    gives (``vllm`` for vLLM's own wheel); None when no installed distribution ships it
    (a tree on ``PYTHONPATH``, a vendored copy). Asked first: the distribution named like
    the module's top-level package; then every distribution that declares that package."""
    file = getattr(module, "__file__", None)
    if not file:
        return None
    target = Path(file).resolve()
    top = module.__name__.partition(".")[0]
    tried: set[str] = set()
    for name in _candidates(top):
        if name in tried:
            continue
        tried.add(name)
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if _ships(dist, target):
            return str(dist.metadata["Name"])
    return None


def _candidates(top: str) -> Iterator[str]:
    yield top
    yield from importlib.metadata.packages_distributions().get(top, [])  # scanned only when needed


def _ships(dist: importlib.metadata.Distribution, target: Path) -> bool:
    """Whether ``dist``'s record lists ``target``, or ``dist`` is an editable install of a
    directory holding it (``direct_url.json``, PEP 610)."""
    try:
        relative = PurePosixPath(target.relative_to(Path(str(dist.locate_file(""))).resolve()).as_posix())
    except ValueError:
        relative = None
    if relative is not None and any(PurePosixPath(str(f)) == relative for f in dist.files or ()):
        return True
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
    except ValueError:
        return False
    url = urlparse(str(direct.get("url", "")))
    if not direct.get("dir_info", {}).get("editable") or url.scheme != "file":
        return False
    return target.is_relative_to(Path(unquote(url.path)).resolve())
