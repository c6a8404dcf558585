"""deltakern's ops expressed to torch through ``torch.library``, and the torch-facing functions.

Importing this module (done by ``import deltakern`` when torch is already imported, or on the
first call given a torch tensor) registers four ops in the ``deltakern`` namespace, each with
its mutation contract in its schema and a fake (meta) implementation so that tracing works:

* ``causal_conv1d_varlen_out(Tensor x, ..., Tensor(b!) conv_states, ..., Tensor(c!) out) -> ()``
  and ``causal_conv1d_update_out(Tensor x, Tensor(b!) conv_state, ..., Tensor(c!) out) -> ()``:
  the result into ``out``, x untouched, served by any backend.
* ``causal_conv1d_varlen_(Tensor(a!) x, ..., Tensor(b!) conv_states, ...) -> ()`` and
  ``causal_conv1d_update_(Tensor(a!) x, Tensor(b!) conv_state, ...) -> ()``: x convolved in
  place, served only by a backend that keeps that contract (UnsupportedError otherwise, before
  anything is written).

Every op runs on torch's current CUDA stream for CUDA tensors (``with torch.cuda.stream(s)``
picks another). The extension never links torch: tensors cross through DLPack, zero copy.
"""

from __future__ import annotations

import sys
from typing import Any

import torch

from . import _handoff, _runtime
from ._handoff import dlpack_source, stream_handle
from ._layout import CHANNEL_LAST, TIME_CONTIGUOUS, update_layout, varlen_layout

_ACT_AND_PAD = 'str activation="none", int pad_slot_id=-1'
VARLEN_OUT_SCHEMA = (
    "(Tensor x, Tensor weight, Tensor? bias, Tensor(b!) conv_states, Tensor query_start_loc, "
    f"Tensor? cache_indices, Tensor? has_initial_state, Tensor(c!) out, {_ACT_AND_PAD}, "
    "SymInt? max_seq_len=None) -> ()"
)
VARLEN_INPLACE_SCHEMA = (
    "(Tensor(a!) x, Tensor weight, Tensor? bias, Tensor(b!) conv_states, Tensor query_start_loc, "
    f"Tensor? cache_indices, Tensor? has_initial_state, {_ACT_AND_PAD}, SymInt? max_seq_len=None) -> ()"
)
UPDATE_OUT_SCHEMA = (
    "(Tensor x, Tensor(b!) conv_state, Tensor weight, Tensor? bias, Tensor? conv_state_indices, "
    f"Tensor? cache_seqlens, Tensor(c!) out, {_ACT_AND_PAD}) -> ()"
)
UPDATE_INPLACE_SCHEMA = (
    "(Tensor(a!) x, Tensor(b!) conv_state, Tensor weight, Tensor? bias, Tensor? conv_state_indices, "
    f"Tensor? cache_seqlens, {_ACT_AND_PAD}) -> ()"
)

Tensor = torch.Tensor
_d = dlpack_source


@torch.library.custom_op(
    "deltakern::causal_conv1d_varlen_out", mutates_args=("conv_states", "out"), schema=VARLEN_OUT_SCHEMA
)
def causal_conv1d_varlen_out_op(
    x: Tensor, weight: Tensor, bias: Tensor | None, conv_states: Tensor, query_start_loc: Tensor,
    cache_indices: Tensor | None, has_initial_state: Tensor | None, out: Tensor,
    activation: str = "none", pad_slot_id: int = -1, max_seq_len: int | None = None,
) -> None:
    _runtime.current_runtime().varlen_out(
        _d(x), _d(weight), _d(bias), _d(conv_states), _d(query_start_loc), _d(cache_indices),
        _d(has_initial_state), _d(out), activation, pad_slot_id, max_seq_len, None, stream_handle(None, x),
    )


@torch.library.custom_op(
    "deltakern::causal_conv1d_varlen_", mutates_args=("x", "conv_states"), schema=VARLEN_INPLACE_SCHEMA
)
def causal_conv1d_varlen_inplace_op(
    x: Tensor, weight: Tensor, bias: Tensor | None, conv_states: Tensor, query_start_loc: Tensor,
    cache_indices: Tensor | None, has_initial_state: Tensor | None,
    activation: str = "none", pad_slot_id: int = -1, max_seq_len: int | None = None,
) -> None:
    _runtime.current_runtime().varlen(
        _d(x), _d(weight), _d(bias), _d(conv_states), _d(query_start_loc), _d(cache_indices),
        _d(has_initial_state), activation, pad_slot_id, max_seq_len, None, stream_handle(None, x), "in_place",
    )


