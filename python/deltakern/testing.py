"""A pytest plugin for engines' tests (and deltakern's own): ``pytest_plugins = ["deltakern.testing"]``.

Fixture ``deltakern_backend`` runs a test once per backend that can serve calls on the CPU here
(the test then runs inside ``use_backend(name)`` and gets the name), so a test proves its claim
on every contract rather than on whichever backend happens to be installed. The review thread in
the repository's background shows why: tests written against one backend broke on the other.
Fixture ``deltakern_cuda_backend`` does the same for the backends with a usable CUDA device.

Option ``--deltakern-plugin PATH`` (repeatable) or environment ``DELTAKERN_TEST_PLUGINS``
(colon-separated) adds plugin libraries, e.g. the in-place CPU stand-in the C++ build makes
(``build/tests/plugins/libdeltakern_test_standin.so``), so both contracts run without a GPU.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

import deltakern


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--deltakern-plugin", action="append", default=[], metavar="PATH",
        help="a deltakern plugin library to load for the tests (repeatable)",
    )


def extra_plugin_files(config: pytest.Config) -> list[str]:
    files = list(config.getoption("--deltakern-plugin"))
    env = os.environ.get("DELTAKERN_TEST_PLUGINS", "")
    files += [p for p in env.split(os.pathsep) if p]
    return files


def pytest_configure(config: pytest.Config) -> None:
    files = extra_plugin_files(config)
    if files:
        deltakern.configure(plugin_files=files)


def backends_on(device: str) -> list[str]:
    """Loaded backends with an available ``device`` ("cpu", "cuda") and at least one op, in
    discovery order."""
    names = []
    for plugin in deltakern.list_backends():
        if plugin["state"] != "loaded" or not plugin["ops"]:
            continue
        if any(d["device"] == device and d["available"] for d in plugin["devices"]):
            names.append(plugin["name"])
    return names


def cpu_backends() -> list[str]:
    return backends_on("cpu")


def cuda_backends() -> list[str]:
    """Backends with a usable CUDA device here (none on a machine without a GPU)."""
    return backends_on("cuda")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "deltakern_backend" in metafunc.fixturenames:
        metafunc.parametrize("deltakern_backend", cpu_backends(), indirect=True)
    if "deltakern_cuda_backend" in metafunc.fixturenames:
        metafunc.parametrize("deltakern_cuda_backend", cuda_backends(), indirect=True)


@pytest.fixture
def deltakern_backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """The backend this run of the test is forced to (every CPU backend in turn)."""
    name: str = request.param
    with deltakern.use_backend(name):
        yield name


@pytest.fixture
def deltakern_cuda_backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """The backend this run of the test is forced to (every backend with a usable CUDA device in
    turn; the test is skipped, as an empty parameter set, where there is none)."""
    name: str = request.param
    with deltakern.use_backend(name):
        yield name
