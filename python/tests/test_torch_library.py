"""The ops as torch sees them: torch.library.opcheck on every op and every CPU backend that
serves it (schema mutations, fake tensors, autograd registration, AOT dispatch), the in-place
ops refused by a fresh-output backend before anything is written, and the contract an
``inplace=`` argument demands."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import deltakern  # noqa: E402
import deltakern.torch_ops  # noqa: E402,F401  (registers torch.ops.deltakern)
from cases import host, same_bits, update_case, varlen_case  # noqa: E402

OPS = torch.ops.deltakern


def _keeps_in_place(backend: str, op: str) -> bool:
    for plugin in deltakern.list_backends():
        if plugin["name"] == backend:
            return any(o["name"] == op and o["contract"] == "in_place" for o in plugin["ops"])
    return False


def varlen_out_args(case):
    return (*case.args(), torch.empty_like(case.x), case.activation, case.pad_slot_id, case.max_seq_len)


def update_out_args(case):
    return (*case.args(), torch.empty_like(case.x), case.activation, case.pad_slot_id)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_opcheck_varlen_out(deltakern_backend, dtype):
    case = varlen_case(dtype=dtype)
    torch.library.opcheck(OPS.causal_conv1d_varlen_out.default, varlen_out_args(case))


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_opcheck_update_out(deltakern_backend, dtype):
    case = update_case(dtype=dtype, circular=True)
    torch.library.opcheck(OPS.causal_conv1d_update_out.default, update_out_args(case))


def test_opcheck_in_place_ops(deltakern_backend):
    if not _keeps_in_place(deltakern_backend, "causal_conv1d_varlen"):
        pytest.skip(f"{deltakern_backend} does not keep the in-place contract (tested below)")
    v = varlen_case()
    torch.library.opcheck(OPS.causal_conv1d_varlen_.default,
                          (*v.args(), v.activation, v.pad_slot_id, v.max_seq_len))
    u = update_case()
    torch.library.opcheck(OPS.causal_conv1d_update_.default, (*u.args(), u.activation, u.pad_slot_id))


def test_in_place_op_refused_by_a_fresh_output_backend_writes_nothing(deltakern_backend):
    if _keeps_in_place(deltakern_backend, "causal_conv1d_varlen"):
        pytest.skip(f"{deltakern_backend} keeps the in-place contract")
    v = varlen_case()
    before = [host(a) for a in v.args() if a is not None]
    with pytest.raises(NotImplementedError, match=rf"backend '{deltakern_backend}' serves causal_conv1d_varlen "
                                                  r"with a fresh output") as raised:
        OPS.causal_conv1d_varlen_(*v.args(), v.activation, v.pad_slot_id, v.max_seq_len)
    assert isinstance(raised.value, deltakern.UnsupportedError)
    assert all(same_bits(a, b) for a, b in zip([a for a in v.args() if a is not None], before))
    u = update_case()
    with pytest.raises(deltakern.UnsupportedError, match="causal_conv1d_update_: "):
        OPS.causal_conv1d_update_(*u.args(), u.activation, u.pad_slot_id)


@pytest.mark.parametrize("inplace", [True, False, None])
def test_inplace_argument_demands_a_contract(deltakern_backend, inplace):
    keeps = _keeps_in_place(deltakern_backend, "causal_conv1d_varlen")
    v = varlen_case()
    x_before, states_before = host(v.x), host(v.conv_states)
    if inplace is True and not keeps:
        with pytest.raises(deltakern.UnsupportedError):
            deltakern.causal_conv1d_varlen(*v.args(), max_seq_len=v.max_seq_len, inplace=True)
        assert same_bits(v.x, x_before) and same_bits(v.conv_states, states_before)
        return
    result = deltakern.causal_conv1d_varlen(*v.args(), max_seq_len=v.max_seq_len, inplace=inplace)
    expect_in_place = keeps if inplace is None else inplace
    assert (result is v.x) == expect_in_place
    if not expect_in_place:
        assert result.data_ptr() != v.x.data_ptr()
        assert same_bits(v.x, x_before)


def test_numpy_inplace_false_on_an_in_place_backend_is_refused():
    if "standin" not in deltakern.testing.cpu_backends():
        pytest.skip("standin is not loaded")
    v = varlen_case(lib="numpy")
    x_before, states_before = host(v.x), host(v.conv_states)
    with deltakern.use_backend("standin"):
        with pytest.raises(NotImplementedError, match="by convolving x in place"):
            deltakern.causal_conv1d_varlen(*v.args(), max_seq_len=v.max_seq_len, inplace=False)
    assert same_bits(v.x, x_before) and same_bits(v.conv_states, states_before)


import deltakern.testing  # noqa: E402
