"""Shared test settings: hypothesis profiles sized for a 2-core CI machine."""

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=30, deadline=None)
settings.load_profile("ci")


def pytest_configure(config):
    known = "\n".join(config.getini("markers"))
    for name, text in (("vllm", "needs an importable vLLM (skips with the reason otherwise)"),
                       ("slow", "slower than the default test budget")):
        if f"{name}:" not in known:
            config.addinivalue_line("markers", f"{name}: {text}")
