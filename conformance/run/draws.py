"""One seed, the same examples in every process: a pinned shim over one private hypothesis name.

Why. Since its "local constants" feature, hypothesis now and then draws a *constant found in
the source of the modules this process has loaded* — any module outside site-packages and the
standard library, tests excluded: the kit itself (an editable install), a third-party adapter,
an engine checked from a source tree. What a process has loaded differs between the normal
and the ``python -O`` worker (they import different modules lazily), between a worker and a
pytest session, and between a worker before and after an engine's import. With the constants
mixed in, a seed drew different examples in each: the two passes of ``check`` judged different
inputs (``tests/test_conformance_suite.py::test_normal_and_optimized_passes_draw_the_same_examples``)
and a run's findings depended on which modules happened to be imported first.

Why private. Hypothesis offers no public switch for it (checked on the versions below: no
setting, no profile option, no environment variable; ``derandomize``, ``@seed`` and the
database leave it alone). So :func:`neutralize_local_constants` replaces
``hypothesis.internal.conjecture.providers._get_local_constants`` — the one function every
provider asks for the constants — by one that returns none. Only the local pool is emptied:
hypothesis' own global constants (0, 1, -1, inf, nan, ...) are still drawn.

Pinned. :data:`VERIFIED` is the range of hypothesis releases this was checked on (the
reference's and vLLM 0.34.0's finding digests, ``tests/test_draws.py``). Outside it the shim
still applies when the private name is there, with a :class:`UnverifiedHypothesis` warning;
when the name is gone it cannot, and says so with the same warning (a worker's warnings end in
the report's engine log). Widen :data:`VERIFIED` only after re-running those checks.
"""

from __future__ import annotations

import warnings

import hypothesis

VERIFIED: tuple[tuple[int, int, int], tuple[int, int, int]] = ((6, 170, 0), (6, 171, 0))
"""``[first, end)`` of the hypothesis releases the shim was verified on."""
PRIVATE_MODULE = "hypothesis.internal.conjecture.providers"
PRIVATE_NAME = "_get_local_constants"


class UnverifiedHypothesis(UserWarning):
    """The installed hypothesis is outside :data:`VERIFIED`: draws may depend on the modules loaded."""


def verified(version: tuple[int, ...] | None = None) -> bool:
    """Whether ``version`` (default: the installed hypothesis) is in :data:`VERIFIED`."""
    v = tuple(hypothesis.__version_info__ if version is None else version)
    return VERIFIED[0] <= v < VERIFIED[1]


def neutralize_local_constants() -> bool:
    """Make hypothesis draw no constant of the modules loaded; True when applied."""
    import importlib

    release = ".".join(map(str, hypothesis.__version_info__))
    try:
        providers = importlib.import_module(PRIVATE_MODULE)
        original = getattr(providers, PRIVATE_NAME)
        empty = providers.Constants()
    except (ImportError, AttributeError) as exc:
        warnings.warn(f"hypothesis {release}: cannot empty the local-constants pool ({exc}); examples "
                      "drawn for a seed may differ between the normal and the -O pass",
                      UnverifiedHypothesis, stacklevel=2)
        return False
    if not callable(original):
        warnings.warn(f"hypothesis {release}: {PRIVATE_MODULE}.{PRIVATE_NAME} is no function; the "
                      "local-constants pool is left as it is", UnverifiedHypothesis, stacklevel=2)
        return False
    if not verified():
        warnings.warn(f"hypothesis {release} is outside the releases the local-constants shim was verified "
                      f"on ({'.'.join(map(str, VERIFIED[0]))} to before {'.'.join(map(str, VERIFIED[1]))}); "
                      "it is applied unverified", UnverifiedHypothesis, stacklevel=2)
    setattr(providers, PRIVATE_NAME, lambda: empty)
    return True
