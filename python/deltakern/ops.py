"""The ops for any DLPack tensors: torch tensors go through the torch.library ops
(deltakern.torch_ops) while torch is compiling, so torch sees their contracts, and through one
call of the extension otherwise (the eager fast path: same contracts, same results); anything
else (numpy arrays, any object with ``__dlpack__``) goes to the extension directly. No argument is ever copied or made
contiguous: a layout the core does not take is an InvalidArgumentError naming the argument.
"""

from __future__ import annotations

from typing import Any

from . import _handoff
from ._handoff import dlpack_source as _d
from ._handoff import stream_handle
from ._runtime import current_runtime

_CONTRACTS = {None: "any", True: "in_place", False: "fresh"}


def _as_callers_kind(x: Any, fresh: Any) -> Any:
    """A fresh result (nanobind's DLPack-capable ndarray) as the caller's kind of array: a numpy
    array for numpy input (zero copy, through DLPack), else the DLPack-capable object itself."""
    if type(x).__module__ == "numpy":
        import numpy

        return numpy.from_dlpack(fresh)
    return fresh


def causal_conv1d_varlen(
    x: Any, weight: Any, bias: Any, conv_states: Any, query_start_loc: Any,
    cache_indices: Any = None, has_initial_state: Any = None, *, activation: str = "none",
    pad_slot_id: int = -1, max_seq_len: int | None = None, inplace: bool | None = None,
    validate: bool | None = None, stream: Any = None,
) -> Any:
    """Causal conv1d over a packed batch of variable-length sequences (docs/design.md, section 5).

    x (D, T): time-contiguous or channel-last; weight (D, W); bias (D) or None; conv_states
    (lines, D, S), updated in place; query_start_loc (batch+1) int32; cache_indices (batch)
    int32 or None; has_initial_state (batch) uint8 or None. Give ``max_seq_len`` (the longest
    sequence, known on the host): then no backend reads device memory and the call is capturable.

    THE RETURNED TENSOR IS THE RESULT. It is ``x`` itself on a backend that convolves in place
    (native), and a fresh tensor on one that does not (portable; for torch tensors it comes from
    torch's allocator, through the out-variant). Never rely on ``x`` afterwards, changed or not.
    ``inplace=True`` demands the in-place contract, ``inplace=False`` a fresh output: a backend
    that keeps the other one is an UnsupportedError before anything is written, never a silent
    copy. ``stream``: the CUDA stream (default: torch's current stream for torch tensors).
    ``validate`` (check index contents first, one sync) bypasses torch.library for torch tensors.
    """
    if validate is None and stream is None and _handoff.is_eager_torch(x):
        result = current_runtime().varlen_eager(
            x, weight, bias, conv_states, query_start_loc, cache_indices, has_initial_state, activation,
            pad_slot_id, max_seq_len, _CONTRACTS[inplace],
        )
        if result is not None:
            return result
    if validate is None and _handoff.is_torch_tensor(x):
        torch_ops = _handoff.torch_ops
        if stream is None:
            return torch_ops.causal_conv1d_varlen(
                x, weight, bias, conv_states, query_start_loc, cache_indices, has_initial_state,
                activation=activation, pad_slot_id=pad_slot_id, max_seq_len=max_seq_len, inplace=inplace,
            )
        with torch_ops.torch.cuda.stream(stream):
            return torch_ops.causal_conv1d_varlen(
                x, weight, bias, conv_states, query_start_loc, cache_indices, has_initial_state,
                activation=activation, pad_slot_id=pad_slot_id, max_seq_len=max_seq_len, inplace=inplace,
            )
    fresh = current_runtime().varlen(
        _d(x), _d(weight), _d(bias), _d(conv_states), _d(query_start_loc), _d(cache_indices),
        _d(has_initial_state), activation, pad_slot_id, max_seq_len, validate, stream_handle(stream, x),
        _CONTRACTS[inplace],
    )
    return x if fresh is None else _as_callers_kind(x, fresh)


