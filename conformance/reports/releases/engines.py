"""Building an engine environment (``bash scripts/install-engine.sh NAME``): a fork's or plugin's
packages in folders of their own that the check's workers put first on their path
(:mod:`kvcontract.conformance.engines.environments`), over the kit's interpreter.

An environment is made of, outermost first:

1. ``site/``: the engine's own distribution, by name and version (:data:`RECIPES`): a wheel
   installed with ``pip install --no-deps --target``; a plugin published only as a source
   distribution has its Python package copied from the unpacked source (its compiled operators
   are not built: nothing the kit drives runs them) with a ``.dist-info`` made from its
   ``PKG-INFO``, so that the distribution is known (bundled expectations are keyed on it); then
   the light packages it imports that the layers below lack, found by loading the engine through
   the kit (its stand-ins in place) and installing one package per missing module, pinned in
   ``requirements/<name>-<version>-cpu.txt``;
2. a plugin's base vLLM release: that release's environment (:mod:`.environments`: its Python
   files and light packages, pinned in ``requirements/vllm-<release>-cpu.txt``);
3. the kit's interpreter (torch 2.13.0 CPU and the pins of ``requirements/vllm-0.34.0-cpu.txt``).
"""

from __future__ import annotations

import argparse
import dataclasses
import email.parser
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kvcontract.conformance.engines import environments as runtime
from kvcontract.conformance.reports.releases.environments import (
    ENV_ROOT,
    REPO,
    Problems,
    build_env,
    install_missing,
    installed_extras,
    normalize,
    pinned,
    say,
)


@dataclasses.dataclass(frozen=True)
class Recipe:
    """How one engine environment is built."""

    engine: str
    """The engine name whose declaration is loaded to probe the environment."""
    distribution: str
    version: str
    package: str
    """The top-level package the distribution ships."""
    sdist: bool = False
    """Published as a source distribution only (its Python package is copied, not built)."""
    base_release: str | None = None
    """A plugin's base vLLM release (its own environment is the layer below)."""


RECIPES: dict[str, Recipe] = {
    "aphrodite": Recipe("aphrodite", "aphrodite-engine", "0.24.1", "aphrodite"),
    "vllm-ascend": Recipe("vllm-ascend", "vllm-ascend", "0.23.0.post1", "vllm_ascend", sdist=True,
                          base_release="0.23.0"),
}
"""Engine environment name -> what it installs (the versions the bundled expectations are for)."""

PROBE = """
import importlib, json, sys
from kvcontract.conformance.engines.declared import declaration_of
from kvcontract.conformance.engines.vllm.loading import load
out = []
declaration = declaration_of(sys.argv[1])
steps = [("load", None), *((m, m) for m in declaration.homes.planning[:1]),
         *((m, m) for m in declaration.homes.routing_builders[:1])]
for label, module in steps:
    try:
        load(declaration) if module is None else importlib.import_module(module)
        out.append(None)
    except ModuleNotFoundError as exc:
        absent = exc.name and module and (exc.name == module or module.startswith(exc.name + "."))
        out.append(None if absent else {"missing": exc.name, "error": f"{type(exc).__name__}: {exc}"})
    except Exception as exc:  # noqa: BLE001
        out.append({"missing": getattr(exc, "missing", None), "error": f"{type(exc).__name__}: {exc}"})
print(json.dumps(out))
"""
"""Loads the engine as the check does (stand-ins, patches, registrations), then the modules
grouping and routing import: one answer each."""


def pins_file(recipe: Recipe) -> Path:
    return REPO / "requirements" / f"{recipe.distribution}-{recipe.version}-cpu.txt"


def _env(paths: Sequence[str]) -> dict[str, str]:
    return dict(os.environ, CUDA_VISIBLE_DEVICES="", VLLM_LOGGING_LEVEL="ERROR", TRITON_INTERPRET="1",
                PYTHONPATH=os.pathsep.join([*paths, str(REPO)]), PYTHONDONTWRITEBYTECODE="1")


