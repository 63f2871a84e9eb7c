"""Shared test settings: hypothesis profiles sized for a 2-core CI machine."""

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=30, deadline=None)
settings.load_profile("ci")


def pytest_configure(config):
    """Register the markers the kernel tests use (the lead also registers them in pyproject)."""
    registered = "\n".join(config.getini("markers"))
    for name, text in (
        ("slow", "slow: a long test, excluded from the fast lane (-m 'not slow')"),
        ("triton", "triton: needs Triton (vLLM's kernels run through its interpreter)"),
        ("vllm", "vllm: needs vLLM installed"),
    ):
        if f"{name}:" not in registered:
            config.addinivalue_line("markers", text)
