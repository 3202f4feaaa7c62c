"""The sequence mixers of `attnmem.blocks` beside causal softmax attention: forward + backward, timed side by side.

d_model 64, heads 4, batch 32, T 64 and 256, CPU (`--threads`, default 1), float32; each candidate runs
forward + backward of sum(y²) once per round, the rounds interleaved, and the median of `--rounds` is printed
with its ratio to causal softmax attention (`attnmem.attention.MultiHead` with a causal `attn_mask`, the SDPA path).
Sliding window: window 64 (at T 64 the full causal attention, through the banded mask); the delta rule: chunkwise
WY form, chunk 64.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from torch import Tensor, nn

from attnmem.attention import MultiHead
from attnmem.blocks.delta_rule import DeltaRule
from attnmem.blocks.linear_attention import LinearAttention
from attnmem.blocks.sliding_window import SlidingWindow


class CausalSoftmax(nn.Module):
    """Causal multi-head softmax attention, the baseline: `MultiHead` over x with a lower-triangular mask."""

    def __init__(self, d_model: int, *, heads: int) -> None:
        super().__init__()
        self.attn = MultiHead(d_model, heads)

    def forward(self, x: Tensor) -> Tensor:
        """(B, T, D) → (B, T, D)."""
        t = x.shape[1]
        causal = torch.ones(1, t, t, dtype=torch.bool).tril()  # (1, T, T): MultiHead unsqueezes a head axis at 1
        return self.attn(x, x, x, attn_mask=causal, need_weights=False)[0]


def step(layer: nn.Module, x: Tensor) -> Callable[[], None]:
    """One forward + backward of `layer` on `x`."""
    def run() -> None:
        layer.zero_grad(set_to_none=True)
        (layer(x) ** 2).sum().backward()
    return run


def main() -> None:
    """Print the medians and the ratios to softmax attention."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    d, heads, batch = 64, 4, 32
    layers = {
        "softmax attention (causal)": CausalSoftmax(d, heads=heads),
        "SlidingWindow(window=64)": SlidingWindow(d, window=64, heads=heads),
        "LinearAttention(elu, normalize)": LinearAttention(d, heads=heads),
        "DeltaRule(chunk_size=64)": DeltaRule(d, heads=heads, chunk_size=64),
    }
    print(f"forward + backward, d_model={d} heads={heads} batch={batch}, CPU threads={args.threads}, "
          f"median of {args.rounds} interleaved rounds")
    for length in (64, 256):
        x = torch.randn(batch, length, d)
        runs = {name: step(layer, x) for name, layer in layers.items()}
        times: dict[str, list[float]] = {name: [] for name in runs}
        for run in runs.values():
            run()  # warm-up
        for _ in range(args.rounds):  # interleaved, so machine noise hits every candidate alike
            for name, run in runs.items():
                start = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - start)
        base = statistics.median(times["softmax attention (causal)"])
        print(f"T={length}")
        for name, seconds in times.items():
            median = statistics.median(seconds)
            print(f"  {name:34s} {1e3 * median:8.2f} ms   ratio {median / base:5.2f}")


if __name__ == "__main__":
    main()
