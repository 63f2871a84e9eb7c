"""The pinned shim over hypothesis' local constants (kvcontract.conformance.run.draws): the
private name it replaces is still there, it empties the pool, and outside the releases it
was verified on it warns instead of staying silent."""

from __future__ import annotations

import importlib
import warnings

import hypothesis
import pytest

from kvcontract.conformance.run import draws


def _providers():
    return importlib.import_module(draws.PRIVATE_MODULE)


def test_the_private_name_is_still_there():
    """Fails when a hypothesis release renames or drops it: the shim must be revisited."""
    providers = _providers()
    assert callable(getattr(providers, draws.PRIVATE_NAME, None)), \
        f"{draws.PRIVATE_MODULE}.{draws.PRIVATE_NAME} is gone in hypothesis {hypothesis.__version__}"
    assert hasattr(providers, "Constants")


def test_the_installed_release_is_one_it_was_verified_on():
    assert draws.verified(), (hypothesis.__version__, draws.VERIFIED)
    assert not draws.verified((6, 131, 0)) and not draws.verified((7, 0, 0))


def test_it_empties_the_local_constants_pool(monkeypatch):
    providers = _providers()
    monkeypatch.setattr(providers, draws.PRIVATE_NAME, lambda: providers.Constants(integers={123456789}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the verified release: no warning
        assert draws.neutralize_local_constants() is True
    assert len(getattr(providers, draws.PRIVATE_NAME)()) == 0


def test_outside_the_verified_releases_it_warns_and_still_applies(monkeypatch):
    providers = _providers()
    monkeypatch.setattr(providers, draws.PRIVATE_NAME, lambda: providers.Constants(integers={123456789}))
    monkeypatch.setattr(hypothesis, "__version_info__", (6, 999, 0))
    with pytest.warns(draws.UnverifiedHypothesis, match="6.999.0 is outside"):
        assert draws.neutralize_local_constants() is True
    assert len(getattr(providers, draws.PRIVATE_NAME)()) == 0


def test_without_the_private_name_it_warns_and_does_nothing(monkeypatch):
    monkeypatch.delattr(_providers(), draws.PRIVATE_NAME)
    with pytest.warns(draws.UnverifiedHypothesis, match="may differ between the normal and the -O pass"):
        assert draws.neutralize_local_constants() is False


def test_the_runner_applies_it():
    import kvcontract.conformance.run.execution  # noqa: F401 - applies the shim on import

    assert len(getattr(_providers(), draws.PRIVATE_NAME)()) == 0
