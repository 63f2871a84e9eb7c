"""Patched engines for the meta-tests, loaded as ``tests.engines.<module>:factory``."""
