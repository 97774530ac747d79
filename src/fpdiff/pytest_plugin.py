"""pytest plugin (entry point pytest11): `@pytest.mark.fpdiff(backends=..., precisions=...)` runs a test once per
backend x precision with the `fpdiff_cell` fixture set to that pair; `fpdiff_assert` is `fpdiff.assert_agrees`
bound to it."""
from __future__ import annotations

import functools

import pytest


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "fpdiff(backends=[...], precisions=[...]): run the test once per backend x "
                            "precision; the fpdiff_cell fixture holds the pair, fpdiff_assert checks on it")


def pytest_generate_tests(metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("fpdiff")
    if marker is None or "fpdiff_cell" not in metafunc.fixturenames:
        return
    backends = list(marker.kwargs.get("backends", ["torch"]))
    precisions = list(marker.kwargs.get("precisions", ["fp32"]))
    pairs = [(b, p) for b in backends for p in precisions]
    metafunc.parametrize("fpdiff_cell", pairs, ids=[f"{b}-{p}" for b, p in pairs])


@pytest.fixture
def fpdiff_cell():
    """(backend, precision) of this run of an @pytest.mark.fpdiff test; torch at fp32 without the marker."""
    return ("torch", "fp32")


@pytest.fixture
def fpdiff_assert(fpdiff_cell):
    """fpdiff.assert_agrees on this test's backend and precision."""
    from fpdiff.testing import assert_agrees
    backend, precision = fpdiff_cell
    return functools.partial(assert_agrees, backends=[backend], precisions=[precision])
