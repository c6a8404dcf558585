"""The CUDA half of the review-thread scenario: with max_seq_len given, the call captures into a
torch.cuda.CUDAGraph and replays on new inputs; without it on portable, capture is a clear error
(never a silent sync). Runs on the GPU machine; skipped without a GPU."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

import deltakern  # noqa: E402
from cases import on_cuda, update_case, varlen_case  # noqa: E402


def _cuda_case(seed: int):
    return on_cuda(varlen_case(dtype="bfloat16", seed=seed))


def capture(call, x, states):
    """call(x, states) warmed up on a side stream (on copies), then captured into a CUDA graph
    with the host syncs counted; returns the graph and the call's result."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        call(x.clone(), states.clone())
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    before = deltakern.host_syncs()
    with torch.cuda.graph(graph):
        out = call(x, states)
    assert deltakern.host_syncs() == before
    return graph, out


@pytest.mark.parametrize("backend", ["portable", "native"])
def test_varlen_captures_and_replays_with_new_inputs(backend):
    if backend not in [p["name"] for p in deltakern.list_backends() if p["state"] == "loaded"]:
        pytest.skip(f"{backend} is not installed")
    with deltakern.use_backend(backend):
        case, fresh = _cuda_case(0), _cuda_case(1)
        x, states = case.x.clone(), case.conv_states.clone()
        graph, out = capture(
            lambda x_, s_: deltakern.causal_conv1d_varlen(x_, *case.args()[1:3], s_, *case.args()[4:],
                                                         activation="silu", max_seq_len=case.max_seq_len),
            x, states)
        x.copy_(fresh.x)
        states.copy_(fresh.conv_states)
        graph.replay()
        torch.cuda.synchronize()
        expected = deltakern.causal_conv1d_varlen(fresh.x, *case.args()[1:3], fresh.conv_states, *case.args()[4:],
                                                  activation="silu", max_seq_len=case.max_seq_len)
        torch.testing.assert_close(out, expected, rtol=0, atol=0, equal_nan=True)
        torch.testing.assert_close(states, fresh.conv_states, rtol=0, atol=0, equal_nan=True)


def test_capture_without_max_seq_len_on_portable_is_an_error():
    with deltakern.use_backend("portable"):
        case = _cuda_case(0)
        graph = torch.cuda.CUDAGraph()
        with pytest.raises(deltakern.Error):
            with torch.cuda.graph(graph):
                deltakern.causal_conv1d_varlen(*case.args(), activation="silu")


@pytest.mark.parametrize("backend", ["portable", "native"])
def test_update_captures_and_replays_with_new_inputs(backend):
    if backend not in [p["name"] for p in deltakern.list_backends() if p["state"] == "loaded"]:
        pytest.skip(f"{backend} is not installed")

    def cuda_update(seed):
        return on_cuda(update_case(dtype="bfloat16", tokens=1, batch=64, dim=256, seed=seed))

    with deltakern.use_backend(backend):
        case, fresh = cuda_update(0), cuda_update(1)
        x, state = case.x.clone(), case.conv_state.clone()
        graph, out = capture(
            lambda x_, s_: deltakern.causal_conv1d_update(x_, s_, case.weight, case.bias, case.conv_state_indices,
                                                         None, activation="silu"),
            x, state)
        x.copy_(fresh.x)
        state.copy_(fresh.conv_state)
        graph.replay()
        torch.cuda.synchronize()
        expected = deltakern.causal_conv1d_update(fresh.x, fresh.conv_state, case.weight, case.bias,
                                                  case.conv_state_indices, None, activation="silu")
        torch.testing.assert_close(out, expected, rtol=0, atol=0, equal_nan=True)
        torch.testing.assert_close(state, fresh.conv_state, rtol=0, atol=0, equal_nan=True)
