"""deltakern's own tests run through the package's pytest plugin (deltakern.testing): the
``deltakern_backend`` fixture runs a test once per CPU backend. The in-place CPU stand-in of the
C++ build is added when found (``--deltakern-plugin``, ``DELTAKERN_TEST_PLUGINS``, or the build
tree next to this checkout); with ``DELTAKERN_REQUIRE_STANDIN=1`` (CI) its absence is an error
rather than a silently halved suite."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[2]
_STANDIN = "tests/plugins/libdeltakern_test_standin.so"

if not os.environ.get("DELTAKERN_TEST_PLUGINS"):
    for build in ("build", "build-pytest"):
        candidate = _REPO / build / _STANDIN
        if candidate.is_file():
            os.environ["DELTAKERN_TEST_PLUGINS"] = str(candidate)
            break

pytest_plugins = ["deltakern.testing"]


def pytest_configure(config: pytest.Config) -> None:
    # Our hook runs after the plugin's (conftest hooks after plugin hooks), so the stand-in is
    # configured by now.
    import deltakern.testing

    if os.environ.get("DELTAKERN_REQUIRE_STANDIN") == "1" and "standin" not in deltakern.testing.cpu_backends():
        raise pytest.UsageError(
            "DELTAKERN_REQUIRE_STANDIN=1 but the in-place CPU stand-in is not loaded: pass "
            f"--deltakern-plugin <build>/{_STANDIN} or set DELTAKERN_TEST_PLUGINS"
        )
