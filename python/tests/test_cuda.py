"""The CUDA half of the package's tests, once per backend with a usable CUDA device (native,
portable): results against the float64 reference (engines' sizes too), torch.library.opcheck
with CUDA tensors, the review thread's host-read claims, calls on the caller's stream, and
torch.compile. Skipped without a GPU; the GPU machine runs it (scripts/gpu-check.sh python).
Graph capture is test_cuda_graphs.py."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

import deltakern  # noqa: E402
import deltakern.torch_ops  # noqa: E402,F401  (registers torch.ops.deltakern)
from cases import f64, host, on_cuda, same_bits, update_case, varlen_case  # noqa: E402
from test_compile import GdnConvBlock, compiles_like_eager  # noqa: E402
from test_review_thread import declares_derivation  # noqa: E402
from test_numerics import check_update, check_varlen  # noqa: E402
from test_torch_library import _keeps_in_place, update_out_args, varlen_out_args  # noqa: E402

OPS = torch.ops.deltakern
DTYPES = ["float32", "float16", "bfloat16"]


def _run_varlen(backend, case, dtype, width):
    case.x_before, case.states_before = case.x.clone(), case.conv_states.clone()
    case.x_before_f64 = f64(case.x)
    result = deltakern.causal_conv1d_varlen(*case.args(), activation=case.activation, max_seq_len=case.max_seq_len)
    in_place = result is case.x
    assert in_place == _keeps_in_place(backend, "causal_conv1d_varlen")
    assert result.device == case.x.device and result.dtype == case.x.dtype and result.shape == case.x.shape
    if not in_place:
        assert same_bits(case.x, case.x_before), "a fresh-output backend changed x"
    check_varlen(case, result, case.conv_states, dtype, width, in_place)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("width", [2, 3, 4])
@pytest.mark.parametrize("initial_state", [True, False])
@pytest.mark.parametrize("channel_last", [False, True])
def test_varlen_matches_the_reference(deltakern_cuda_backend, dtype, width, initial_state, channel_last):
    case = on_cuda(varlen_case(dtype=dtype, width=width, initial_state=initial_state, channel_last=channel_last))
    _run_varlen(deltakern_cuda_backend, case, dtype, width)


@pytest.mark.parametrize("channel_last", [False, True])
def test_varlen_at_an_engine_size(deltakern_cuda_backend, channel_last):
    # D 8192, 6208 tokens in 6 sequences, one of them longer than 4096 and one empty.
    case = on_cuda(varlen_case(dtype="bfloat16", dim=8192, lengths=(4100, 1, 0, 2047, 57, 3),
                               channel_last=channel_last, seed=8192))
    _run_varlen(deltakern_cuda_backend, case, "bfloat16", 4)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("width", [2, 4])
@pytest.mark.parametrize("mode", ["shift", "circular"])
@pytest.mark.parametrize("tokens", [0, 1, 4])  # 0: a 2-D x, one token
def test_update_matches_the_reference(deltakern_cuda_backend, dtype, width, mode, tokens):
    case = on_cuda(update_case(dtype=dtype, width=width, circular=mode == "circular", tokens=tokens,
                               channel_last=tokens == 4))
    _run_update(deltakern_cuda_backend, case, dtype, width)


def test_update_at_batch_1024(deltakern_cuda_backend):
    case = on_cuda(update_case(dtype="bfloat16", dim=4096, batch=1024, tokens=1, seed=1024))
    _run_update(deltakern_cuda_backend, case, "bfloat16", 4)


def _run_update(backend, case, dtype, width):
    check_update(case, dtype, width, in_place=_keeps_in_place(backend, "causal_conv1d_update"))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_opcheck_varlen_out(deltakern_cuda_backend, dtype):
    case = on_cuda(varlen_case(dtype=dtype))
    torch.library.opcheck(OPS.causal_conv1d_varlen_out.default, varlen_out_args(case))


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_opcheck_update_out(deltakern_cuda_backend, dtype):
    case = on_cuda(update_case(dtype=dtype, circular=True))
    torch.library.opcheck(OPS.causal_conv1d_update_out.default, update_out_args(case))


def test_opcheck_in_place_ops(deltakern_cuda_backend):
    if not _keeps_in_place(deltakern_cuda_backend, "causal_conv1d_varlen"):
        pytest.skip(f"{deltakern_cuda_backend} does not keep the in-place contract")
    v = on_cuda(varlen_case())
    torch.library.opcheck(OPS.causal_conv1d_varlen_.default, (*v.args(), v.activation, v.pad_slot_id, v.max_seq_len))
    u = on_cuda(update_case())
    torch.library.opcheck(OPS.causal_conv1d_update_.default, (*u.args(), u.activation, u.pad_slot_id))


def test_host_metadata_path_reads_nothing_from_the_device(deltakern_cuda_backend):
    case = on_cuda(varlen_case(dtype="bfloat16"))
    before = deltakern.host_syncs()
    deltakern.causal_conv1d_varlen(*case.args(), activation=case.activation, max_seq_len=case.max_seq_len)
    assert deltakern.host_syncs() - before == 0


def test_derived_path_reads_as_the_backend_declares(deltakern_cuda_backend):
    case = on_cuda(varlen_case(dtype="bfloat16"))
    before = deltakern.host_syncs()
    result = deltakern.causal_conv1d_varlen(*case.args(), activation=case.activation)
    assert deltakern.host_syncs() - before == (1 if declares_derivation(deltakern_cuda_backend, "cuda") else 0)
    assert np.isfinite(host(result)).all()


def test_host_metadata_matches_the_derived_result_bit_for_bit(deltakern_cuda_backend):
    case = on_cuda(varlen_case(dtype="bfloat16"))
    x0, states0 = case.x.clone(), case.conv_states.clone()
    with_host = host(deltakern.causal_conv1d_varlen(*case.args(), activation=case.activation,
                                                    max_seq_len=case.max_seq_len))
    states_host = host(case.conv_states)
    case.x.copy_(x0)
    case.conv_states.copy_(states0)
    derived = host(deltakern.causal_conv1d_varlen(*case.args(), activation=case.activation))
    assert np.array_equal(with_host, derived, equal_nan=True)
    assert same_bits(states_host, case.conv_states)
    assert not same_bits(states_host, states0)


def test_the_call_runs_on_the_callers_stream(deltakern_cuda_backend):
    """On a side stream, x is written only after a long device sleep; a call that ran on any other
    stream than the current one would read the old x."""
    case, fresh = on_cuda(varlen_case(dtype="float32", seed=1)), on_cuda(varlen_case(dtype="float32", seed=2))
    expected_case = on_cuda(varlen_case(dtype="float32", seed=1))
    expected_case.x.copy_(fresh.x)
    expected = host(deltakern.causal_conv1d_varlen(*expected_case.args(), activation=case.activation,
                                                   max_seq_len=case.max_seq_len))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # about 0.1 s of GPU time
        case.x.copy_(fresh.x)
        result = deltakern.causal_conv1d_varlen(*case.args(), activation=case.activation,
                                                max_seq_len=case.max_seq_len)
    side.synchronize()
    assert np.array_equal(host(result), expected, equal_nan=True)
    assert same_bits(case.conv_states, expected_case.conv_states)


def test_gdn_conv_block_compiles_with_no_graph_break(deltakern_cuda_backend):
    torch.manual_seed(0)
    dim, hidden = 64, 48
    case = on_cuda(varlen_case(dim=dim))
    compiles_like_eager(GdnConvBlock(hidden, dim, 4).eval().cuda(),
                        torch.randn(sum(case.lengths), hidden, device="cuda"), case)
