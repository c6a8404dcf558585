"""torch.compile(fullgraph=True) of a small GDN-conv block on the CPU: a fused projection whose
slice is x (channel-last, no copy), the varlen conv with silu, and the next projection, with
zero graph breaks, on every CPU backend, matching eager bit for bit in the conv's output and
the state update."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import torch._dynamo.testing  # noqa: E402

import deltakern  # noqa: E402
import deltakern.torch_ops  # noqa: E402,F401
from cases import varlen_case  # noqa: E402


class GdnConvBlock(torch.nn.Module):
    def __init__(self, hidden: int, dim: int, width: int) -> None:
        super().__init__()
        self.in_proj = torch.nn.Linear(hidden, 2 * dim, bias=False)
        self.conv_weight = torch.nn.Parameter(torch.randn(dim, width) * 0.5, requires_grad=False)
        self.conv_bias = torch.nn.Parameter(torch.randn(dim) * 0.5, requires_grad=False)
        self.out_proj = torch.nn.Linear(dim, hidden, bias=False)
        self.dim = dim

    def forward(self, h, conv_states, query_start_loc, cache_indices, has_initial_state, max_seq_len: int):
        fused = self.in_proj(h)                   # (T, 2D)
        x = fused[:, : self.dim].t()              # (D, T) channel-last view of the projection
        gate = fused[:, self.dim:]
        y = deltakern.causal_conv1d_varlen(x, self.conv_weight, self.conv_bias, conv_states, query_start_loc,
                                           cache_indices, has_initial_state, activation="silu",
                                           max_seq_len=max_seq_len)
        return self.out_proj(y.t() * torch.sigmoid(gate)), y


def test_gdn_conv_block_compiles_with_no_graph_break(deltakern_backend):
    torch.manual_seed(0)
    dim, hidden = 24, 32
    case = varlen_case(dim=dim)
    compiles_like_eager(GdnConvBlock(hidden, dim, 4).eval(), torch.randn(sum(case.lengths), hidden), case)


def compiles_like_eager(block, h, case):
    """The block under torch.compile(fullgraph=True): no graph break, and the conv's output and the
    state update bit for bit as in eager."""
    states_eager = case.conv_states.clone()
    args = (case.query_start_loc, case.cache_indices, case.has_initial_state, case.max_seq_len)
    with torch.no_grad():
        explanation = torch._dynamo.explain(block)(h, case.conv_states.clone(), *args)
        assert explanation.graph_break_count == 0, explanation.break_reasons
        torch._dynamo.reset()

        compiled = torch.compile(block, fullgraph=True)
        out_c, y_c = compiled(h, case.conv_states, *args)
        out_e, y_e = block(h, states_eager, *args)
    assert torch.equal(y_c, y_e), "the compiled conv differs from eager"
    assert torch.equal(case.conv_states.nan_to_num(), states_eager.nan_to_num()), "state updates differ"
    torch.testing.assert_close(out_c, out_e)


def test_gdn_conv_block_compiles_once_for_dynamic_shapes(deltakern_backend):
    """torch.compile(dynamic=True): calls with other token counts and batch sizes reuse the one
    graph (the ops' fakes need no concrete sizes) and still match eager bit for bit."""
    torch.manual_seed(0)
    dim, hidden = 24, 32
    block = GdnConvBlock(hidden, dim, 4).eval()
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounter()
    compiled = torch.compile(block, backend=counter, dynamic=True, fullgraph=True)
    for seed, lengths in enumerate([(5, 1, 17, 3, 9), (30, 2, 11), (7, 7, 7, 7, 7, 7, 7)]):
        case = varlen_case(dim=dim, lengths=lengths, seed=seed)
        h = torch.randn(sum(case.lengths), hidden)
        states_eager = case.conv_states.clone()
        args = (case.query_start_loc, case.cache_indices, case.has_initial_state, case.max_seq_len)
        with torch.no_grad():
            _, y_c = compiled(h, case.conv_states, *args)
            _, y_e = block(h, states_eager, *args)
        assert torch.equal(y_c, y_e), f"lengths {lengths}: the compiled conv differs from eager"
        assert torch.equal(case.conv_states.nan_to_num(), states_eager.nan_to_num())
    assert counter.frame_count == 1, f"{counter.frame_count} compilations for 3 shapes"
