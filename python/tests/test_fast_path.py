"""The eager fast path (deltakern.ops outside torch.compile: one call of the extension, tensors
imported through torch's DLPack C exchange API) against the torch.library path it stands in for:
the same bits in the result and in the states, the same contract for inplace=True|False|None,
the same refusals, and an import that sees what __dlpack__ shows. Each test proves the fast path
served the call: the torch.library path is made unreachable while it runs."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import deltakern  # noqa: E402
import deltakern.torch_ops as torch_ops  # noqa: E402  (registers torch.ops.deltakern)
from cases import clone, host, same_bits, update_case, varlen_case  # noqa: E402
from deltakern import _core, _handoff  # noqa: E402

if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
    pytest.skip("this torch has no DLPack C exchange API: every call takes torch.library", allow_module_level=True)


class _Unreachable:
    def __getattr__(self, name: str):
        raise AssertionError(f"the call left the eager fast path (torch_ops.{name})")


@pytest.fixture
def eager_only(monkeypatch):
    """Inside the test, a call that is not served by the fast path fails."""
    monkeypatch.setattr(_handoff, "torch_ops", _Unreachable())


def _keeps_in_place(backend: str, op: str) -> bool:
    for plugin in deltakern.list_backends():
        if plugin["name"] == backend:
            return any(o["name"] == op and o["contract"] == "in_place" for o in plugin["ops"])
    return False


def _varlen(case, **kw):
    return deltakern.causal_conv1d_varlen(*case.args(), activation=case.activation, pad_slot_id=case.pad_slot_id,
                                          max_seq_len=case.max_seq_len, **kw)


def _varlen_torch_library(case, inplace):
    return torch_ops.causal_conv1d_varlen(*case.args(), activation=case.activation, pad_slot_id=case.pad_slot_id,
                                          max_seq_len=case.max_seq_len, inplace=inplace)


def _update(case, **kw):
    return deltakern.causal_conv1d_update(*case.args(), activation=case.activation, pad_slot_id=case.pad_slot_id,
                                          **kw)


def _update_torch_library(case, inplace):
    return torch_ops.causal_conv1d_update(*case.args(), activation=case.activation, pad_slot_id=case.pad_slot_id,
                                          inplace=inplace)


def _clone_strided(t):
    """A copy of t's whole storage viewed as t is (clone() would make a non-dense t compact)."""
    size = t.untyped_storage().nbytes() // t.element_size()
    flat = torch.as_strided(t, (size,), (1,), 0).clone()
    return flat.as_strided(t.shape, t.stride(), t.storage_offset())


def _twin(case):
    """The same case with every tensor cloned, x with its strides and storage offset."""
    fields = {k: clone(v) if isinstance(v, torch.Tensor) else v for k, v in vars(case).items()}
    fields["x"] = _clone_strided(case.x)
    return type(case)(**fields)


def _same_result(eager, reference, eager_case, reference_case):
    assert eager.shape == reference.shape and eager.stride() == reference.stride()
    assert eager.dtype == reference.dtype
    assert same_bits(eager, reference)
    assert (eager is eager_case.x) == (reference is reference_case.x)


LAYOUTS = ["time_contiguous", "channel_last"]


@pytest.mark.parametrize("inplace", [True, False, None])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_varlen_fast_path_matches_torch_library(deltakern_backend, monkeypatch, layout, inplace):
    if inplace is True and not _keeps_in_place(deltakern_backend, "causal_conv1d_varlen"):
        pytest.skip("refused (tested below)")
    case = varlen_case(channel_last=layout == "channel_last", seed=1)
    twin = _twin(case)
    reference = _varlen_torch_library(twin, inplace)
    with monkeypatch.context() as m:
        m.setattr(_handoff, "torch_ops", _Unreachable())
        eager = _varlen(case, inplace=inplace)
    _same_result(eager, reference, case, twin)
    assert same_bits(case.conv_states, twin.conv_states)
    assert same_bits(case.x, twin.x)