@torch.library.custom_op(
    "deltakern::causal_conv1d_update_out", mutates_args=("conv_state", "out"), schema=UPDATE_OUT_SCHEMA
)
def causal_conv1d_update_out_op(
    x: Tensor, conv_state: Tensor, weight: Tensor, bias: Tensor | None, conv_state_indices: Tensor | None,
    cache_seqlens: Tensor | None, out: Tensor, activation: str = "none", pad_slot_id: int = -1,
) -> None:
    _runtime.current_runtime().update_out(
        _d(x), _d(conv_state), _d(weight), _d(bias), _d(conv_state_indices), _d(cache_seqlens), _d(out),
        activation, pad_slot_id, None, stream_handle(None, x),
    )


@torch.library.custom_op(
    "deltakern::causal_conv1d_update_", mutates_args=("x", "conv_state"), schema=UPDATE_INPLACE_SCHEMA
)
def causal_conv1d_update_inplace_op(
    x: Tensor, conv_state: Tensor, weight: Tensor, bias: Tensor | None, conv_state_indices: Tensor | None,
    cache_seqlens: Tensor | None, activation: str = "none", pad_slot_id: int = -1,
) -> None:
    _runtime.current_runtime().update(
        _d(x), _d(conv_state), _d(weight), _d(bias), _d(conv_state_indices), _d(cache_seqlens),
        activation, pad_slot_id, None, stream_handle(None, x), "in_place",
    )


# Fake (meta) implementations: the ops return nothing and write only arguments the schemas
# annotate, so tracing needs no more than "it ran".
@causal_conv1d_varlen_out_op.register_fake
def _(*args: Any, **kwargs: Any) -> None:
    return None


@causal_conv1d_varlen_inplace_op.register_fake
def _(*args: Any, **kwargs: Any) -> None:
    return None


@causal_conv1d_update_out_op.register_fake
def _(*args: Any, **kwargs: Any) -> None:
    return None


@causal_conv1d_update_inplace_op.register_fake
def _(*args: Any, **kwargs: Any) -> None:
    return None


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


@torch.compiler.assume_constant_result
def _keeps_in_place(
    generation: int, backend: str | None, op: str, device: str, device_id: int, dtype: str,
    weight_dtype: str, state_dtype: str, bias_dtype: str | None, width: int, layout: str,
    max_seq_len_given: bool, dims: tuple[tuple[str, int], ...],
) -> bool:
    """Whether the backend serving this signature convolves x in place. Dispatch depends on
    nothing else (docs/design.md: decisions per signature, limits per call), so under
    torch.compile the answer is a constant of the graph; ``generation`` and ``backend`` (the
    runtime's settings and use_backend's choice) are arguments so that a cached answer is never
    one for other settings."""
    key = (generation, backend, op, device, device_id, dtype, weight_dtype, state_dtype, bias_dtype,
           width, layout, max_seq_len_given, dims)
    answer = _contract_cache.get(key)
    if answer is None:
        decision = _runtime.runtime(backend).explain(
            op, device, device_id, dtype, weight_dtype, state_dtype, bias_dtype, width, layout,
            max_seq_len_given, list(dims),
        )
        answer = decision["contract"] == "in_place"
        if len(_contract_cache) > 4096:  # shapes vary per call: keep the cache bounded
            _contract_cache.clear()
        _contract_cache[key] = answer
    return answer


_contract_cache: dict[tuple[Any, ...], bool] = {}


def _static_dims(dims: tuple[tuple[str, Any], ...]) -> tuple[tuple[str, int], ...]:
    """The sizes the decision routes by, or none under torch.compile, where they may be symbolic
    (dynamic=True) and cannot be constants of the graph: the contract is then the one the
    backend's declarations give without size limits."""
    return () if torch.compiler.is_compiling() else dims


def _device(t: Tensor) -> tuple[str, int]:
    return t.device.type, 0 if t.device.index is None else t.device.index


def _varlen_keeps_in_place(x: Tensor, weight: Tensor, bias: Tensor | None, conv_states: Tensor,
                           query_start_loc: Tensor, max_seq_len: int | None) -> bool | None:
    """None when x has no layout or the shapes are malformed: the out-variant then reports the
    core's error for them."""
    layout = varlen_layout(tuple(x.shape), tuple(x.stride()))
    if layout is None or weight.dim() != 2 or conv_states.dim() != 3 or query_start_loc.dim() != 1:
        return None
    device, device_id = _device(x)
    dims = (("dim", x.shape[0]), ("tokens", x.shape[1]), ("batch", query_start_loc.shape[0] - 1),
            ("width", weight.shape[1]), ("state_len", conv_states.shape[2]), ("lines", conv_states.shape[0]))
    return _keeps_in_place(
        _runtime.generation, _runtime._forced_backend, "causal_conv1d_varlen", device, device_id,
        _dtype_name(x.dtype), _dtype_name(weight.dtype), _dtype_name(conv_states.dtype),
        None if bias is None else _dtype_name(bias.dtype), weight.shape[1], layout, max_seq_len is not None, _static_dims(dims),
    )


