"""list_backends(), explain(), fallback_counts() and host_syncs() return plain Python data, and
`python -m deltakern` is the packaged command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import deltakern
import deltakern.testing
from cases import varlen_case


def test_list_backends_is_plain_data_and_finds_the_packaged_portable():
    backends = deltakern.list_backends()
    json.dumps(backends)  # plain data all the way down
    portable = next(p for p in backends if p["name"] == "portable")
    assert portable["state"] == "loaded"
    # Found inside the installed package, relative to libdeltakern, with no configuration.
    package = Path(deltakern.__file__).resolve().parent
    assert Path(portable["path"]).resolve().is_relative_to(package / "lib" / "deltakern" / "plugins")
    contracts = {op["name"]: op["contract"] for op in portable["ops"]}
    assert contracts["causal_conv1d_varlen"] == "fresh"
    assert contracts["causal_conv1d_varlen_out"] == "out"


def test_the_standin_declares_the_in_place_contract():
    if "standin" not in deltakern.testing.cpu_backends():
        import pytest

        pytest.skip("standin is not loaded")
    standin = next(p for p in deltakern.list_backends() if p["name"] == "standin")
    assert {op["name"]: op["contract"] for op in standin["ops"]}["causal_conv1d_update"] == "in_place"


def test_explain_is_plain_data_and_names_the_serving_backend(deltakern_backend):
    decision = deltakern.explain("causal_conv1d_varlen", dtype="bfloat16", width=4, layout="channel_last",
                                 dims={"state_len": 3})
    json.dumps(decision)
    assert decision["backend"] == deltakern_backend
    assert decision["contract"] == ("in_place" if deltakern_backend == "standin" else "fresh")
    assert deltakern_backend in decision["description"]


def test_explain_a_call_no_backend_serves():
    decision = deltakern.explain("causal_conv1d_varlen", dtype="float32", width=9)
    assert decision["backend"] is None and decision["contract"] is None
    assert any("width" in reason for _, reason in decision["passed_over"])


def test_fallback_counts_and_host_syncs_are_plain_data():
    deltakern.reset_fallback_counts()
    case = varlen_case(lib="numpy")
    deltakern.causal_conv1d_varlen(*case.args(), max_seq_len=case.max_seq_len)
    counts = deltakern.fallback_counts()
    assert isinstance(counts, list)
    json.dumps(counts)
    assert isinstance(deltakern.host_syncs(), int)


def test_python_m_deltakern_runs_the_packaged_command_line():
    env = {**os.environ, "DELTAKERN_PROBE_CACHE": ""}
    listed = subprocess.run([sys.executable, "-m", "deltakern", "list"], capture_output=True, text=True, env=env,
                            timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert "portable" in listed.stdout
    explained = subprocess.run([sys.executable, "-m", "deltakern", "explain", "causal_conv1d_varlen", "--dtype",
                                "bf16", "--width", "4"], capture_output=True, text=True, env=env, timeout=120)
    assert explained.returncode == 0, explained.stderr
    assert "portable" in explained.stdout
    bad = subprocess.run([sys.executable, "-m", "deltakern", "no-such-command"], capture_output=True, text=True,
                         env=env, timeout=120)
    assert bad.returncode != 0
