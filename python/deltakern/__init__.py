"""deltakern: causal-conv1d kernels for the linear-attention layers of hybrid LLMs (Gated
DeltaNet, KDA), behind a small C++ core that finds its backends at run time.

The ops take torch tensors, numpy arrays or any DLPack tensor, zero copy, and never make an
argument contiguous behind the caller's back. THE RETURNED TENSOR IS THE RESULT: ``x`` itself
on an in-place backend (native), a fresh tensor on the others (portable); the ``*_out``
variants write into the caller's ``out`` on every backend. Errors are :class:`deltakern.Error`
subclasses carrying the core's message (ValueError, NotImplementedError, RuntimeError, ...).

With torch imported, the ops are also ``torch.ops.deltakern.*`` (deltakern.torch_ops): the
out-variants and the in-place ops, each with its mutation contract in its schema.
"""

from __future__ import annotations

from ._errors import (
    BackendError,
    ConfigError,
    Error,
    InternalError,
    InvalidArgumentError,
    OutOfMemoryError,
    UnavailableError,
    UnsupportedError,
)
from ._runtime import (
    check_errors,
    configure,
    explain,
    fallback_counts,
    forced_backend,
    host_syncs,
    list_backends,
    reset_fallback_counts,
    use_backend,
)
from ._handoff import register_torch_if_imported as _register_torch_if_imported
from .ops import (
    causal_conv1d_update,
    causal_conv1d_update_out,
    causal_conv1d_varlen,
    causal_conv1d_varlen_out,
)

__version__ = "0.1.0"

__all__ = [
    "BackendError", "ConfigError", "Error", "InternalError", "InvalidArgumentError", "OutOfMemoryError",
    "UnavailableError", "UnsupportedError", "causal_conv1d_update", "causal_conv1d_update_out",
    "causal_conv1d_varlen", "causal_conv1d_varlen_out", "check_errors", "configure", "explain",
    "fallback_counts", "forced_backend", "host_syncs", "list_backends", "reset_fallback_counts", "use_backend",
]

# Registered now when the caller has imported torch already; otherwise on the first call given
# a torch tensor, or by `import deltakern.torch_ops` (do that before torch.compile traces code
# that reaches the ops first).
_register_torch_if_imported()