def causal_conv1d_varlen_out(
    x: Any, weight: Any, bias: Any, conv_states: Any, query_start_loc: Any,
    cache_indices: Any = None, has_initial_state: Any = None, *, out: Any, activation: str = "none",
    pad_slot_id: int = -1, max_seq_len: int | None = None, validate: bool | None = None, stream: Any = None,
) -> None:
    """causal_conv1d_varlen into the caller's ``out`` (x's shape, dtype, device and layout; its
    own strides within that layout; sharing memory with no argument): one contract on every
    backend, x untouched, nothing allocated. Out's tokens of a skipped sequence are unspecified."""
    if validate is None and stream is None and _handoff.is_eager_torch(x) and current_runtime().varlen_out_eager(
        x, weight, bias, conv_states, query_start_loc, cache_indices, has_initial_state, out, activation,
        pad_slot_id, max_seq_len,
    ):
        return
    if validate is None and stream is None and _handoff.is_torch_tensor(x):
        _handoff.torch_ops.torch.ops.deltakern.causal_conv1d_varlen_out(
            x, weight, bias, conv_states, query_start_loc, cache_indices, has_initial_state, out,
            activation, pad_slot_id, max_seq_len,
        )
        return
    current_runtime().varlen_out(
        _d(x), _d(weight), _d(bias), _d(conv_states), _d(query_start_loc), _d(cache_indices),
        _d(has_initial_state), _d(out), activation, pad_slot_id, max_seq_len, validate, stream_handle(stream, x),
    )


def causal_conv1d_update(
    x: Any, conv_state: Any, weight: Any, bias: Any = None, conv_state_indices: Any = None,
    cache_seqlens: Any = None, *, activation: str = "none", pad_slot_id: int = -1,
    inplace: bool | None = None, validate: bool | None = None, stream: Any = None,
) -> Any:
    """Causal conv1d decode step: x (batch, D) or (batch, D, Tq); conv_state (lines, D, S),
    updated in place; conv_state_indices (batch) int32 or None; cache_seqlens (batch) int32 for
    a circular state, None for shift mode.

    THE RETURNED TENSOR IS THE RESULT: ``x`` itself on an in-place backend, a fresh tensor
    otherwise; ``inplace``, ``validate`` and ``stream`` as for causal_conv1d_varlen."""
    if validate is None and stream is None and _handoff.is_eager_torch(x):
        result = current_runtime().update_eager(
            x, conv_state, weight, bias, conv_state_indices, cache_seqlens, activation, pad_slot_id,
            _CONTRACTS[inplace],
        )
        if result is not None:
            return result
    if validate is None and _handoff.is_torch_tensor(x):
        torch_ops = _handoff.torch_ops
        if stream is None:
            return torch_ops.causal_conv1d_update(
                x, conv_state, weight, bias, conv_state_indices, cache_seqlens,
                activation=activation, pad_slot_id=pad_slot_id, inplace=inplace,
            )
        with torch_ops.torch.cuda.stream(stream):
            return torch_ops.causal_conv1d_update(
                x, conv_state, weight, bias, conv_state_indices, cache_seqlens,
                activation=activation, pad_slot_id=pad_slot_id, inplace=inplace,
            )
    fresh = current_runtime().update(
        _d(x), _d(conv_state), _d(weight), _d(bias), _d(conv_state_indices), _d(cache_seqlens),
        activation, pad_slot_id, validate, stream_handle(stream, x), _CONTRACTS[inplace],
    )
    return x if fresh is None else _as_callers_kind(x, fresh)


def causal_conv1d_update_out(
    x: Any, conv_state: Any, weight: Any, bias: Any = None, conv_state_indices: Any = None,
    cache_seqlens: Any = None, *, out: Any, activation: str = "none", pad_slot_id: int = -1,
    validate: bool | None = None, stream: Any = None,
) -> None:
    """causal_conv1d_update into the caller's ``out`` (as causal_conv1d_varlen_out)."""
    if validate is None and stream is None and _handoff.is_eager_torch(x) and current_runtime().update_out_eager(
        x, conv_state, weight, bias, conv_state_indices, cache_seqlens, out, activation, pad_slot_id
    ):
        return
    if validate is None and stream is None and _handoff.is_torch_tensor(x):
        _handoff.torch_ops.torch.ops.deltakern.causal_conv1d_update_out(
            x, conv_state, weight, bias, conv_state_indices, cache_seqlens, out, activation, pad_slot_id
        )
        return
    current_runtime().update_out(
        _d(x), _d(conv_state), _d(weight), _d(bias), _d(conv_state_indices), _d(cache_seqlens), _d(out),
        activation, pad_slot_id, validate, stream_handle(stream, x),
    )