def _update_keeps_in_place(x: Tensor, conv_state: Tensor, weight: Tensor, bias: Tensor | None) -> bool | None:
    layout = update_layout(tuple(x.shape), tuple(x.stride()))
    if layout is None or weight.dim() != 2 or conv_state.dim() != 3:
        return None
    device, device_id = _device(x)
    dims = (("batch", x.shape[0]), ("dim", x.shape[1]), ("tokens_per_update", x.shape[2] if x.dim() == 3 else 1),
            ("width", weight.shape[1]), ("state_len", conv_state.shape[2]), ("lines", conv_state.shape[0]))
    return _keeps_in_place(
        _runtime.generation, _runtime._forced_backend, "causal_conv1d_update", device, device_id,
        _dtype_name(x.dtype), _dtype_name(weight.dtype), _dtype_name(conv_state.dtype),
        None if bias is None else _dtype_name(bias.dtype), weight.shape[1], layout, True, _static_dims(dims),
    )


def empty_out(x: Tensor, op: str) -> Tensor:
    """A fresh ``out`` from torch's allocator in x's layout (compact): what the out-variant takes."""
    if op == "varlen":
        layout = varlen_layout(tuple(x.shape), tuple(x.stride()))
        if layout == CHANNEL_LAST:
            return torch.empty((x.shape[1], x.shape[0]), dtype=x.dtype, device=x.device).t()
    else:
        layout = update_layout(tuple(x.shape), tuple(x.stride()))
        if layout == CHANNEL_LAST:
            return torch.empty((x.shape[0], x.shape[2], x.shape[1]), dtype=x.dtype, device=x.device).transpose(1, 2)
    if layout == TIME_CONTIGUOUS:
        return torch.empty(tuple(x.shape), dtype=x.dtype, device=x.device)
    return torch.empty_like(x)  # no layout: the call is refused naming x's strides


def _in_place(inplace: bool | None, keeps_in_place: Any) -> bool:
    if inplace is not None:
        return inplace
    return bool(keeps_in_place())


def causal_conv1d_varlen(
    x: Tensor, weight: Tensor, bias: Tensor | None, conv_states: Tensor, query_start_loc: Tensor,
    cache_indices: Tensor | None, has_initial_state: Tensor | None, *, activation: str, pad_slot_id: int,
    max_seq_len: int | None, inplace: bool | None,
) -> Tensor:
    """deltakern.causal_conv1d_varlen for torch tensors (see its docstring for the contract)."""
    if _in_place(inplace, lambda: _varlen_keeps_in_place(x, weight, bias, conv_states, query_start_loc, max_seq_len)):
        torch.ops.deltakern.causal_conv1d_varlen_(
            x, weight, bias, conv_states, query_start_loc, cache_indices, has_initial_state,
            activation, pad_slot_id, max_seq_len,
        )
        return x
    out = empty_out(x, "varlen")
    torch.ops.deltakern.causal_conv1d_varlen_out(
        x, weight, bias, conv_states, query_start_loc, cache_indices, has_initial_state, out,
        activation, pad_slot_id, max_seq_len,
    )
    return out


def causal_conv1d_update(
    x: Tensor, conv_state: Tensor, weight: Tensor, bias: Tensor | None, conv_state_indices: Tensor | None,
    cache_seqlens: Tensor | None, *, activation: str, pad_slot_id: int, inplace: bool | None,
) -> Tensor:
    """deltakern.causal_conv1d_update for torch tensors (see its docstring for the contract)."""
    if _in_place(inplace, lambda: _update_keeps_in_place(x, conv_state, weight, bias)):
        torch.ops.deltakern.causal_conv1d_update_(
            x, conv_state, weight, bias, conv_state_indices, cache_seqlens, activation, pad_slot_id
        )
        return x
    out = empty_out(x, "update")
    torch.ops.deltakern.causal_conv1d_update_out(
        x, conv_state, weight, bias, conv_state_indices, cache_seqlens, out, activation, pad_slot_id
    )
    return out


_handoff.to_dlpack = torch.utils.dlpack.to_dlpack
_handoff.torch_ops = sys.modules[__name__]
_handoff.is_compiling = torch.compiler.is_compiling
_handoff.torch_tensor_type = torch.Tensor
