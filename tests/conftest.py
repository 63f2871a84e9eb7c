"""Shared test settings: hypothesis profiles sized for a 2-core CI machine.

Markers (registered in pyproject.toml): ``slow`` (left out of the fast lane,
``pytest -m "not slow"``), ``vllm`` (needs an importable vLLM), ``triton``
(needs Triton, vLLM's kernels through its interpreter).
"""

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=30, deadline=None)
settings.load_profile("ci")


def pytest_addoption(parser):  # type: ignore[no-untyped-def]
    parser.addoption(
        "--releases",
        action="store_true",
        default=False,
        help="run the tests marked 'releases' (they build or drive other releases' environments; "
        "the scheduled job runs them, the README's test command leaves them out)",
    )


def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    import os

    import pytest

    if config.getoption("--releases") or os.environ.get("KVCONTRACT_RELEASES") == "1":
        return
    skip = pytest.mark.skip(
        reason="drives other releases' environments (minutes each, a download the first time): "
        "pytest --releases, or KVCONTRACT_RELEASES=1, runs it; the scheduled job does"
    )
    for item in items:
        if "releases" in item.keywords:
            item.add_marker(skip)
