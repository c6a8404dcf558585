"""The exceptions deltakern raises: one class per error code of the C++ core
(``deltakern::ErrorCode``), each carrying the core's message unchanged, all subclasses of
:class:`Error` and of the built-in exception a Python caller would expect.

The extension (``src/errors.cpp``) raises these by name; keep the names in step with it.
"""

from __future__ import annotations


class Error(Exception):
    """Any error reported by deltakern; ``code`` names the core's ErrorCode."""

    code: str = "error"


class InvalidArgumentError(Error, ValueError):
    """A bad shape, dtype, device, layout or index: the call was refused and wrote nothing."""

    code = "invalid_argument"


class UnsupportedError(Error, NotImplementedError):
    """No backend (or not the forced one, or none keeping the demanded contract) serves the call."""

    code = "unsupported"


class UnavailableError(Error, RuntimeError):
    """The backend cannot run on this machine (no GPU, no driver)."""

    code = "unavailable"


class OutOfMemoryError(Error, MemoryError):
    """An allocation for the call failed."""

    code = "out_of_memory"


class BackendError(Error, RuntimeError):
    """A launch or device failure inside a backend."""

    code = "runtime"


class ConfigError(Error, ValueError):
    """The configuration file or environment is wrong."""

    code = "config"


class InternalError(Error, RuntimeError):
    """A defect in deltakern or a backend (a broken contract)."""

    code = "internal"
