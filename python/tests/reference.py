"""An independent float64 reference of the two ops (docs/design.md, section 5), in numpy, and
the accuracy bound the tests hold results to.

Written from the design's text, not from any backend's code, so that a backend and the
reference agreeing means something.
"""

from __future__ import annotations

import numpy as np


def _act(v: np.ndarray, activation: str) -> np.ndarray:
    return v / (1.0 + np.exp(-v)) if activation == "silu" else v


def varlen(x, weight, bias, states, qsl, cache_indices, has_initial_state, activation="none", pad_slot_id=-1):
    """Returns (out, new_states, pre, magnitude): pre-activation sums and the sums of their
    terms' magnitudes, for the bound. Skipped sequences leave out zeros and their lines alone."""
    x = np.asarray(x, np.float64)
    weight = np.asarray(weight, np.float64)
    states = np.array(states, np.float64)
    D, T = x.shape
    W = weight.shape[1]
    S = states.shape[2]
    lines = states.shape[0]
    out = np.zeros((D, T))
    pre = np.zeros((D, T))
    mag = np.zeros((D, T))
    bias_v = np.zeros(D) if bias is None else np.asarray(bias, np.float64)
    for b in range(len(qsl) - 1):
        start, end = int(qsl[b]), int(qsl[b + 1])
        line = b if cache_indices is None else int(cache_indices[b])
        if line == pad_slot_id or not 0 <= line < lines:
            continue
        init = has_initial_state is not None and bool(has_initial_state[b])
        prior = states[line] if init else np.zeros((D, S))
        e = np.concatenate([prior, x[:, start:end]], axis=1)
        for t in range(end - start):
            window = e[:, S + t - (W - 1): S + t + 1]
            terms = weight * window
            pre[:, start + t] = bias_v + terms.sum(axis=1)
            mag[:, start + t] = np.abs(bias_v) + np.abs(terms).sum(axis=1)
        out[:, start:end] = _act(pre[:, start:end], activation)
        states[line] = e[:, -S:]
    return out, states, pre, mag


def update(x, state, weight, bias, indices, cache_seqlens, activation="none", pad_slot_id=-1):
    """x (batch, D, Tq); shift mode without cache_seqlens, circular with it."""
    x = np.asarray(x, np.float64)
    weight = np.asarray(weight, np.float64)
    state = np.array(state, np.float64)
    B, D, Tq = x.shape
    W = weight.shape[1]
    S = state.shape[2]
    out = np.zeros_like(x)
    pre = np.zeros_like(x)
    mag = np.zeros_like(x)
    bias_v = np.zeros(D) if bias is None else np.asarray(bias, np.float64)
    for b in range(B):
        line = b if indices is None else int(indices[b])
        if line == pad_slot_id or not 0 <= line < state.shape[0]:
            continue
        st = state[line]
        for t in range(Tq):
            if cache_seqlens is None:
                e = np.concatenate([st, x[b][:, : t + 1]], axis=1)
                window = e[:, -W:]
            else:
                n = int(cache_seqlens[b])
                hist = [st[:, (n + t - (W - 1) + j) % S] for j in range(W - 1)]
                window = np.stack([*hist, x[b][:, t]], axis=1)
            terms = weight * window
            pre[b][:, t] = bias_v + terms.sum(axis=1)
            mag[b][:, t] = np.abs(bias_v) + np.abs(terms).sum(axis=1)
            if cache_seqlens is not None:
                st[:, (int(cache_seqlens[b]) + t) % S] = x[b][:, t]
        if cache_seqlens is None:
            state[line] = np.concatenate([st, x[b]], axis=1)[:, -S:]
        out[b] = _act(pre[b], activation)
    return out, state, pre, mag


# Unit roundoff of each output dtype (half an ulp at 1, relative).
OUTPUT_EPS = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}


def allowed_error(ref, pre, mag, dtype: str, width: int, activation: str) -> np.ndarray:
    """Section 6's bound, slightly simplified: the float32 sum's error (n u M, carried through
    silu by 1.1 plus silu's own float32 error), then one rounding to the output dtype (half an
    ulp, relative, plus the dtype's subnormal spacing). The same bound as the conformance suite's
    output_tolerance (conformance/src/compare.cpp), including its bf16 silu term."""
    u = 2.0**-24
    n = width + 1
    gamma = n * u / (1 - n * u)
    e = gamma * mag
    if activation == "silu":
        e = 1.1 * e + (8 + 2 * np.abs(pre)) * u * np.abs(ref)
        if dtype == "bfloat16":  # silu(v) = h + h tanh(h), h = v/2, may use tanh.approx (2^-10.98)
            h = 0.5 * np.abs(pre)
            e = e + 2.0**-10 * h * np.minimum(1.0, h)
    tiny = {"float32": 2.0**-149, "float16": 2.0**-24, "bfloat16": 2.0**-133}[dtype]
    return OUTPUT_EPS[dtype] * (np.abs(ref) + e) + e + tiny
