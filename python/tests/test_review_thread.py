"""The review thread's test file (../shared/background/review-thread.txt), re-created on
deltakern, on both contracts, as the thread's fixed version of it:

* the host-metadata path (max_seq_len given) performs no device-to-host read at all;
* the derived path (max_seq_len omitted) works, and reads exactly once on a backend that needs
  the maximum (portable) and never on one that does not (the in-place stand-in, as native): each
  pinned to the backend whose behaviour it describes, so it proves the claim on any install;
* both produce bit-identical outputs and state updates when each call starts from the same
  inputs, x restored too (the in-place backend convolves x; not restoring it was the thread's bug).

The CUDA-graph half of the file is test_cuda_graphs.py (skipped without a GPU)."""

from __future__ import annotations

import numpy as np
import pytest

import deltakern
import deltakern.testing
from cases import clone, host, restore, same_bits, torch, varlen_case

LIBS = ["numpy"] + (["torch"] if torch is not None else [])


def call(case, max_seq_len):
    result = deltakern.causal_conv1d_varlen(*case.args(), activation=case.activation, max_seq_len=max_seq_len)
    # Copied out at once: on the in-place backend the result is x, which the next call reuses.
    return host(result)


@pytest.mark.parametrize("lib", LIBS)
def test_host_metadata_path_reads_nothing_from_the_device(deltakern_backend, lib):
    case = varlen_case(lib=lib)
    before = deltakern.host_syncs()
    call(case, case.max_seq_len)
    assert deltakern.host_syncs() - before == 0


def declares_derivation(backend: str, device: str = "cpu") -> bool:
    for plugin in deltakern.list_backends():
        if plugin["name"] == backend:
            for op in plugin["ops"]:
                if op["name"] == "causal_conv1d_varlen_out":
                    return any(d["derives_max_seq_len"] for d in op["devices"] if d["device"] == device)
    raise AssertionError(f"{backend} serves no causal_conv1d_varlen_out")


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize(("backend", "expected_reads"), [("portable", 1), ("standin", 0)])
def test_derived_path_reads_once_where_the_backend_needs_it(lib, backend, expected_reads):
    if backend not in deltakern.testing.cpu_backends():
        pytest.skip(f"{backend} is not loaded (see conftest.py)")
    with deltakern.use_backend(backend):
        # The declaration says the same as the behaviour below: the read is portable's alone.
        assert declares_derivation(backend) == (expected_reads == 1)
        case = varlen_case(lib=lib)
        before = deltakern.host_syncs()
        result = deltakern.causal_conv1d_varlen(*case.args(), activation=case.activation)
        assert deltakern.host_syncs() - before == expected_reads
        assert np.isfinite(host(result)).all()


@pytest.mark.parametrize("lib", LIBS)
def test_host_metadata_matches_the_derived_result_bit_for_bit(deltakern_backend, lib):
    case = varlen_case(lib=lib)
    baseline_states = clone(case.conv_states)
    baseline_x = clone(case.x)

    with_host = call(case, case.max_seq_len)
    states_host = host(case.conv_states)

    restore(case.conv_states, baseline_states)
    restore(case.x, baseline_x)
    derived = call(case, None)

    assert np.array_equal(with_host, derived, equal_nan=True)
    assert same_bits(states_host, case.conv_states)
    # The state update happened (the comparison above is not of two untouched pools).
    assert not same_bits(states_host, baseline_states)


def test_not_restoring_x_is_what_broke_the_thread():
    """The thread's first version restored only the states: on the in-place backend the second
    call then convolves an already convolved x, and the results differ. Kept as a test so the
    scenario above visibly depends on the restore."""
    if "standin" not in deltakern.testing.cpu_backends():
        pytest.skip("standin is not loaded (see conftest.py)")
    with deltakern.use_backend("standin"):
        case = varlen_case(lib="numpy")
        baseline_states = clone(case.conv_states)
        first = call(case, case.max_seq_len)
        restore(case.conv_states, baseline_states)
        second = call(case, None)
        assert not np.array_equal(first, second, equal_nan=True)

