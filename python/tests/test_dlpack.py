"""Tensors cross through DLPack with no copy, in every layout the core takes: strided
(a padded row pitch), channel-last views of a (T, D) buffer, numpy, torch and a bare
``__dlpack__`` object; nothing is made contiguous behind the caller's back, so a layout the
core does not take is an error naming the argument."""

from __future__ import annotations

import numpy as np
import pytest

import deltakern
from cases import f64, host, same_bits, torch, varlen_case

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


class OnlyDlpack:
    """A producer that offers nothing but the DLPack protocol."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def _channel_last(a):
    """a's values in a (T, D) buffer, viewed as (D, T): the slice of a fused projection."""
    if torch is not None and isinstance(a, torch.Tensor):
        buffer = torch.empty((a.shape[1], a.shape[0]), dtype=a.dtype)
        view = buffer.t()
    else:
        buffer = np.empty((a.shape[1], a.shape[0]), dtype=a.dtype)
        view = buffer.T
    view[...] = a
    return view


def _pitched(a, extra: int):
    """a's values in a buffer with `extra` more columns: the same view, a longer row pitch."""
    if torch is not None and isinstance(a, torch.Tensor):
        backing = torch.zeros((a.shape[0], a.shape[1] + extra), dtype=a.dtype)
    else:
        backing = np.zeros((a.shape[0], a.shape[1] + extra), dtype=a.dtype)
    view = backing[:, : a.shape[1]]
    view[...] = a
    return view


@pytest.mark.parametrize("lib", ["numpy"] + (["torch"] if torch is not None else []))
@pytest.mark.parametrize("layout", ["pitched", "channel_last"])
def test_strided_views_go_in_uncopied_and_give_the_contiguous_result(deltakern_backend, lib, layout):
    dense = varlen_case(lib=lib, seed=1)
    strided = varlen_case(lib=lib, seed=1)
    strided.x = _pitched(strided.x, 7) if layout == "pitched" else _channel_last(strided.x)
    assert same_bits(dense.x, strided.x)
    ptr = strided.x.data_ptr() if lib == "torch" else strided.x.__array_interface__["data"][0]
    r_dense = deltakern.causal_conv1d_varlen(*dense.args(), activation="silu", max_seq_len=dense.max_seq_len)
    r_strided = deltakern.causal_conv1d_varlen(*strided.args(), activation="silu", max_seq_len=strided.max_seq_len)
    assert np.array_equal(host(r_dense), host(r_strided))
    assert same_bits(dense.conv_states, strided.conv_states)
    if r_strided is strided.x:  # in place: through the caller's own memory, strides and all
        now = strided.x.data_ptr() if lib == "torch" else strided.x.__array_interface__["data"][0]
        assert now == ptr


def test_a_bare_dlpack_producer_is_accepted(deltakern_backend):
    case = varlen_case(lib="numpy", seed=2)
    expected_case = varlen_case(lib="numpy", seed=2)
    expected = host(deltakern.causal_conv1d_varlen(*expected_case.args(), max_seq_len=case.max_seq_len))
    args = [OnlyDlpack(a) if isinstance(a, np.ndarray) else a for a in case.args()]
    result = deltakern.causal_conv1d_varlen(*args, max_seq_len=case.max_seq_len)
    if result is args[0]:
        assert np.array_equal(case.x, expected)  # convolved in the producer's memory
    else:
        # A fresh result speaks DLPack: numpy takes it without a copy.
        assert np.array_equal(np.from_dlpack(result), expected)


def test_a_fresh_result_is_zero_copy_and_owned(deltakern_backend):
    case = varlen_case(lib="numpy")
    result = deltakern.causal_conv1d_varlen(*case.args(), max_seq_len=case.max_seq_len)
    if result is case.x:
        pytest.skip("in-place backend: the result is x")
    # The numpy array views the backend's allocation (no copy) and keeps it alive.
    assert result.base is not None and not result.flags.owndata
    values = result.copy()
    del case
    import gc

    gc.collect()
    assert np.array_equal(result, values)


@needs_torch
def test_out_variant_writes_through_the_callers_strides(deltakern_backend):
    case = varlen_case(channel_last=True)
    backing = torch.full((case.x.shape[1], case.x.shape[0] + 8), -3.0)  # rows of D + 8
    out = backing[:, : case.x.shape[0]].t()
    deltakern.causal_conv1d_varlen_out(*case.args(), out=out, activation="silu", max_seq_len=case.max_seq_len)
    assert (backing[:, case.x.shape[0]:] == -3.0).all()
    assert np.isfinite(f64(out)).all()


@pytest.mark.parametrize("lib", ["numpy"] + (["torch"] if torch is not None else []))
def test_an_unsupported_layout_is_an_error_naming_x_and_writes_nothing(deltakern_backend, lib):
    case = varlen_case(lib=lib)
    wide = varlen_case(lib=lib, lengths=tuple(2 * n for n in case.lengths))
    case.x = wide.x[:, ::2]  # time stride 2, channel stride > 1: neither layout
    before = [host(a) for a in (case.x, case.conv_states)]
    with pytest.raises(deltakern.InvalidArgumentError, match=r"^causal_conv1d_varlen(_out)?: x: .*got strides"):
        deltakern.causal_conv1d_varlen(*case.args(), max_seq_len=case.max_seq_len)
    assert same_bits(case.x, before[0]) and same_bits(case.conv_states, before[1])


@needs_torch
def test_a_tensor_that_requires_grad_is_viewed_not_copied(deltakern_backend):
    case = varlen_case()
    case.weight.requires_grad_(True)
    result = deltakern.causal_conv1d_varlen(*case.args(), max_seq_len=case.max_seq_len, inplace=False)
    assert np.isfinite(f64(result)).all()
