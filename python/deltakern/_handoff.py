"""What the extension is handed for a tensor argument, and which stream a call runs on.

The extension takes any DLPack producer and never copies. Two details matter for cost and
correctness: a torch CUDA tensor is exported with ``stream=-1`` (the consumer runs on torch's
own current stream, so no cross-stream event is needed), and a tensor that requires grad is
exported through ``detach()`` (a view, not a copy), since torch refuses to export it otherwise.
"""

from __future__ import annotations

import sys
from typing import Any


# torch.Tensor once deltakern.torch_ops has registered the ops (it sets this); a module global
# so that the check below is plain Python that torch.compile traces without a break.
torch_tensor_type: type | None = None
torch_ops: Any = None  # the deltakern.torch_ops module, once registered


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


def dlpack_source(obj: Any) -> Any:
    """``obj`` as the extension should receive it (None stays None)."""
    if obj is None or not is_torch_tensor(obj):
        return obj
    if obj.requires_grad:
        obj = obj.detach()
    if obj.device.type == "cuda":
        return obj.__dlpack__(stream=-1)
    return obj


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
