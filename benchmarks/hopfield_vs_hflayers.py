"""Forward + backward of attnmem's `Hopfield` layers against `hflayers`' (ml-jku/hopfield-layers), side by side.

Each configuration builds the hflayers module and attnmem's with the same arguments, loads hflayers' weights
into ours (`from_hflayers_state_dict`), checks that both give the same output (1e-5), then times forward +
backward (a weighted sum of the output as the loss), one thread: each round alternates the two call by
call (hflayers, ours, hflayers, …), so a burst of load on a shared machine hits both alike; it prints the
median time per call over the rounds and the median of the rounds' ratios hflayers / ours (target ≥ 1.0).
hflayers is no dependency of attnmem: run this outside the project's environment, its source on PYTHONPATH:

    PYTHONPATH=src:<hopfield-layers src> python benchmarks/hopfield_vs_hflayers.py [--rounds 15 --calls 20]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from attnmem.blocks import hopfield as ours_module
from attnmem.blocks.hopfield_convert import from_hflayers_state_dict

# name: class, constructor arguments, input shapes (batch first), padding (B, S) or None
CONFIGS: dict[str, dict[str, Any]] = {
    "pooling (B 32, S 64, D 64)": dict(cls="HopfieldPooling", kwargs=dict(input_size=64, quantity=4),
                                       inputs=[(32, 64, 64)], padding=(32, 64)),
    "self, 4 heads (B 16, T 32, D 64)": dict(cls="Hopfield", kwargs=dict(input_size=64, num_heads=4),
                                             inputs=[(16, 32, 64)], padding=None),
    "self, 4 heads, 3 updates": dict(cls="Hopfield", kwargs=dict(input_size=64, num_heads=4, update_steps_max=3,
                                                                 update_steps_eps=1e-6),
                                     inputs=[(16, 32, 64)], padding=None),
    "projections (stored 48, state 64, proj 32)": dict(cls="Hopfield", kwargs=dict(
        input_size=64, stored_pattern_size=48, pattern_projection_size=32, hidden_size=16, pattern_size=8,
        num_heads=4, output_size=32), inputs=[(16, 40, 48), (16, 24, 64), (16, 40, 32)], padding=(16, 40)),
    "lookup (B 32, L 32, D 64, K 128)": dict(cls="HopfieldLayer", kwargs=dict(
        input_size=64, quantity=128, num_heads=2), inputs=[(32, 32, 64)], padding=None),
}


def build(config: dict[str, Any], hflayers: Any) -> tuple[Callable[[], None], Callable[[], None]]:
    """The two forward + backward calls of one configuration, checked to agree."""
    torch.manual_seed(0)
    theirs = getattr(hflayers, config["cls"])(**config["kwargs"])
    kwargs = dict(config["kwargs"])
    ours = getattr(ours_module, config["cls"])(kwargs.pop("input_size"), **kwargs)
    ours.load_state_dict(from_hflayers_state_dict(theirs.state_dict(), ours))
    inputs = [torch.randn(shape).requires_grad_() for shape in config["inputs"]]
    data = inputs[0] if len(inputs) == 1 else tuple(inputs)
    padding = None
    if config["padding"] is not None:
        padding = torch.zeros(config["padding"], dtype=torch.bool)
        padding[::2, -5:] = True
    weights = torch.randn(theirs(data, stored_pattern_padding_mask=padding).shape)
    torch.testing.assert_close(ours(data, padding), theirs(data, stored_pattern_padding_mask=padding),
                               rtol=1e-5, atol=1e-5)

    def run_theirs() -> None:
        (theirs(data, stored_pattern_padding_mask=padding) * weights).sum().backward()

    def run_ours() -> None:
        (ours(data, padding) * weights).sum().backward()

    return run_theirs, run_ours


def alternated(first: Callable[[], None], second: Callable[[], None], calls: int) -> tuple[float, float]:
    """Seconds per call of each, the two called in turn `calls` times."""
    spent = [0.0, 0.0]
    for _ in range(calls):
        for i, fn in enumerate((first, second)):
            start = time.perf_counter()
            fn()
            spent[i] += time.perf_counter() - start
    return spent[0] / calls, spent[1] / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(1)
    import hflayers  # noqa: PLC0415 - from PYTHONPATH, this script only

    print(f"torch {torch.__version__}, 1 thread, {args.rounds} rounds of {args.calls} alternated calls, median")
    print("| configuration | hflayers ms | ours ms | hflayers / ours (quartiles) |\n|---|---|---|---|")
    for name, config in CONFIGS.items():
        run_theirs, run_ours = build(config, hflayers)
        alternated(run_theirs, run_ours, 3)  # warm-up
        rounds = [alternated(run_theirs, run_ours, args.calls) for _ in range(args.rounds)]
        theirs, ours = statistics.median(t for t, _ in rounds), statistics.median(o for _, o in rounds)
        ratios = sorted(t / o for t, o in rounds)
        spread = f"{ratios[len(ratios) // 4]:.2f}–{ratios[(3 * len(ratios)) // 4]:.2f}"
        print(f"| {name} | {1e3 * theirs:.3f} | {1e3 * ours:.3f} | **{statistics.median(ratios):.2f}** ({spread}) |",
              flush=True)


if __name__ == "__main__":
    main()
