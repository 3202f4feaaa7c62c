"""Modern Hopfield retrieval (K = 1024 stored, dim 64, 32 queries, β = 8, one step) against its bare floor
`softmax(β q Xᵀ) X`, side by side: forward while training (no energies), forward with energies (evaluation),
and forward + backward with a learned (bilinear) similarity.

Rounds interleave the cases; the best of each is printed as calls/s with its ratio to the floor.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from attnmem.attention import Bilinear, Dot
from attnmem.models.modern_hopfield import ModernHopfield

K, N, Q, BETA = 1024, 64, 32, 8.0


def cases() -> dict[str, Callable[[], object]]:
    """The timed calls, by label."""
    torch.manual_seed(0)
    patterns, probes, targets = torch.randn(K, N).sign(), torch.randn(Q, N), torch.randint(0, K, (Q,))
    dot = ModernHopfield(size=N, num_patterns=K, score=Dot, beta=BETA)
    learned = ModernHopfield(size=N, num_patterns=K, score=Bilinear, beta=BETA)
    for net in (dot, learned):
        net.store(patterns)
    batch = {"probes": probes, "patterns": patterns}
    return {
        "floor softmax(βqXᵀ)X": lambda: torch.softmax(BETA * probes @ patterns.T, -1) @ patterns,
        "forward, training": lambda: dot.train()(batch),
        "forward, with energies": lambda: dot.retrieve(probes),
        "forward+backward, learned": lambda: F.cross_entropy(learned.train()(batch).scores, targets).backward(),
    }


def calls_per_second(fn: Callable[[], object], calls: int) -> float:
    """Calls/s of `calls` calls of `fn`."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return calls / (time.perf_counter() - start)


def main() -> None:
    """Print calls/s of every case and its ratio to the floor."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    timed = cases()
    best = dict.fromkeys(timed, 0.0)
    for fn in timed.values():
        calls_per_second(fn, 20)  # warm-up
    for _ in range(args.rounds):
        for label, fn in timed.items():
            best[label] = max(best[label], calls_per_second(fn, args.calls))
    floor = best["floor softmax(βqXᵀ)X"]
    for label, rate in best.items():
        print(f"{label:28} {rate:9.0f} calls/s {rate / floor:6.2f}x the floor")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
