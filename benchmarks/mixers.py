"""Every mixer of the recall benchmark beside causal softmax attention: forward + backward of one layer, timed side
by side at the protocols' sizes.

    python benchmarks/mixers.py [--threads 1] [--rounds 5] [--sizes 64x32,64x64,128x64]

Each mixer is built as `MixerLM` builds it (`attnmem.models.mixer_backbone.MIXERS`) with its recipe's options
(conf/experiment/mqar_<mixer>.yaml): attention 1 head, sliding window 16, the delta rule's chunks of 32, S6 and its
LTI variant with 16 states a channel, BaseConv's filter of 128, the Hopfield mixer's defaults; the classic cores
(LSTM, NTM, DNC) as their recipes size them. Batch 64 (the protocols'), float32, CPU (`--threads`). Per size
(T x D), each candidate runs forward + backward of sum(y²) once per round, the rounds interleaved, so load on the
machine hits every candidate alike; the median of `--rounds` is printed with its ratio to attention. Time is this
process's CPU time.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from attnmem.models.mixer_backbone import mixer_factory
from attnmem.runtime.process import configure

BATCH = 64
# a mixer's options as its recipe gives them (conf/experiment/mqar_<mixer>.yaml)
OPTIONS: dict[str, dict[str, Any]] = {
    "attention": {"heads": 1},
    "sliding_window": {"window": 16},
    "linear_attention": {},
    "delta_rule": {"chunk_size": 32},
    "selective_ssm": {"d_state": 16},
    "lti_ssm": {"d_state": 16},
    "base_conv": {"l_max": 128},
    "hopfield": {},
    "lstm": {},
    "ntm": {},
    "dnc": {},
}


def step(layer: nn.Module, x: Tensor) -> Callable[[], None]:
    """One forward + backward of `layer` on `x`."""
    def run() -> None:
        layer.zero_grad(set_to_none=True)
        (layer(x) ** 2).sum().backward()
    return run


def timed(runs: dict[str, Callable[[], None]], rounds: int) -> dict[str, float]:
    """The median CPU seconds of each run over `rounds` interleaved rounds (after one warm-up each)."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for run in runs.values():
        run()
    for _ in range(rounds):
        for name, run in runs.items():
            start = time.process_time()
            run()
            times[name].append(time.process_time() - start)
    return {name: statistics.median(seconds) for name, seconds in times.items()}


def main() -> None:
    """Print each mixer's median and its ratio to attention, per size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sizes", default="64x32,64x64,128x64", help="T x D pairs, comma-separated")
    parser.add_argument("--mixers", default=",".join(OPTIONS), help="names of MIXERS, comma-separated")
    args = parser.parse_args()
    configure(args.threads)  # as training does: torch's threads, and freed memory kept in the process
    print(f"forward + backward of one layer, batch {BATCH}, CPU threads={args.threads}, "
          f"median of {args.rounds} interleaved rounds (CPU time), ratio to attention")
    names = ["attention", *(m for m in args.mixers.split(",") if m != "attention")]
    for size in args.sizes.split(","):
        length, width = (int(v) for v in size.split("x"))
        torch.manual_seed(0)
        layers = {m: mixer_factory(m, OPTIONS[m], "scaled_dot", 1024)(width) for m in names}
        x = torch.randn(BATCH, length, width)
        medians = timed({m: step(layer, x) for m, layer in layers.items()}, args.rounds)
        print(f"T={length} D={width}")
        for name, seconds in medians.items():
            print(f"  {name:18s} {1e3 * seconds:9.2f} ms   ratio {seconds / medians['attention']:6.2f}")


if __name__ == "__main__":
    main()
