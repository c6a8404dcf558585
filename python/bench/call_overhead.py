"""Host cost of one eager call through the binding, on the CPU: causal_conv1d_update at batch 1
(D 64, one token; the kernel itself is a few hundred nanoseconds), as numpy arrays through the
extension, as torch tensors through torch.library (torch.ops.deltakern.*_out) and through
deltakern.causal_conv1d_update, and a baseline of the extension's cost per tensor argument.

    python python/bench/call_overhead.py     # after pip install ./python (and torch)
    python python/bench/call_overhead.py --device cuda   # the GPU machine (gpu-check.sh python)

With --device cuda: torch CUDA tensors (bf16, D 2048, batch 1, one token) on every CUDA backend,
beside torch's own one-kernel eager op on the same host (torch.add with out=) as the yardstick,
and the per-call time at CUDA-graph replay (100 calls captured, where no host code of ours runs).
"""

from __future__ import annotations

import argparse
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


def per_call_cuda_us(fn, number: int = 5000) -> float:
    import torch

    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        start = timeit.default_timer()
        for _ in range(number):
            fn()
        torch.cuda.synchronize()
        best = min(best, timeit.default_timer() - start)
    return best / number * 1e6


def replay_per_call_us(fn, calls: int = 100) -> float:
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return per_call_cuda_us(graph.replay, 50) / calls


def main_cuda() -> None:
    import torch

    from deltakern import torch_ops  # noqa: F401  (registers the ops)
    from deltakern.testing import cuda_backends

    D, W, S = 2048, 4, 3
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(1, D, device="cuda", generator=gen).bfloat16()
    state = torch.randn(8, D, S, device="cuda", generator=gen).bfloat16()
    weight = torch.randn(D, W, device="cuda", generator=gen).bfloat16()
    bias = torch.randn(D, device="cuda", generator=gen).bfloat16()
    indices = torch.tensor([5], dtype=torch.int32, device="cuda")
    out = torch.empty_like(x)
    a, b, c = torch.randn(1, D, device="cuda"), torch.randn(1, D, device="cuda"), torch.empty(1, D, device="cuda")
    print(f"GPU {torch.cuda.get_device_name()}, torch {torch.__version__}; causal_conv1d_update bf16, "
          f"batch 1, D {D}, W {W}, one token, bias, silu, cache indices; microseconds per call")
    print(f"  torch.add(a, b, out=c), the host's one-kernel eager yardstick: "
          f"{per_call_cuda_us(lambda: torch.add(a, b, out=c)):.2f}")
    op = torch.ops.deltakern.causal_conv1d_update_out
    for backend in cuda_backends():
        with deltakern.use_backend(backend):
            rt = _runtime.current_runtime()
            rows = [
                ("extension, update_out (the binding alone)",
                 lambda: rt.update_out(x, state, weight, bias, indices, None, out, "silu", -1, None,
                                       torch.cuda.current_stream().cuda_stream)),
                ("torch.ops.deltakern.causal_conv1d_update_out",
                 lambda: op(x, state, weight, bias, indices, None, out, "silu")),
                ("deltakern.causal_conv1d_update_out(out=)",
                 lambda: deltakern.causal_conv1d_update_out(x, state, weight, bias, indices, out=out,
                                                            activation="silu")),
                ("deltakern.causal_conv1d_update (the result)",
                 lambda: deltakern.causal_conv1d_update(x, state, weight, bias, indices, activation="silu")),
            ]
            for name, fn in rows:
                print(f"  {backend:9s} {name:48s} eager {per_call_cuda_us(fn):6.2f}   "
                      f"graph replay {replay_per_call_us(fn):5.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    if parser.parse_args().device == "cuda":
        main_cuda()
    else:
        main()
