"""Fresh random inputs for the tests, as numpy arrays or torch tensors, and the float64 views of
them that the reference takes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

try:
    import torch
except ImportError:  # the numpy-only half of the suite still runs
    torch = None

NUMPY_DTYPES = {"float32": np.float32, "float16": np.float16}


def f64(a: Any) -> np.ndarray:
    if torch is not None and isinstance(a, torch.Tensor):
        return a.detach().to(torch.float64).cpu().numpy()
    return np.asarray(a, dtype=np.float64)


def host(a: Any) -> np.ndarray:
    """A copy of a's values as numpy (bf16 as float64), for before/after comparisons."""
    if torch is not None and isinstance(a, torch.Tensor):
        if a.dtype == torch.bfloat16:
            return a.detach().to(torch.float64).cpu().numpy()
        return a.detach().cpu().numpy().copy()
    return np.array(a, copy=True)


def same_bits(a: Any, b: Any) -> bool:
    return np.array_equal(host(a), host(b), equal_nan=True)


def _array(rng: np.random.Generator, shape: tuple[int, ...], dtype: str, lib: str, scale: float = 1.0) -> Any:
    values = rng.standard_normal(shape) * scale
    if lib == "torch":
        return torch.from_numpy(values).to(getattr(torch, dtype))
    return values.astype(NUMPY_DTYPES[dtype])


def _int32(values: list[int], lib: str) -> Any:
    a = np.asarray(values, dtype=np.int32)
    return torch.from_numpy(a) if lib == "torch" else a


def on_cuda(case: Any) -> Any:
    """The case with every torch tensor of it moved to the current CUDA device."""
    for name, value in vars(case).items():
        if isinstance(value, torch.Tensor):
            setattr(case, name, value.cuda())
    return case


def clone(a: Any) -> Any:
    if a is None:
        return None
    if torch is not None and isinstance(a, torch.Tensor):
        return a.clone()  # keeps x's strides (preserve_format)
    return np.array(a, copy=True, order="K")


def restore(dst: Any, src: Any) -> None:
    if torch is not None and isinstance(dst, torch.Tensor):
        dst.copy_(src)
    else:
        dst[...] = src


@dataclass
class Varlen:
    x: Any
    weight: Any
    bias: Any
    conv_states: Any
    query_start_loc: Any
    cache_indices: Any
    has_initial_state: Any
    lengths: list[int]
    activation: str = "none"
    pad_slot_id: int = -1
    skipped_lines: list[int] = field(default_factory=list)

    @property
    def max_seq_len(self) -> int:
        return max(self.lengths, default=0)

    def args(self) -> tuple[Any, ...]:
        return (self.x, self.weight, self.bias, self.conv_states, self.query_start_loc, self.cache_indices,
                self.has_initial_state)

    def reference(self, x: Any = None, states: Any = None):
        from reference import varlen

        return varlen(f64(self.x if x is None else x), f64(self.weight), None if self.bias is None else f64(self.bias),
                      f64(self.conv_states if states is None else states), f64(self.query_start_loc),
                      None if self.cache_indices is None else f64(self.cache_indices).astype(int),
                      None if self.has_initial_state is None else f64(self.has_initial_state),
                      self.activation, self.pad_slot_id)


