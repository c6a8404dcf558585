"""Host cost of one eager call through the binding, on the CPU: causal_conv1d_update at batch 1
(D 64, one token; the kernel itself is a few hundred nanoseconds), as numpy arrays through the
extension, as torch tensors through torch.library (torch.ops.deltakern.*_out) and through
deltakern.causal_conv1d_update, and a baseline of the extension's cost per tensor argument.

    python python/bench/call_overhead.py     # after pip install ./python (and torch)
"""

from __future__ import annotations

import timeit

import numpy as np

import deltakern
from deltakern import _runtime


def per_call_us(fn, number: int = 20000) -> float:
    fn()
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def main() -> None:
    rng = np.random.default_rng(0)
    D, W, S = 64, 4, 3
    x = rng.standard_normal((1, D)).astype(np.float32)
    state = rng.standard_normal((1, D, S)).astype(np.float32)
    weight = rng.standard_normal((D, W)).astype(np.float32)
    out = np.empty_like(x)
    with deltakern.use_backend("portable"):
        rt = _runtime.current_runtime()
        print(f"extension, numpy, update_out (4 tensors):  "
              f"{per_call_us(lambda: rt.update_out(x, state, weight, None, None, None, out, 'none', -1, None, 0)):.2f} us")
        print(f"deltakern.causal_conv1d_update_out, numpy: "
              f"{per_call_us(lambda: deltakern.causal_conv1d_update_out(x, state, weight, out=out)):.2f} us")
        try:
            import torch
        except ImportError:
            return
        from deltakern import torch_ops  # noqa: F401  (registers the ops)

        tx, ts, tw, to = (torch.from_numpy(a) for a in (x, state, weight, out))
        print(f"extension, torch tensors, update_out:      "
              f"{per_call_us(lambda: rt.update_out(tx, ts, tw, None, None, None, to, 'none', -1, None, 0)):.2f} us")
        op = torch.ops.deltakern.causal_conv1d_update_out
        print(f"torch.ops.deltakern.causal_conv1d_update_out: "
              f"{per_call_us(lambda: op(tx, ts, tw, None, None, None, to), 5000):.2f} us")
        print(f"deltakern.causal_conv1d_update (torch, fresh out): "
              f"{per_call_us(lambda: deltakern.causal_conv1d_update(tx, ts, tw), 5000):.2f} us")


if __name__ == "__main__":
    main()
