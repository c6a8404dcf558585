"""Results against the independent float64 reference (reference.py) on fresh random inputs:
every dtype, widths 2..4, initial state on and off, padded slots, both layouts, on every CPU
backend. States are copies of inputs and must match bit for bit; outputs within section 6's
bound of the design."""

from __future__ import annotations

import numpy as np
import pytest

import deltakern
from cases import f64, host, same_bits, torch, update_case, varlen_case
from reference import allowed_error

DTYPES = ["float32", "float16", "bfloat16"]
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


def assert_within_bound(out, ref, pre, mag, dtype, width, activation, live=None):
    err = np.abs(f64(out) - ref)
    bound = allowed_error(ref, pre, mag, dtype, width, activation)
    bad = err > bound
    if live is not None:
        bad &= live
    assert not bad.any(), (
        f"{int(bad.sum())} elements outside the bound; worst error {err[bad].max():.3g} "
        f"at {np.argwhere(bad)[0].tolist()}"
    )


def live_tokens(case) -> np.ndarray:
    """Tokens of sequences the call does not skip, as a (D, T) mask."""
    qsl = f64(case.query_start_loc).astype(int)
    indices = f64(case.cache_indices).astype(int)
    mask = np.ones(f64(case.x).shape, bool)
    for b in range(len(qsl) - 1):
        if indices[b] == case.pad_slot_id:
            mask[:, qsl[b]: qsl[b + 1]] = False
    return mask


def check_varlen(case, result, states_after, dtype, width, in_place):
    ref, ref_states, pre, mag = case.reference(x=case.x_before, states=case.states_before)
    live = live_tokens(case)
    assert_within_bound(result, ref, pre, mag, dtype, width, case.activation, live)
    # Skipped sequences: a fresh output holds zeros there, an in-place one leaves x.
    expected_skipped = case.x_before_f64 if in_place else np.zeros_like(ref)
    assert np.array_equal(f64(result)[~live], expected_skipped[~live])
    assert np.array_equal(f64(states_after), ref_states, equal_nan=True), "state pool differs from the reference"


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("width", [2, 3, 4])
@pytest.mark.parametrize("initial_state", [True, False])
@pytest.mark.parametrize("channel_last", [False, True])
def test_varlen_torch_matches_the_reference(deltakern_backend, dtype, width, initial_state, channel_last):
    case = varlen_case(dtype=dtype, width=width, initial_state=initial_state, channel_last=channel_last,
                       state_len=width + 1)
    case.x_before, case.states_before = case.x.clone(), case.conv_states.clone()
    case.x_before_f64 = f64(case.x)
    result = deltakern.causal_conv1d_varlen(*case.args(), activation=case.activation, max_seq_len=case.max_seq_len)
    in_place = result is case.x
    assert in_place == (deltakern_backend == "standin")
    assert result.dtype == case.x.dtype and result.shape == case.x.shape
    check_varlen(case, result, case.conv_states, dtype, width, in_place)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("width", [2, 3, 4])
@pytest.mark.parametrize("bias", [True, False])
def test_varlen_numpy_matches_the_reference(deltakern_backend, dtype, width, bias):
    case = varlen_case(lib="numpy", dtype=dtype, width=width, bias=bias, activation="none")
    case.x_before, case.states_before = case.x.copy(), case.conv_states.copy()
    case.x_before_f64 = f64(case.x)
    result = deltakern.causal_conv1d_varlen(*case.args(), activation=case.activation, max_seq_len=case.max_seq_len)
    assert isinstance(result, np.ndarray)
    in_place = result is case.x
    assert in_place == (deltakern_backend == "standin")
    if not in_place:
        assert not np.shares_memory(result, case.x)
        assert same_bits(case.x, case.x_before), "a fresh-output backend changed x"
    check_varlen(case, result, case.conv_states, dtype, width, in_place)


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_varlen_out_matches_the_reference_and_leaves_x(deltakern_backend, dtype):
    case = varlen_case(dtype=dtype, weight_dtype="float32")
    case.x_before, case.states_before = case.x.clone(), case.conv_states.clone()
    # An out with a padded row pitch: the elements outside the view must stay untouched.
    backing = torch.full((case.x.shape[0], case.x.shape[1] + 5), 7.0, dtype=case.x.dtype)
    out = backing[:, : case.x.shape[1]]
    deltakern.causal_conv1d_varlen_out(*case.args(), out=out, activation=case.activation,
                                       max_seq_len=case.max_seq_len)
    assert same_bits(case.x, case.x_before), "the out-variant changed x"
    assert (backing[:, case.x.shape[1]:] == 7.0).all(), "the out-variant wrote outside out's view"
    ref, ref_states, pre, mag = case.reference(x=case.x_before, states=case.states_before)
    assert_within_bound(out, ref, pre, mag, dtype, 4, case.activation, live_tokens(case))
    assert np.array_equal(f64(case.conv_states), ref_states, equal_nan=True)


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("width", [2, 3, 4])
@pytest.mark.parametrize("mode", ["shift", "circular"])
@pytest.mark.parametrize("tokens", [0, 1, 4])  # 0: a 2-D x, one token
def test_update_matches_the_reference(deltakern_backend, dtype, width, mode, tokens):
    case = update_case(dtype=dtype, width=width, circular=mode == "circular", tokens=tokens,
                       channel_last=tokens == 4 and width == 3)
    check_update(case, dtype, width, in_place=deltakern_backend == "standin")


def check_update(case, dtype, width, in_place):
    """Runs deltakern.causal_conv1d_update on the case and checks it against the reference."""
    ref, ref_state, pre, mag = case.reference()
    x_before = case.x.clone()
    result = deltakern.causal_conv1d_update(*case.args(), activation=case.activation)
    assert (result is case.x) == in_place
    if result is not case.x:
        assert same_bits(case.x, x_before)
    live = np.ones(ref.shape, bool)
    live[f64(case.conv_state_indices).astype(int) == case.pad_slot_id] = False
    assert_within_bound(result, ref, pre, mag, dtype, width, case.activation, live)
    assert np.array_equal(f64(case.conv_state), ref_state, equal_nan=True), "conv_state differs from the reference"


@needs_torch
def test_update_out_leaves_x(deltakern_backend):
    case = update_case(dtype="bfloat16", tokens=2)
    ref, ref_state, pre, mag = case.reference()
    x_before = host(case.x)
    out = torch.empty_like(case.x)
    deltakern.causal_conv1d_update_out(*case.args(), out=out, activation=case.activation)
    assert np.array_equal(host(case.x), x_before)
    live = np.ones(ref.shape, bool)
    live[f64(case.conv_state_indices).astype(int) == case.pad_slot_id] = False
    assert_within_bound(out, ref, pre, mag, "bfloat16", 4, case.activation, live)
    assert np.array_equal(f64(case.conv_state), ref_state, equal_nan=True)
