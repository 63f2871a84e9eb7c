"""pytest plugin: ``pytest --kvcontract-engine NAME`` runs the conformance laws."""

from __future__ import annotations

from typing import Any


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("kvcontract")
    group.addoption("--kvcontract-engine", default=None, metavar="NAME",
                    help="run the kvcontract conformance laws against this engine")