def varlen_case(*, lib: str = "torch", dtype: str = "float32", width: int = 4, dim: int = 24,
                lengths: tuple[int, ...] = (5, 1, 17, 3, 9), state_len: int | None = None,
                initial_state: bool = True, padded: bool = True, channel_last: bool = False,
                bias: bool = True, activation: str = "silu", weight_dtype: str | None = None,
                seed: int | None = None) -> Varlen:
    """A packed batch into a larger pool (lines not read hold NaN), indices permuted, one
    sequence padded (pad_slot_id) when ``padded``, half the sequences with an initial state."""
    rng = np.random.default_rng(seed)
    S = width - 1 if state_len is None else state_len
    T = sum(lengths)
    batch = len(lengths)
    lines = batch + 3
    if channel_last:  # a (T, D) slice of a fused projection, viewed as (D, T)
        x = _array(rng, (T, dim), dtype, lib)
        x = x.t() if lib == "torch" else x.T
    else:
        x = _array(rng, (dim, T), dtype, lib)
    weight = _array(rng, (dim, width), weight_dtype or dtype, lib, 0.5)
    bias_t = _array(rng, (dim,), weight_dtype or dtype, lib, 0.5) if bias else None
    states = _array(rng, (lines, dim, S), dtype, lib)
    indices = [int(i) for i in rng.permutation(lines)[:batch]]
    skipped = []
    if padded:
        skipped = [indices[batch // 2]]
        indices[batch // 2] = -1
    for line in range(lines):  # NaN in every line the call must neither read nor write
        if line not in indices:
            states[line] = float("nan")
    qsl = np.concatenate([[0], np.cumsum(lengths)]).astype(int).tolist()
    initial = (rng.random(batch) < 0.5) if initial_state else np.zeros(batch, bool)
    initial = initial.astype(np.uint8)
    has_initial = torch.from_numpy(initial) if lib == "torch" else initial
    return Varlen(x, weight, bias_t, states, _int32(qsl, lib), _int32(indices, lib), has_initial,
                  list(lengths), activation, -1, skipped)


@dataclass
class Update:
    x: Any
    conv_state: Any
    weight: Any
    bias: Any
    conv_state_indices: Any
    cache_seqlens: Any
    activation: str = "none"
    pad_slot_id: int = -1

    def args(self) -> tuple[Any, ...]:
        return (self.x, self.conv_state, self.weight, self.bias, self.conv_state_indices, self.cache_seqlens)

    def reference(self):
        from reference import update

        x = f64(self.x)
        if x.ndim == 2:
            x = x[:, :, None]
        out, state, pre, mag = update(
            x, f64(self.conv_state), f64(self.weight), None if self.bias is None else f64(self.bias),
            None if self.conv_state_indices is None else f64(self.conv_state_indices).astype(int),
            None if self.cache_seqlens is None else f64(self.cache_seqlens).astype(int),
            self.activation, self.pad_slot_id)
        if f64(self.x).ndim == 2:
            out, pre, mag = out[:, :, 0], pre[:, :, 0], mag[:, :, 0]
        return out, state, pre, mag


def update_case(*, lib: str = "torch", dtype: str = "float32", width: int = 4, dim: int = 16, batch: int = 5,
                tokens: int = 3, state_len: int | None = None, circular: bool = False, padded: bool = True,
                channel_last: bool = False, bias: bool = True, activation: str = "silu",
                seed: int | None = None) -> Update:
    rng = np.random.default_rng(seed)
    S = (width - 1 if not circular else width + 2) if state_len is None else state_len
    lines = batch + 2
    if tokens == 0:
        x = _array(rng, (batch, dim), dtype, lib)
    elif channel_last:
        x = _array(rng, (batch, tokens, dim), dtype, lib)
        x = x.transpose(1, 2) if lib == "torch" else x.transpose(0, 2, 1)
    else:
        x = _array(rng, (batch, dim, tokens), dtype, lib)
    weight = _array(rng, (dim, width), dtype, lib, 0.5)
    bias_t = _array(rng, (dim,), dtype, lib, 0.5) if bias else None
    state = _array(rng, (lines, dim, S), dtype, lib)
    indices = [int(i) for i in rng.permutation(lines)[:batch]]
    if padded:
        indices[batch // 2] = -1
    for line in range(lines):
        if line not in indices:
            state[line] = float("nan")
    seqlens = _int32([int(v) for v in rng.integers(0, 50, batch)], lib) if circular else None
    return Update(x, state, weight, bias_t, _int32(indices, lib), seqlens, activation, -1)
