"""Plugins that other Python distributions install (``deltakern-accel``, the native backend).

A distribution declares an entry point in the group ``deltakern.plugins`` whose object is a
callable returning plugin library paths; the package hands them to its runtimes as
``plugin_files``, so an installed extra is found with no configuration, the way the C++ install
finds ``<libdir>/deltakern/plugins``.
"""

from __future__ import annotations

import os
from importlib import metadata

ENTRY_POINT_GROUP = "deltakern.plugins"


def installed_plugin_files() -> list[str]:
    """The plugin files every installed ``deltakern.plugins`` entry point names."""
    files: list[str] = []
    for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        for path in entry_point.load()():
            files.append(os.fspath(path))
    return files
