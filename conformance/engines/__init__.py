"""Engines under test: the adapter protocol and its optional capabilities, the registry, the reference engine, the mutant catalogue, and the vLLM adapter."""
