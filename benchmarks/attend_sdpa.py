"""`attend` with `ScaledDot` vs `F.scaled_dot_product_attention`, timed side by side.

B=32, heads=8, T=256, d=64, forward only, interleaved repeats; prints the best time of each and
the ratio (target: attend / SDPA <= 1.1 on the fast path). The weights-returning path is shown
for reference: it materialises the (B, H, T, T) weights, which is what plotting needs.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from attnmem.attention import ScaledDot, attend


def best_time(fn, repeats: int) -> float:
    """Best wall time of `repeats` calls of `fn`."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    """Print the side-by-side timings."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    q, k, v = (torch.randn(32, 8, 256, 64) for _ in range(3))
    score = ScaledDot(64, 64)
    candidates = {
        "F.scaled_dot_product_attention": lambda: F.scaled_dot_product_attention(q, k, v),
        "attend(ScaledDot, need_weights=False)": lambda: attend(q, k, v, score, need_weights=False),
        "attend(ScaledDot, need_weights=True)": lambda: attend(q, k, v, score),
    }
    with torch.inference_mode():
        for fn in candidates.values():
            fn()  # warm-up
        best = {name: float("inf") for name in candidates}
        for _ in range(args.rounds):  # interleaved, so machine noise hits every candidate alike
            for name, fn in candidates.items():
                best[name] = min(best[name], best_time(fn, 2))
    base = best["F.scaled_dot_product_attention"]
    print(f"B=32 heads=8 T=256 d=64, threads={args.threads}, best of {2 * args.rounds} (interleaved)")
    for name, seconds in best.items():
        print(f"  {name:42s} {1e3 * seconds:8.2f} ms   ratio {seconds / base:5.2f}")


if __name__ == "__main__":
    main()