def probe(python: str, recipe: Recipe, paths: Sequence[str]) -> Problems:
    proc = subprocess.run([python, "-c", PROBE, recipe.engine], capture_output=True, text=True,
                          env=_env(paths), cwd=str(REPO), timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"the import probe crashed:\n{proc.stderr[-2000:]}")
    result: Problems = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _pip(python: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([python, "-m", "pip", *args], capture_output=True, text=True, env=env)


def install_wheel(python: str, recipe: Recipe, site: Path) -> dict[str, str]:
    """The distribution's wheel into ``site``, without its dependencies; its own requirements."""
    requirement = f"{recipe.distribution}=={recipe.version}"
    say(f"{recipe.engine}: installing {requirement} (--no-deps) into {site}")
    proc = _pip(python, "install", "--quiet", "--no-deps", "--only-binary=:all:", "--target", str(site),
                requirement)
    if proc.returncode != 0:
        raise RuntimeError(f"pip could not install {requirement}: {proc.stderr.strip()[-600:]}")
    return _requirements(next(site.glob(f"{recipe.distribution.replace('-', '_')}-*.dist-info/METADATA")))


def install_sdist(python: str, recipe: Recipe, site: Path) -> dict[str, str]:
    """The distribution's Python package from its source distribution into ``site``, with a
    ``.dist-info`` from its ``PKG-INFO``. pip downloads and unpacks it; preparing its metadata
    needs its build requirements (the device's toolchain), so that step is left to fail and the
    unpacked source kept (``--no-build-isolation --no-clean`` in a folder of our own)."""
    requirement = f"{recipe.distribution}=={recipe.version}"
    say(f"{recipe.engine}: fetching the source distribution of {requirement}")
    with tempfile.TemporaryDirectory(prefix="kvcontract-sdist-") as tmp:
        env = dict(os.environ, TMPDIR=tmp)
        _pip(python, "download", "--quiet", "--no-deps", "--no-binary=:all:", "--no-build-isolation",
             "--no-clean", "-d", str(Path(tmp) / "dl"), requirement, env=env)
        found = [Path(p) for p in glob.glob(f"{tmp}/**/PKG-INFO", recursive=True)
                 if (Path(p).parent / recipe.package / "__init__.py").is_file()]
        if not found:
            raise RuntimeError(f"pip left no unpacked source of {requirement} (with {recipe.package}/) in {tmp}")
        source = found[0].parent
        shutil.rmtree(site / recipe.package, ignore_errors=True)
        shutil.copytree(source / recipe.package, site / recipe.package,
                        ignore=shutil.ignore_patterns("*.so", "*.cpp", "*.h", "__pycache__"))
        info = site / f"{recipe.package}-{recipe.version}.dist-info"
        shutil.rmtree(info, ignore_errors=True)
        info.mkdir()
        shutil.copy(found[0], info / "METADATA")
        (info / "INSTALLER").write_text("kvcontract (source package, not built)\n")
        files = sorted(p.relative_to(site).as_posix() for p in (site / recipe.package).rglob("*") if p.is_file())
        (info / "RECORD").write_text("".join(f"{f},,\n" for f in [*files, f"{info.name}/METADATA",
                                                                    f"{info.name}/INSTALLER", f"{info.name}/RECORD"]))
    return _requirements(info / "METADATA")


def _requirements(metadata: Path) -> dict[str, str]:
    message = email.parser.Parser().parsestr(metadata.read_text(errors="replace"))
    out = {}
    for req in message.get_all("Requires-Dist") or []:
        if "extra ==" in req:
            continue
        spec = req.split(";", 1)[0].strip()
        name = spec.replace("(", " ").split()[0].split("[")[0]
        for sep in ("<", ">", "=", "!", "~"):
            name = name.split(sep)[0]
        out[normalize(name)] = spec.replace(" ", "")
    return out


def write_pins(recipe: Recipe, extras: dict[str, str]) -> None:
    lines = [f"# Light packages {recipe.distribution} {recipe.version} imports on the CPU beyond "
             + (f"vLLM {recipe.base_release}'s environment (requirements/vllm-{recipe.base_release}-cpu.txt)"
                if recipe.base_release else "the kit's environment (requirements/vllm-0.34.0-cpu.txt)") + ",",
             "# found by loading the engine through the kit and installing one package per missing module;",
             f"# installed into its engine environment by: bash scripts/install-engine.sh {recipe.engine}",
             *(f"{n}=={v}" for n, v in extras.items())]
    pins_file(recipe).write_text("\n".join(lines) + "\n")


def install(name: str, python: str) -> dict[str, Any]:
    """Build (or rebuild) engine environment ``name``; its state (also written beside it)."""
    recipe = RECIPES[name]
    start = time.monotonic()
    env_dir = runtime.env_dir(name)
    (env_dir / runtime.STATE).unlink(missing_ok=True)
    site = env_dir / "site"
    shutil.rmtree(site, ignore_errors=True)
    site.mkdir(parents=True)
    paths = [str(site)]
    if recipe.base_release:
        base = build_env(recipe.base_release, python, ENV_ROOT)
        if not base.get("ok"):
            raise RuntimeError(f"vLLM {recipe.base_release}'s environment could not be built: {base.get('problems')}")
        paths += [str(ENV_ROOT / f"vllm-{recipe.base_release}" / "tree"),
                  str(ENV_ROOT / f"vllm-{recipe.base_release}" / "extras")]
    wanted = install_sdist(python, recipe, site) if recipe.sdist else install_wheel(python, recipe, site)
    pins = pinned(pins_file(recipe))
    if pins:  # the light packages found before, at their pins, in one go (the probe then finds none missing)
        say(f"{recipe.engine}: installing the {len(pins)} pinned light packages of {pins_file(recipe).name}")
        proc = _pip(python, "install", "--quiet", "--no-deps", "--target", str(site), "-r", str(pins_file(recipe)))
        if proc.returncode != 0:
            raise RuntimeError(f"pip could not install {pins_file(recipe)}: {proc.stderr.strip()[-600:]}")
    own = {normalize(recipe.distribution)}
    problems = install_missing(recipe.engine, python, lambda: probe(python, recipe, paths), site, wanted,
                               pins, {"vllm", "torch", recipe.distribution, recipe.package})
    extras = {n: v for n, v in installed_extras(site).items() if normalize(n) not in own}
    ok = problems[:1] == [None]
    state = {"ok": ok, "engine": recipe.engine, "distribution": recipe.distribution, "version": recipe.version,
             "base_release": recipe.base_release, "paths": paths, "extras": extras,
             "problems": [p for p in problems if p], "build_s": round(time.monotonic() - start, 1)}
    (env_dir / runtime.STATE).write_text(json.dumps(state, indent=2) + "\n")
    if ok:
        write_pins(recipe, extras)
    return state


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="install-engine", description=(
        "Install an engine built on vLLM's spec layer into an engine environment of its own "
        f"(under {runtime.root()}), for kvcontract check --engine NAME."))
    parser.add_argument("name", choices=sorted(RECIPES))
    args = parser.parse_args(argv)
    state = install(args.name, sys.executable)
    if not state["ok"]:
        problem = state["problems"][0] if state["problems"] else {"error": "unknown"}
        print(f"install-engine: {args.name} does not load here: {problem['error']}", file=sys.stderr)
        return 1
    say(f"{args.name}: installed in {state['build_s']}s ({len(state['extras'])} light packages); "
        f"check it with: kvcontract check --engine {args.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
