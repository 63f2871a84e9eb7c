"""The vLLM release history and matrix: per-release environments, checks of each release's
source tree, and the generated ``docs/vllm-history.md`` and ``docs/vllm-matrix.md``
(``scripts/vllm_history.py`` and ``scripts/vllm_matrix.py`` run :func:`history.main` and
:func:`matrix.main`)."""
