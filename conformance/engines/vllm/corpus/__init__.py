"""The corpus of a vLLM release: every architecture it registers, built by its own model code.

:mod:`.drive` builds one architecture as vLLM's model-initialisation test does (the model
class's ``__init__`` under the release's config machinery, on the meta device, world size 1),
with what stands in for a GPU here (:mod:`.standin`) and a configuration available offline
(:mod:`.configs`: the config classes the release and transformers ship, and
``published.toml``); :mod:`.pool` builds them all in supervised workers; this module finds a
corpus for an installed release or a source tree without importing it: the one shipped with
the kit when the installed wheel is the one it was built from, else the kit's cache, else a
build (minutes; cached after).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

SHIPPED_DIR = Path(__file__).parent
PINNED_RELEASE = "0.34.0"
"""The release whose corpus engines without a corpus of their own are fed (the kit's pin)."""


def shipped_path(release: str) -> Path:
    return SHIPPED_DIR / f"vllm-{release}.json.gz"


@dataclass(frozen=True)
class Identity:
    """Which engine source a corpus was built from (what the cache is keyed by)."""

    release: str
    key: str
    """``wheel:<digest of the installed distribution's RECORD>`` or ``tree:<digest of the source
    files' names, sizes and times>``, with the builder's version and transformers' version."""
    where: str


def _transformers_version() -> str:
    try:
        return importlib.metadata.version("transformers")
    except importlib.metadata.PackageNotFoundError:
        return "none"


def _suffix() -> str:
    from kvcontract.conformance.engines.vllm.corpus.pool import BUILDER_VERSION

    return f"b{BUILDER_VERSION}-transformers{_transformers_version()}"


def identity(package: str = "vllm", source_path: str | os.PathLike[str] | None = None,
             distribution: str = "vllm") -> Identity | None:
    """The engine source's identity, without importing it: an installed distribution's RECORD
    (every file's hash), or a source tree's files; None when neither is here."""
    if source_path is not None:
        root = Path(source_path).resolve() / package
        if not root.is_dir():
            return None
        digest = hashlib.sha256()
        for directory, dirs, files in sorted(os.walk(root)):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(".py"):
                    st = os.stat(os.path.join(directory, name))
                    digest.update(f"{directory}/{name}:{st.st_size}:{st.st_mtime_ns};".encode())
        release = _tree_release(root)
        return Identity(release, f"tree:{digest.hexdigest()[:20]}-{_suffix()}", str(root))
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
    recorded = hashlib.sha256("\n".join(_content_lines(dist.read_text("RECORD") or "")).encode()).hexdigest()[:20]
    return Identity(str(dist.version), f"wheel:{recorded}-{_suffix()}", str(dist.locate_file("")))


INSTALL_RECORDS = ("INSTALLER", "REQUESTED", "direct_url.json", "RECORD")
"""What an install writes beside the wheel's files (the installer, how it was asked for): not content."""


def _content_lines(record: str) -> list[str]:
    """The RECORD lines of the wheel's own files, each with its hash: not the scripts the install
    writes outside the package (their first line names the environment's interpreter), not what the
    installer records of itself, not the compiled bytecode (no hash)."""
    out = []
    for line in record.splitlines():
        path, _, rest = line.partition(",")
        path = path.strip('"')
        if not rest.split(",", 1)[0] or path.startswith("../") or path.rsplit("/", 1)[-1] in INSTALL_RECORDS:
            continue
        out.append(line)
    return sorted(out)


def _tree_release(root: Path) -> str:
    """A source tree's version as its ``_version.py`` or ``version.py`` states it ("tree" if none)."""
    import re

    for name in ("_version.py", "version.py"):
        path = root / name
        if path.is_file():
            found = re.search(r"""(?:__version__|version)\s*(?::\s*str\s*)?=\s*['"]([^'"]+)['"]""",
                              path.read_text(encoding="utf-8", errors="replace"))
            if found:
                return found.group(1)
    return "tree"


def _cache_path(ident: Identity) -> Path | None:
    from kvcontract.reports import cache_dir

    base = cache_dir()
    if base is None:
        return None
    safe = ident.key.replace(":", "-").replace("/", "-")
    return base / "corpus" / f"vllm-{ident.release}-{safe}.json.gz"


def _shipped_key(path: Path) -> str | None:
    import gzip
    import json

    try:
        data = json.loads(gzip.decompress(path.read_bytes()))
    except (OSError, ValueError):
        return None
    return str(data.get("digest") or "") or None


def find(ident: Identity) -> Path | None:
    """A corpus built from exactly this source: the shipped one, else the cache's."""
    shipped = shipped_path(ident.release)
    if shipped.is_file() and _shipped_key(shipped) == ident.key:
        return shipped
    cached = _cache_path(ident)
    return cached if cached is not None and cached.is_file() else None


def build_and_keep(ident: Identity, *, env: Mapping[str, str] | None = None, jobs: int = 2,
                   progress: object = None, out: Path | None = None) -> Path:
    """Build the corpus of this source (in workers with ``env``) and keep it in the cache (or
    at ``out``); returns where it is."""
    from kvcontract.conformance.contract.corpus import write_corpus
    from kvcontract.conformance.engines.vllm.corpus.pool import build_corpus

    corpus = build_corpus(jobs=jobs, env=env, progress=progress)  # type: ignore[arg-type]
    corpus.digest = ident.key
    target = out or _cache_path(ident)
    if target is None:
        raise RuntimeError("the kit's cache is off ($KVCONTRACT_CACHE_DIR=off): give the corpus a path")
    target.parent.mkdir(parents=True, exist_ok=True)
    write_corpus(corpus, target)
    return target


REASON_CLASSES: tuple[tuple[str, str], ...] = (
    ("a speculative-decoding draft (built beside its target)", r"^a speculative-decoding draft"),
    ("no config class offline (remote code or a vLLM-only family)", r"^NoConfig: no config"),
    ("several config classes named, none the architecture's", r"^NoConfig: its model module names"),
    ("a config default lacks a value the model reads",
     r"^(AttributeError|TypeError|KeyError): .*(has no attribute|NoneType|not subscriptable|"
     r"'\w+'\s*\(at)"),
    ("the model module needs a package not installed here", r"cannot be imported here|No module named"),
    ("the model code rejects the config defaults",
     r"^(ValueError|AssertionError|NotImplementedError|ValidationError|RuntimeError: Step|"
     r"OSError: Can't load)"),
    ("the meta device or the stand-in GPU cannot run what __init__ runs",
     r"meta tensor|accelerator|CUDA|Could not load this library"),
    ("the target cannot be built", r"^the target cannot be built"),
)


def reason_class(reason: str) -> str:
    """A skip reason's class, for the counts (``kvcontract tables``, ``docs/corpus.md``)."""
    for name, pattern in REASON_CLASSES:
        if re.search(pattern, reason):
            return name
    return "other (see the corpus's skipped list)"
