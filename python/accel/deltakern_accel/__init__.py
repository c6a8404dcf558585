"""deltakern's native backend as a Python distribution (``pip install deltakern[accel]``).

It holds the plugin library and nothing else: ``import deltakern`` finds it through the
``deltakern.plugins`` entry point below, with no configuration. Whether it may load is the
core's decision (its ABI check); ``deltakern.list_backends()`` says why where it cannot serve
(no GPU, no driver, an ABI this core does not speak).
"""

from __future__ import annotations

from pathlib import Path

__version__ = "0.1.0"

_PLUGINS = Path(__file__).resolve().parent / "lib" / "deltakern" / "plugins"


def plugin_files() -> list[str]:
    """The plugin libraries this distribution installed (the ``deltakern.plugins`` entry point)."""
    return sorted(str(p) for p in _PLUGINS.glob("libdeltakern_*.so"))
