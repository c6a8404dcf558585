"""Errors reach Python as the exception of their code with the core's message: invalid
argument -> ValueError, unsupported -> NotImplementedError, unavailable -> RuntimeError, each a
deltakern.Error; and a rejected call has written nothing."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest

import deltakern
import deltakern.testing
from cases import host, same_bits, varlen_case


def test_the_classes_form_one_hierarchy():
    assert issubclass(deltakern.InvalidArgumentError, (deltakern.Error, ValueError))
    assert issubclass(deltakern.UnsupportedError, deltakern.Error)
    assert issubclass(deltakern.UnsupportedError, NotImplementedError)
    assert issubclass(deltakern.UnavailableError, deltakern.Error)
    assert issubclass(deltakern.UnavailableError, RuntimeError)
    assert issubclass(deltakern.ConfigError, deltakern.Error)


def _snapshot(case):
    return [host(a) for a in case.args() if a is not None]


def _unchanged(case, before) -> bool:
    return all(same_bits(a, b) for a, b in zip([a for a in case.args() if a is not None], before))


@pytest.mark.parametrize(
    ("breaks", "message"),
    [
        (lambda c: setattr(c, "weight", c.weight[:-1]), r"^causal_conv1d_varlen: weight: "),
        (lambda c: setattr(c, "query_start_loc", c.query_start_loc.astype(np.int64)),
         r"^causal_conv1d_varlen: query_start_loc: "),
        (lambda c: setattr(c, "conv_states", c.conv_states[:, :, :1]), r"^causal_conv1d_varlen: conv_states: "),
        (lambda c: setattr(c, "has_initial_state", c.has_initial_state[:1]), r"^causal_conv1d_varlen: has_initial_state: "),
    ],
)
def test_invalid_arguments_are_value_errors_naming_the_argument(deltakern_backend, breaks, message):
    case = varlen_case(lib="numpy")
    breaks(case)
    before = _snapshot(case)
    with pytest.raises(ValueError, match=message) as raised:
        deltakern.causal_conv1d_varlen(*case.args(), max_seq_len=case.max_seq_len)
    assert isinstance(raised.value, deltakern.InvalidArgumentError)
    assert _unchanged(case, before)


def test_a_non_tensor_argument_is_named(deltakern_backend):
    case = varlen_case(lib="numpy")
    with pytest.raises(deltakern.InvalidArgumentError,
                       match=r"^causal_conv1d_varlen: conv_states: expected a tensor or array that supports DLPack"):
        deltakern.causal_conv1d_varlen(case.x, case.weight, case.bias, [[1.0]], case.query_start_loc)


def test_an_unknown_activation_is_a_value_error(deltakern_backend):
    case = varlen_case(lib="numpy")
    before = _snapshot(case)
    with pytest.raises(deltakern.InvalidArgumentError, match="tanh"):
        deltakern.causal_conv1d_varlen(*case.args(), activation="tanh", max_seq_len=case.max_seq_len)
    assert _unchanged(case, before)


def test_a_forced_backend_that_cannot_serve_is_not_implemented():
    case = varlen_case(lib="numpy", width=9, state_len=8)  # portable declares widths 2..8
    before = _snapshot(case)
    with deltakern.use_backend("portable"):
        with pytest.raises(NotImplementedError, match="forced backend 'portable'") as raised:
            deltakern.causal_conv1d_varlen(*case.args(), max_seq_len=case.max_seq_len)
    assert isinstance(raised.value, deltakern.UnsupportedError)
    assert _unchanged(case, before)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class CudaLabelledArray:
    """A DLPack producer that claims its (host) memory is on CUDA device 0: what a CUDA tensor
    looks like to the core on a machine without a GPU. The call must be refused before any
    backend touches the memory."""

    _kept: list = []

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, **kwargs):
        a = self.array
        shape = (ctypes.c_int64 * a.ndim)(*a.shape)
        strides = (ctypes.c_int64 * a.ndim)(*(s // a.itemsize for s in a.strides))
        code = {"f": 2, "i": 0, "u": 1}[a.dtype.kind]
        managed = _DLManagedTensor(_DLTensor(a.ctypes.data, _DLDevice(2, 0), a.ndim,
                                             _DLDataType(code, a.itemsize * 8, 1), shape, strides, 0), None, None)
        self._kept.append((managed, shape, strides, a))  # no deleter: keep the structs alive
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(managed), b"dltensor", None)


# deltakern::ErrorCode's ordinals (deltakern.hpp) and the class each must become.
CODES = [
    (0, deltakern.InvalidArgumentError, ValueError),
    (1, deltakern.UnsupportedError, NotImplementedError),
    (2, deltakern.UnavailableError, RuntimeError),
    (3, deltakern.OutOfMemoryError, MemoryError),
    (4, deltakern.BackendError, RuntimeError),
    (5, deltakern.ConfigError, ValueError),
    (6, deltakern.InternalError, RuntimeError),
]


@pytest.mark.parametrize(("code", "cls", "builtin"), CODES)
def test_every_error_code_maps_to_its_class_with_the_message(code, cls, builtin):
    from deltakern import _core

    with pytest.raises(cls) as raised:
        _core._throw_error(code, f"op: arg: message {code}")
    assert type(raised.value) is cls
    assert isinstance(raised.value, (deltakern.Error, builtin))
    assert str(raised.value) == f"op: arg: message {code}"


def test_a_device_no_backend_can_use_here_is_refused():
    """The core refuses a call on a device no backend can use here at dispatch, with each
    backend's reason, before touching any memory: UnavailableError where some backend declares
    the call but cannot use the device (portable with its CUDA path and no driver; native from
    deltakern-accel beside a core built without CUDA), UnsupportedError where none declares it."""
    if deltakern.testing.cuda_backends():
        pytest.skip("a backend can use CUDA here: the call would run on host memory labelled as CUDA")
    case = varlen_case(lib="numpy", padded=False)
    args = [CudaLabelledArray(a) if isinstance(a, np.ndarray) else a for a in case.args()]
    before = _snapshot(case)
    with pytest.raises(deltakern.Error, match=r"no backend can serve this call \(cuda:0.*portable: "
                                              r"(unavailable on cuda|does not declare device cuda)") as raised:
        deltakern.causal_conv1d_varlen(*args, max_seq_len=case.max_seq_len)
    unavailable = re.search(r"(: |; )[\w-]+: unavailable on cuda", str(raised.value)) is not None
    assert type(raised.value) is (deltakern.UnavailableError if unavailable else deltakern.UnsupportedError)
    assert _unchanged(case, before)


def test_use_backend_refuses_to_contradict_the_environment(monkeypatch):
    monkeypatch.setenv("DELTAKERN_BACKEND", "portable")
    with pytest.raises(deltakern.ConfigError, match="DELTAKERN_BACKEND"):
        with deltakern.use_backend("standin"):
            pass
