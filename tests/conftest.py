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
