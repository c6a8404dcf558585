"""What the extension is handed for a tensor argument, and which stream a call runs on.

The extension takes any DLPack producer and never copies. A torch tensor is handed over as the
capsule of ``torch.utils.dlpack.to_dlpack`` (0.4 us) rather than through ``__dlpack__`` (3-6 us
of Python per tensor, most of a call's cost): it is the same zero-copy export with no stream
handshake, which is what a call on torch's own current stream needs (``stream=-1``). A tensor
that requires grad goes through ``detach()`` first (a view, not a copy).
"""

from __future__ import annotations

import sys
from typing import Any


# torch.Tensor once deltakern.torch_ops has registered the ops (it sets this); a module global
# so that the check below is plain Python that torch.compile traces without a break.
torch_tensor_type: type | None = None
torch_ops: Any = None  # the deltakern.torch_ops module, once registered
to_dlpack: Any = None  # torch.utils.dlpack.to_dlpack, once registered
# torch.compiler.is_compiling, once registered; None until then.
is_compiling: Any = None


def torch_module() -> Any | None:
    """torch, when the caller has imported it; deltakern never imports it on its own."""
    return sys.modules.get("torch")


def register_torch_if_imported() -> None:
    """Register the torch ops (deltakern.torch_ops) when the caller has imported torch."""
    if torch_tensor_type is None and "torch" in sys.modules:
        from . import torch_ops  # noqa: F401  (registers the ops, sets torch_tensor_type)


def is_torch_tensor(obj: object) -> bool:
    if torch_tensor_type is None:
        register_torch_if_imported()
    return torch_tensor_type is not None and isinstance(obj, torch_tensor_type)


def is_eager_torch(obj: object) -> bool:
    """Whether a call given ``obj`` as x may take the eager fast path (the extension's *_eager
    methods, one call, tensors imported through torch's DLPack C exchange API): a plain
    torch.Tensor (a FakeTensor or another subclass is traced, so it goes to torch.library) while
    torch is not compiling. is_compiling() comes first: under torch.compile it is a constant True
    and nothing after it is traced."""
    if torch_tensor_type is None:
        register_torch_if_imported()
        if torch_tensor_type is None:
            return False
    return not is_compiling() and type(obj) is torch_tensor_type


def dlpack_source(obj: Any) -> Any:
    """``obj`` as the extension should receive it (None stays None)."""
    if obj is None or not is_torch_tensor(obj):
        return obj
    if obj.requires_grad:
        obj = obj.detach()
    return to_dlpack(obj)


def stream_handle(stream: Any, like: Any) -> int:
    """The cudaStream_t (as an int) a call on ``like``'s device runs on: ``stream`` when given (a
    torch.cuda.Stream, anything with ``cuda_stream``, or an int), else torch's current stream for
    a torch CUDA tensor, else 0 (the CPU, or the legacy default stream)."""
    if stream is not None:
        return int(getattr(stream, "cuda_stream", stream))
    if is_torch_tensor(like) and like.device.type == "cuda":
        import torch

        return int(torch.cuda.current_stream(like.device).cuda_stream)
    return 0
