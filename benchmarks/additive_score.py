"""The `Additive` score, forward + backward, beside the `Dot` score and the unavoidable tanh, timed and measured.

B=32, Tq=64, Tk=256, hidden 128, 1 thread. Rows:
  (a) `Dot` on the same projections as `Additive` (W q, U k): the cheap score's cost;
  (b) one `tanh` forward + backward over a (B, Tq, Tk, hidden) tensor: the work any additive score does;
  `Additive` (chunked over keys, tanh recomputed in backward) and the naive broadcast vᵀ tanh(Wq + Uk).
Targets: Additive time <= 2x (b); Additive peak extra memory <= 4x (a).

Peak extra memory: every CPU allocation and free made by PyTorch's allocator during one forward +
backward is recorded by `torch.profiler` (`profile_memory=True`, read from its event tree in time
order); the peak of their running sum is the most memory the step held above what existed before it.
Inputs and the upstream gradient exist before the step, so they are not counted; the gradients it
leaves behind (of inputs and weights) are.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
import torch._C._profiler as profiler_c
from torch import Tensor
from torch.profiler import ProfilerActivity, profile

from attnmem.attention import Additive, Dot

B, TQ, TK, HIDDEN = 32, 64, 256, 128


def peak_bytes(step: Callable[[], None]) -> int:
    """Peak of the running sum of allocator events during `step` (bytes above the start)."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events = []

    def walk(node) -> None:
        if node.tag == profiler_c._EventType.Allocation:
            events.append((node.start_time_ns, node.extra_fields.alloc_size))
        for child in node.children:
            walk(child)

    for root in prof.profiler.kineto_results.experimental_event_tree():
        walk(root)
    running = peak = 0
    for _, size in sorted(events):
        running += size
        peak = max(peak, running)
    return peak


def best_time(step: Callable[[], None], repeats: int) -> float:
    """Best wall time of `repeats` calls of `step`."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return min(times)


def steps() -> dict[str, Callable[[], None]]:
    """One forward + backward of each candidate, with its inputs made beforehand."""
    torch.manual_seed(0)
    query = torch.randn(B, TQ, HIDDEN, requires_grad=True)
    keys = torch.randn(B, TK, HIDDEN, requires_grad=True)
    additive = Additive(HIDDEN, HIDDEN, hidden_dim=HIDDEN)
    query_proj, key_proj, dot = additive.query_proj, additive.key_proj, Dot(HIDDEN, HIDDEN)
    pre = torch.randn(B, TQ, TK, HIDDEN, requires_grad=True)
    upstream, upstream_pre = torch.randn(B, TQ, TK), torch.randn(B, TQ, TK, HIDDEN)

    def backward(out: Tensor, grad: Tensor, leaves: list[Tensor]) -> None:
        out.backward(grad)
        for leaf in leaves:
            leaf.grad = None

    leaves = [query, keys, *additive.parameters()]
    return {
        "(a) Dot(W q, U k)": lambda: backward(dot(query_proj(query), key_proj(keys)), upstream, leaves),
        "(b) tanh over (B, Tq, Tk, H)": lambda: backward(torch.tanh(pre), upstream_pre, [pre]),
        "Additive (chunked)": lambda: backward(additive(query, keys), upstream, leaves),
        "naive broadcast": lambda: backward(naive(additive, query, keys), upstream, leaves),
    }


def naive(score: Additive, query: Tensor, keys: Tensor) -> Tensor:
    """vᵀ tanh(Wq + Uk) with the whole (B, Tq, Tk, H) tensor in memory."""
    q, k = score.query_proj(query).unsqueeze(2), score.key_proj(keys).unsqueeze(1)
    return score.v(torch.tanh(q + k)).squeeze(-1)  # (B, Tq, Tk)


def main() -> None:
    """Print times and peak extra memory side by side."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    candidates = steps()
    for step in candidates.values():
        step()  # warm-up
    best = {name: float("inf") for name in candidates}
    for _ in range(args.rounds):  # interleaved, so machine noise hits every candidate alike
        for name, step in candidates.items():
            best[name] = min(best[name], best_time(step, 1))
    memory = {name: peak_bytes(step) for name, step in candidates.items()}
    tanh, dot = best["(b) tanh over (B, Tq, Tk, H)"], memory["(a) Dot(W q, U k)"]
    print(f"B={B} Tq={TQ} Tk={TK} hidden={HIDDEN}, forward + backward, 1 thread, best of {args.rounds}")
    print(f"  {'':30s} {'ms':>9s} {'x tanh':>7s} {'peak MB':>9s} {'x Dot':>7s}")
    for name in candidates:
        ms, mb = 1e3 * best[name], memory[name] / 2**20
        print(f"  {name:30s} {ms:9.1f} {best[name] / tanh:7.2f} {mb:9.1f} {memory[name] / dot:7.2f}")


if __name__ == "__main__":
    main()
