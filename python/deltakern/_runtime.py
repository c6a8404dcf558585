"""Which deltakern runtime serves a call, and the plain-data views of it.

The package keeps its own C++ ``deltakern::Runtime`` objects rather than the C++
``Runtime::global()``: one per forced backend (``use_backend``), all built from the same settings
(the environment, ``DELTAKERN_CONFIG``, the plugins other distributions install, and what
``configure()`` adds). Plugins are loaded once per process whatever the number of runtimes.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from . import _core
from ._errors import ConfigError
from ._plugins import installed_plugin_files


@dataclass(frozen=True)
class _Settings:
    plugin_files: tuple[str, ...] = ()
    plugin_path: tuple[str, ...] = ()
    config_file: str | None = None


_lock = threading.Lock()
_settings = _Settings()
_runtimes: dict[str | None, _core.Runtime] = {}
# The backend use_backend() forces, process-wide (None: dispatch as configured). A plain module
# global so that torch.compile guards on it: a graph traced under one backend is not replayed
# under another.
_forced_backend: str | None = None
# Bumped whenever the runtimes are rebuilt, so cached dispatch answers are keyed by it.
generation = 0


def configure(
    *,
    plugin_files: Sequence[str | os.PathLike[str]] = (),
    plugin_path: Sequence[str | os.PathLike[str]] = (),
    config_file: str | os.PathLike[str] | None = None,
) -> None:
    """Set what the package's runtimes load beyond the environment and the installed plugins:
    ``plugin_files`` (libraries loaded before any search path, e.g. a test-only backend),
    ``plugin_path`` (directories searched after ``DELTAKERN_PLUGIN_PATH``) and ``config_file``
    (used when ``DELTAKERN_CONFIG`` is unset). Runtimes built before are dropped; the next call
    builds new ones."""
    global _settings, generation
    with _lock:
        _settings = _Settings(
            tuple(os.fspath(p) for p in plugin_files),
            tuple(os.fspath(p) for p in plugin_path),
            None if config_file is None else os.fspath(config_file),
        )
        _runtimes.clear()
        generation += 1


def runtime(backend: str | None = None) -> _core.Runtime:
    """The runtime forced to ``backend`` (None: dispatch by the configuration), built on first use."""
    rt = _runtimes.get(backend)
    if rt is not None:
        return rt
    with _lock:
        rt = _runtimes.get(backend)
        if rt is None:
            rt = _core.Runtime(
                force_backend=backend,
                plugin_files=[*_settings.plugin_files, *installed_plugin_files()],
                plugin_path=list(_settings.plugin_path),
                config_file=_settings.config_file,
            )
            _runtimes[backend] = rt
        return rt


def forced_backend() -> str | None:
    """The backend use_backend() forces now, or None."""
    return _forced_backend


def current_runtime() -> _core.Runtime:
    """The runtime a call made now goes to."""
    return runtime(_forced_backend)


@contextlib.contextmanager
def use_backend(name: str | None) -> Iterator[None]:
    """Serve every deltakern call inside the block with backend ``name`` or fail: a forced backend
    that cannot serve a call is an error, never a silent fallback (``None`` restores configured
    dispatch). Process-wide, not per thread: meant for tests and tools. ``DELTAKERN_BACKEND``, when
    set, wins in the core, so a different name here is refused rather than ignored."""
    global _forced_backend
    env = os.environ.get("DELTAKERN_BACKEND")
    if env and name is not None and name != env:
        raise ConfigError(
            f"use_backend({name!r}): DELTAKERN_BACKEND={env!r} forces every call in this process; unset it"
        )
    previous = _forced_backend
    _forced_backend = name
    try:
        yield
    finally:
        _forced_backend = previous


def list_backends() -> list[dict[str, Any]]:
    """Every plugin the runtime found, loaded or rejected, as plain data: name, version, path,
    abi, state ("loaded"/"rejected"), reason, devices (with availability and why not), and ops
    (schema, dtypes, widths, layouts, limits, and ``contract``: "in_place", "fresh" or "out")."""
    return list(runtime().plugins())


def explain(
    op: str = "causal_conv1d_varlen",
    *,
    device: str = "cpu",
    device_id: int = 0,
    dtype: str = "float32",
    weight_dtype: str | None = None,
    state_dtype: str | None = None,
    bias_dtype: str | None = None,
    width: int = 4,
    layout: str = "time_contiguous",
    max_seq_len_given: bool = True,
    dims: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Which backend a call of this signature (and, given, these dimensions) gets now and why,
    every backend passed over with its reason, the serving backend's limits and ``contract``;
    ``description`` is the text ``deltakern explain`` prints. Weight and state dtypes default to
    ``dtype``; no bias unless ``bias_dtype``."""
    return current_runtime().explain(
        op, device, device_id, dtype, weight_dtype, state_dtype, bias_dtype, width, layout,
        max_seq_len_given, list((dims or {}).items()),
    )


def fallback_counts() -> list[dict[str, Any]]:
    """Calls the current runtime served with another backend than the op's first choice, one
    dict per (op, backend, first_choice, reason) with its ``count``."""
    return list(current_runtime().fallback_counts())


def reset_fallback_counts() -> None:
    """Set the current runtime's fallback counts to zero."""
    current_runtime().reset_fallback_counts()


def host_syncs() -> int:
    """Device-to-host reads backends have made on this thread (each counted once)."""
    return int(_core.host_syncs())


def check_errors(device: str = "cpu", device_id: int = 0, stream: int = 0) -> None:
    """Read (and clear) the loaded backends' device-side error words on ``device``: kernels skip
    an out-of-range cache index and flag it there. A sync. Raises InvalidArgumentError naming
    what was flagged."""
    current_runtime().check_errors(device, device_id, stream)
