"""DNC training throughput on copy, side by side with the `dnc` package on PyPI, and our DNC/NTM cost ratio.

Ours is the DNC's fused loop (`models/dnc_loop.py`, a hand-derived backward through time); "ours, stepwise" the
same model with `fused = None`: `DNCCore`'s steps under autograd, the code before issue 53.

The peer is ixaxaar's PyTorch DNC (`pip install dnc`), installed into this benchmark's own folder, never
into the project's environment:

    pip install --no-deps --target ~/.cache/attnmem/bench/dnc dnc

Same sizes for both (LSTM controller of 100, 128 × 20 memory, 1 read head), copy of length 10 (21 steps),
8-bit vectors; one training step = forward, BCE on the output phase, backward, Adam step; 1 thread by
default. Rounds alternate ours / ours, stepwise / theirs / our NTM, and the median of each is printed. Time is this
process's CPU time (with 1 thread, its wall time on a quiet machine), so other load on the machine
counts less.
Where the two formulations differ: the peer runs `nn.LSTM` one step at a time and ends with an output
layer back to the input width (9, ours: 8); it carries the memory in a dict of tensors per layer.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from attnmem.attention import Cosine
from attnmem.data.algorithmic import Copy, make_batch
from attnmem.models.dnc import DNC
from attnmem.models.ntm import NTM

PEER = Path.home() / ".cache" / "attnmem" / "bench" / "dnc"


def peer_dnc(path: Path) -> Callable[[torch.Tensor], torch.Tensor]:
    """The `dnc` package's DNC at our sizes, as a function of `inputs (B, T, 9)` -> logits (B, T, 8)."""
    sys.path.insert(0, str(path))
    try:
        from dnc import DNC as PeerDNC  # noqa: PLC0415 (the peer lives outside the project's environment)
    except ImportError as error:
        message = f"no `dnc` package under {path}: pip install --no-deps --target {path} dnc ({error})"
        raise SystemExit(message) from None
    model = PeerDNC(input_size=9, hidden_size=100, rnn_type="lstm", num_layers=1, num_hidden_layers=1,
                    nr_cells=128, cell_size=20, read_heads=1, batch_first=True, gpu_id=-1)

    def forward(inputs: torch.Tensor) -> torch.Tensor:
        out, _ = model(inputs, (None, None, None), reset_experience=True, pass_through_memory=True)
        return out[..., :8]

    forward.parameters = model.parameters  # type: ignore[attr-defined]
    return forward


def ours(model: nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
    """One of our sequence models as a function of `inputs`."""

    def forward(inputs: torch.Tensor) -> torch.Tensor:
        out = model(inputs)
        return out[0] if isinstance(out, tuple) else out  # the NTM also returns its state

    forward.parameters = model.parameters  # type: ignore[attr-defined]
    return forward


def throughput(forward: Callable[[torch.Tensor], torch.Tensor], batch: dict[str, torch.Tensor], steps: int) -> float:
    """Training sequences per CPU second over `steps` steps on one batch (after one warm-up step)."""
    optimizer = torch.optim.Adam(forward.parameters(), lr=1e-4)  # type: ignore[attr-defined]
    mask = batch["mask"]

    def step() -> None:
        loss = F.binary_cross_entropy_with_logits(forward(batch["inputs"])[mask], batch["targets"][mask])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    step()
    start = time.process_time()
    for _ in range(steps):
        step()
    return steps * len(batch["inputs"]) / (time.process_time() - start)


def main() -> None:
    """Print sequences/s of ours, the peer's and our NTM at each batch size, and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", type=Path, default=PEER, help="folder the `dnc` package is installed in")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    stepwise = DNC(input_size=9, output_size=8, score=functools.partial(Cosine))
    stepwise.fused = None
    models = {"ours": ours(DNC(input_size=9, output_size=8, score=functools.partial(Cosine))),
              "ours, stepwise": ours(stepwise),
              "dnc (PyPI)": peer_dnc(args.peer),
              "our NTM": ours(NTM(input_size=9, output_size=8, score=functools.partial(Cosine)))}
    print(f"copy length 10 (21 steps), threads {args.threads}, {args.rounds} rounds × {args.steps} steps; "
          "training sequences/s (median)")
    print(f"{'batch':>5} | {'ours':>8} | {'stepwise':>8} | {'dnc (PyPI)':>10} | {'our NTM':>8} | ours/peer | "
          "stepwise/peer | our DNC/NTM cost")
    for b in args.batches:
        batch = make_batch(Copy(width=8, min_length=10, max_length=10), b, torch.Generator().manual_seed(0))
        rates: dict[str, list[float]] = {name: [] for name in models}
        for _ in range(args.rounds):
            for name, forward in models.items():
                rates[name].append(throughput(forward, batch, args.steps))
        mid = {name: statistics.median(r) for name, r in rates.items()}
        peer = mid["dnc (PyPI)"]
        print(f"{b:>5} | {mid['ours']:>8.1f} | {mid['ours, stepwise']:>8.1f} | {peer:>10.1f} | "
              f"{mid['our NTM']:>8.1f} | "
              f"{mid['ours'] / peer:>8.2f}× | {mid['ours, stepwise'] / peer:>12.2f}× | "
              f"{mid['our NTM'] / mid['ours']:>6.2f}×")


if __name__ == "__main__":
    main()
