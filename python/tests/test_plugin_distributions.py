"""Backends that other Python distributions install (``deltakern-accel``) are found through the
``deltakern.plugins`` entry point with no configuration, checked by the core like any plugin
(a wrong ABI is refused, both versions named), and a broken one never stops the others. The
distribution is a fake one written into a temporary site directory, carrying a test plugin of
the C++ build: the real deltakern-accel needs nvcc to build and a GPU to serve."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import deltakern
from deltakern import _runtime

_REPO = Path(__file__).resolve().parents[2]


def _test_plugin_tree() -> Path:
    standin = next((Path(p) for p in _runtime._settings.plugin_files if p.endswith("standin.so")), None)
    if standin is None:
        pytest.skip("the C++ build's test plugins are not available (no stand-in configured)")
    return standin.parents[1]  # <build>/tests


@pytest.fixture
def installed_distribution(tmp_path):
    """install(files) puts a distribution 'dk-fake-accel 1.0' on sys.path whose entry point returns
    `files` (or raises, given an exception), and rebuilds the runtimes; undone afterwards."""
    site = tmp_path / "site"
    saved = _runtime._settings

    def install(files):
        package = site / "dk_fake_accel"
        package.mkdir(parents=True)
        body = f"raise {files!r}" if isinstance(files, Exception) else f"return {[str(f) for f in files]!r}"
        (package / "__init__.py").write_text(f"def plugin_files():\n    {body}\n")
        dist_info = site / "dk_fake_accel-1.0.dist-info"
        dist_info.mkdir()
        (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: dk-fake-accel\nVersion: 1.0\n")
        (dist_info / "entry_points.txt").write_text("[deltakern.plugins]\nfake = dk_fake_accel:plugin_files\n")
        sys.path.insert(0, str(site))
        _rebuild(saved)

    yield install
    if str(site) in sys.path:
        sys.path.remove(str(site))
    sys.modules.pop("dk_fake_accel", None)
    _rebuild(saved)


def _rebuild(settings) -> None:
    deltakern.configure(plugin_files=settings.plugin_files, plugin_path=settings.plugin_path,
                        config_file=settings.config_file)


def _backend(name: str) -> dict:
    return next((p for p in deltakern.list_backends() if p["name"] == name), None)


def test_an_installed_distributions_plugin_is_found_without_configuration(installed_distribution):
    assert _backend("abi_1_1") is None
    plugin = _test_plugin_tree() / "abi-plugins" / "libdeltakern_test_abi_1_1.so"
    installed_distribution([plugin])
    found = _backend("abi_1_1")
    assert found is not None, [p["name"] for p in deltakern.list_backends()]
    assert found["state"] == "loaded", found["reason"]
    assert Path(found["path"]).resolve() == plugin.resolve()
    with deltakern.use_backend("abi_1_1"):
        assert deltakern.explain()["backend"] == "abi_1_1"


def test_a_plugin_built_for_another_abi_is_refused_naming_both_versions(installed_distribution):
    installed_distribution([_test_plugin_tree() / "plugins" / "libdeltakern_test_wrong_abi.so"])
    refused = next(p for p in deltakern.list_backends() if "wrong_abi" in p["path"])
    assert refused["state"] == "rejected"
    assert re.search(r"built for ABI 99\.0; this core speaks ABI \d+\.\d+", refused["reason"]), refused["reason"]
    assert _backend("portable")["state"] == "loaded"


def test_a_broken_entry_point_is_skipped_with_a_warning_naming_its_distribution(installed_distribution):
    with pytest.warns(RuntimeWarning, match=r"entry point 'fake' of dk-fake-accel 1\.0: OSError: no GPU here"):
        installed_distribution(OSError("no GPU here"))
        backends = deltakern.list_backends()
    assert next(p for p in backends if p["name"] == "portable")["state"] == "loaded"


def test_the_accel_distribution_pins_the_same_version_as_the_package_and_the_cmake_project():
    tomllib = pytest.importorskip("tomllib")
    if not (_REPO / "CMakeLists.txt").is_file():
        pytest.skip("not run from a checkout")
    cmake = re.search(r"project\(deltakern VERSION ([0-9.]+)", (_REPO / "CMakeLists.txt").read_text()).group(1)
    package = tomllib.loads((_REPO / "python" / "pyproject.toml").read_text())["project"]
    accel = tomllib.loads((_REPO / "python" / "accel" / "pyproject.toml").read_text())
    assert package["version"] == accel["project"]["version"] == deltakern.__version__ == cmake
    assert package["optional-dependencies"]["accel"] == [f"deltakern-accel=={cmake}"]
    assert accel["project"]["dependencies"] == [f"deltakern=={cmake}"]
    assert accel["project"]["entry-points"]["deltakern.plugins"] == {"native": "deltakern_accel:plugin_files"}
    accel_init = (_REPO / "python" / "accel" / "deltakern_accel" / "__init__.py").read_text()
    assert f'__version__ = "{cmake}"' in accel_init


def test_an_installed_deltakern_accel_serves_native_from_its_own_package():
    accel = pytest.importorskip("deltakern_accel", reason="deltakern-accel is not installed")
    native = _backend("native")
    assert native is not None and native["state"] == "loaded", native
    assert Path(native["path"]).resolve().is_relative_to(Path(accel.__file__).resolve().parent)
    (cuda,) = [d for d in native["devices"] if d["device"] == "cuda"]
    assert cuda["available"] or cuda["reason"], cuda  # where it cannot serve, it says why
