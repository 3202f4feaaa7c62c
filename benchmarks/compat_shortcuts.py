"""What each speed shortcut of `core/compat.py` saves of a training step: with it and its public path side by side.

A shortcut reaches a private name through `compat.upstream`; without it (`compat.upstream` finding nothing for its
names, as on a version that lacks them) the code takes the public fallback. Each case times the training steps of a
model (forward, loss, backward, optimizer) both ways, in paired rounds (the order alternating), in CPU seconds of
this process; the printed ratio is the median of the rounds' time without / time with (1.05 = the shortcut saves 5%).
The rule (issue 51): a shortcut that saves under 5% of a step goes for its public path.

    python benchmarks/compat_shortcuts.py [--rounds 9] [--steps 40]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
import torch.nn.functional as F

from attnmem.attention import Cosine
from attnmem.core import compat
from attnmem.data.algorithmic import Copy, make_batch
from attnmem.models.dnc import DNC
from attnmem.models.ntm import NTM

sys.path.insert(0, str(Path(__file__).parent))
import memn2n_floor  # noqa: E402  (the MemN2N step of benchmarks/memn2n_floor.py)

# shortcut: the private names (module, name) its fallback goes without
SHORTCUTS = {
    "apply_unbound": [("torch._C", "_are_functorch_transforms_active"), ("torch._functorch.utils",
                                                                          "unwrap_dead_wrappers")],
    "maybe_batched": [("torch._C._functorch", "is_batchedtensor")],
}


@contextlib.contextmanager
def public_path(names: list[tuple[str, str]]) -> Iterator[None]:
    """`compat.upstream` finds none of `names` inside the block."""
    real = compat.upstream
    compat.upstream = lambda module, name: None if (module, name) in names else real(module, name)  # type: ignore
    try:
        yield
    finally:
        compat.upstream = real  # type: ignore[assignment]


def sequence_steps(model: torch.nn.Module, batch_size: int, count: int) -> Callable[[], None]:
    """`count` Adam steps of `model` on copy batches (length 10) with BCE on the output phase."""
    g = torch.Generator().manual_seed(0)
    batches = [make_batch(Copy(min_length=10, max_length=10), batch_size, g, size=10) for _ in range(count)]
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def go() -> None:
        for batch in batches:
            out = model(batch["inputs"])
            out = out[0] if isinstance(out, tuple) else out
            loss = F.binary_cross_entropy_with_logits(out[batch["mask"]], batch["targets"][batch["mask"]])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    return go


def cases(steps: int) -> dict[str, tuple[Callable[[], None], list[tuple[str, str]]]]:
    """Each case: its steps and the names its shortcut would go without."""
    task = Copy()
    memn2n = memn2n_floor.steps(10, steps)[0]
    ntm = sequence_steps(NTM(input_size=task.input_size, output_size=task.output_size,
                             score=functools.partial(Cosine)), 1, steps)
    dnc = sequence_steps(DNC(input_size=task.input_size, output_size=task.output_size), 1, steps)
    return {
        "MemN2N task 1, batch 32: apply_unbound (embedding lookups)": (memn2n, SHORTCUTS["apply_unbound"]),
        "MemN2N task 1, batch 32: maybe_batched (packed sentences)": (memn2n, SHORTCUTS["maybe_batched"]),
        "DNC copy, batch 1: apply_unbound (memory per time step)": (dnc, SHORTCUTS["apply_unbound"]),
        "NTM copy (fused), batch 1: apply_unbound": (ntm, SHORTCUTS["apply_unbound"]),
    }


def seconds(go: Callable[[], None]) -> float:
    """CPU seconds of one call of `go`."""
    start = time.process_time()
    go()
    return time.process_time() - start


def main() -> None:
    """Print, per case, the median of the paired rounds' ratio (time on the public path / time with the shortcut)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--case", nargs="*", default=None, help="the cases whose name contains one of these")
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"{args.rounds} paired rounds of {args.steps} steps, 1 thread, CPU time; "
          f"load {open('/proc/loadavg').read().split()[:3]}")
    print("| case | with ms/step | public ms/step | public / with (range) |\n|---|---|---|---|")
    for name, (go, names) in cases(args.steps).items():
        if args.case and not any(part in name for part in args.case):
            continue
        go()  # warm-up
        pairs = []
        for r in range(args.rounds):
            order = (False, True) if r % 2 else (True, False)
            timed = {}
            for public in order:
                with public_path(names) if public else contextlib.nullcontext():
                    timed[public] = seconds(go)
            pairs.append((timed[False], timed[True]))
        ratios = sorted(p / w for w, p in pairs)
        with_ms = 1e3 * statistics.median(w for w, _ in pairs) / args.steps
        public_ms = 1e3 * statistics.median(p for _, p in pairs) / args.steps
        print(f"| {name} | {with_ms:.3f} | {public_ms:.3f} | **{statistics.median(ratios):.3f}** "
              f"({ratios[0]:.3f}–{ratios[-1]:.3f}) |", flush=True)
    print(f"load after {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