@pytest.mark.parametrize("inplace", [True, False, None])
@pytest.mark.parametrize("layout", [*LAYOUTS, "one_token", "strided"])
def test_update_fast_path_matches_torch_library(deltakern_backend, monkeypatch, layout, inplace):
    if inplace is True and not _keeps_in_place(deltakern_backend, "causal_conv1d_update"):
        pytest.skip("refused (tested below)")
    case = update_case(channel_last=layout == "channel_last", tokens=0 if layout == "one_token" else 3,
                       circular=layout == "strided", seed=2)
    if layout == "strided":  # x a slice of a wider batch: neither compact nor offset-free
        wide = update_case(batch=10, seed=3).x
        case.x = wide[1::2]
        assert not case.x.is_contiguous() and case.x.storage_offset() != 0
    twin = _twin(case)
    reference = _update_torch_library(twin, inplace)
    with monkeypatch.context() as m:
        m.setattr(_handoff, "torch_ops", _Unreachable())
        eager = _update(case, inplace=inplace)
    _same_result(eager, reference, case, twin)
    assert same_bits(case.conv_state, twin.conv_state)
    assert same_bits(case.x, twin.x)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_out_variants_fast_path_match_torch_library(deltakern_backend, eager_only, layout):
    channel_last = layout == "channel_last"
    for case, op, reference_op in (
        (varlen_case(channel_last=channel_last, seed=4), deltakern.causal_conv1d_varlen_out,
         torch.ops.deltakern.causal_conv1d_varlen_out),
        (update_case(channel_last=channel_last, seed=5), deltakern.causal_conv1d_update_out,
         torch.ops.deltakern.causal_conv1d_update_out),
    ):
        twin = _twin(case)
        out, reference_out = torch.empty_like(case.x), torch.empty_like(twin.x)
        extra = (case.max_seq_len,) if hasattr(case, "lengths") else ()
        reference_op(*twin.args(), reference_out, twin.activation, twin.pad_slot_id, *extra)
        kw = {"max_seq_len": case.max_seq_len} if extra else {}
        x_before = host(case.x)
        assert op(*case.args(), out=out, activation=case.activation, pad_slot_id=case.pad_slot_id, **kw) is None
        assert same_bits(out, reference_out)
        assert same_bits(case.args()[3 if extra else 1], twin.args()[3 if extra else 1])
        assert same_bits(case.x, x_before)


def test_fresh_result_is_torchs_tensor_in_xs_layout(deltakern_backend, eager_only):
    case = update_case(channel_last=True, seed=6)
    result = _update(case, inplace=False)
    assert type(result) is torch.Tensor
    assert result.data_ptr() != case.x.data_ptr()
    assert result.stride() == case.x.stride() and result.stride()[1] == 1
    case = varlen_case(channel_last=True, seed=7)
    result = _varlen(case, inplace=False)
    assert type(result) is torch.Tensor and result.stride() == (1, case.x.shape[0])


def test_in_place_refused_by_a_fresh_backend_writes_nothing(deltakern_backend, eager_only):
    if _keeps_in_place(deltakern_backend, "causal_conv1d_varlen"):
        pytest.skip(f"{deltakern_backend} keeps the in-place contract")
    v = varlen_case(seed=8)
    before = [host(a) for a in v.args() if a is not None]
    with pytest.raises(deltakern.UnsupportedError, match=rf"causal_conv1d_varlen_: backend '{deltakern_backend}' "
                                                         r"serves causal_conv1d_varlen with a fresh output"):
        _varlen(v, inplace=True)
    assert all(same_bits(a, b) for a, b in zip([a for a in v.args() if a is not None], before))
    u = update_case(seed=9)
    before = [host(a) for a in u.args() if a is not None]
    with pytest.raises(deltakern.UnsupportedError, match="causal_conv1d_update_: "):
        _update(u, inplace=True)
    assert all(same_bits(a, b) for a, b in zip([a for a in u.args() if a is not None], before))


def test_malformed_call_gets_the_torch_library_error(deltakern_backend):
    case = update_case(seed=10)
    case.x = case.x[:, :, None]  # rank 4: no signature, so torch.library reports it
    with pytest.raises(deltakern.InvalidArgumentError) as eager:
        _update(case)
    with pytest.raises(deltakern.InvalidArgumentError) as reference:
        _update_torch_library(case, None)
    assert str(eager.value) == str(reference.value)


