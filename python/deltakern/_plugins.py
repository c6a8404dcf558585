"""Plugins that other Python distributions install (``deltakern-accel``, the native backend).

A distribution declares an entry point in the group ``deltakern.plugins`` whose object is a
callable returning plugin library paths; the package hands them to its runtimes as
``plugin_files``, so an installed extra is found with no configuration, the way the C++ install
finds ``<libdir>/deltakern/plugins``. The core then checks each file as it checks any plugin
(ABI, descriptor, probe) and lists a refused one with its reason. A broken entry point (it does
not import, or its callable raises) is skipped with a warning naming the distribution: a bad
extra never stops ``import deltakern`` or the backends that do load.
"""

from __future__ import annotations

import os
import warnings
from importlib import metadata

ENTRY_POINT_GROUP = "deltakern.plugins"


def installed_plugin_files() -> list[str]:
    """The plugin files every installed ``deltakern.plugins`` entry point names."""
    files: list[str] = []
    try:
        entry_points = metadata.entry_points(group=ENTRY_POINT_GROUP)
    except TypeError:  # Python 3.9: a dict of groups
        entry_points = metadata.entry_points().get(ENTRY_POINT_GROUP, [])
    for entry_point in entry_points:
        try:
            files.extend(os.fspath(path) for path in entry_point.load()())
        except Exception as error:  # noqa: BLE001 - whatever a third-party entry point raises
            dist = getattr(entry_point, "dist", None)
            owner = f"{dist.name} {dist.version}" if dist is not None else entry_point.value
            warnings.warn(
                f"deltakern: skipping the {ENTRY_POINT_GROUP} entry point {entry_point.name!r} of {owner}: "
                f"{type(error).__name__}: {error}",
                RuntimeWarning,
                stacklevel=2,
            )
    return files