def _view(obj):
    data, shape, strides, dtype, device, via_exchange = _core._import_view(obj)
    return (data, shape, strides, dtype, device), via_exchange


@pytest.mark.parametrize("make", [
    lambda: torch.randn(6, 5),
    lambda: torch.randn(6, 5).t(),
    lambda: torch.randn(4, 7, 3).transpose(1, 2)[:, 1:, 2:],
    lambda: torch.randn(2, 1, 5),
    lambda: torch.randn(8, 3)[::2],
    lambda: torch.randn(3, 4, requires_grad=True),
    lambda: torch.randn(5).to(torch.bfloat16),
    lambda: torch.zeros(4, dtype=torch.int32),
], ids=["compact", "transposed", "channel_last_slice", "unit_dim", "step", "requires_grad", "bf16", "int32"])
def test_exchange_import_sees_what_dlpack_shows(make):
    t = make()
    seen, via_exchange = _view(t)
    assert via_exchange
    shown, via_capsule = _view(t.detach().__dlpack__())
    assert not via_capsule
    assert seen == shown
    assert seen[0] == t.data_ptr() and seen[1] == tuple(t.shape) and seen[2] == t.stride()


def test_numpy_takes_the_nanobind_path_and_still_works(deltakern_backend):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    seen, via_exchange = _view(a)
    assert not via_exchange
    assert seen[0] == a.ctypes.data and seen[1] == a.shape and seen[2] == tuple(s // 4 for s in a.strides)
    case = update_case(lib="numpy", seed=11)
    out = np.empty_like(case.x)
    deltakern.causal_conv1d_update_out(*case.args(), out=out, activation=case.activation)
    assert np.isfinite(out).all()


def _exchange_table_with_version(major: int, minor: int):
    """A copy of torch's exchange table in a capsule, its header's version replaced."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    table = get(torch.Tensor.__dlpack_c_exchange_api__, b"dlpack_exchange_api")
    words = (ctypes.c_uint64 * 7).from_address(table)  # header (version, prev_api) + 5 functions
    copy = (ctypes.c_uint64 * 7)(*words)
    version = (ctypes.c_uint32 * 2).from_buffer(copy)
    version[0], version[1] = major, minor
    return new(ctypes.addressof(copy), b"dlpack_exchange_api", None), copy


@pytest.mark.parametrize("attribute", ["absent", "not_a_capsule", "major_2", "minor_2"])
def test_without_a_fitting_exchange_table_the_import_falls_back(attribute):
    keep = None
    if attribute == "absent":
        value = None
    elif attribute == "not_a_capsule":
        value = 12345
    else:
        value, keep = _exchange_table_with_version(*((2, 3) if attribute == "major_2" else (1, 2)))

    class Tensor(torch.Tensor):  # a fresh type: the extension looks tables up once per type
        __dlpack_c_exchange_api__ = value

    t = torch.randn(4, 6).t().as_subclass(Tensor)
    seen, via_exchange = _view(t)
    assert not via_exchange
    assert seen == _view(torch.Tensor(t))[0]
    del keep


def test_a_fitting_copy_of_the_table_is_used():
    """The counterpart of the test above: the same subclass with an unchanged copy is imported
    through it, so the fallbacks there are the version check's doing."""
    value, keep = _exchange_table_with_version(1, 3)

    class Tensor(torch.Tensor):
        __dlpack_c_exchange_api__ = value

    assert _view(torch.randn(3).as_subclass(Tensor))[1]
    del keep


def test_compiled_call_takes_torch_library(deltakern_backend, monkeypatch):
    """Under torch.compile the ops stay the torch.library ones (the fast path is never traced)."""
    calls = []
    real = torch_ops.causal_conv1d_update

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(torch_ops, "causal_conv1d_update", spy)
    case = update_case(seed=12)
    twin = _twin(case)

    @torch.compile(fullgraph=True, backend="eager")
    def step(x, state, weight, bias, indices):
        return deltakern.causal_conv1d_update(x, state, weight, bias, indices, activation="silu")

    compiled = step(*case.args()[:5])
    assert calls
    eager = _update(twin)
    assert same_bits(compiled, eager) and same_bits(case.conv_state, twin.conv_state)
