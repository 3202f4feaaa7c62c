"""Modern Hopfield retrieval (K = 1024 stored, dim 64, 32 queries, β = 8, one step): ours, its bare floor and hflayers.

Every case reads the same ±1 patterns X (K, N) and probes q (Q, N), in three groups, each against its own floor:

- forward: the floor `softmax(β q Xᵀ) X`; ours while training (`ModernHopfield(score=Dot)` in train mode: the
  update, its weights, logits and step counts, no energies); ours with energies (`retrieve`, evaluation);
  with `--hflayers DIR`, `hflayers.Hopfield` with X as static stored patterns and pattern projections, q as
  static state patterns, no projections, normalisations or bias, scaling β, `update_steps_max=0` (one update);
- forward + backward, learned score, a loss on the retrieved states, mse(ξ', X[targets]): the floor
  `softmax(((β q) W) Xᵀ) X` with W (N, N) a parameter; ours with `Bilinear` (score qᵀWx, W its weight);
  hflayers with a learned state-pattern projection of weight Wᵀ and no bias (the rest as above);
- forward + backward, learned score, the patterns task's loss, cross-entropy of the first update's logits
  β (qW) Xᵀ: the floor computes the logits and the retrieved states as ours does (hflayers returns no logits).

Before timing, every case's output (and, learned, the gradient of W) is checked against its floor to 1e-5.
Rounds interleave all cases in one process; the best of each is printed as calls/s with its ratios.
hflayers (github.com/ml-jku/hopfield-layers) is not on PyPI and no project dependency: `--hflayers DIR` puts
the exported repository on sys.path for this script only.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmem.attention import Bilinear, Dot
from attnmem.models.modern_hopfield import ModernHopfield

K, N, Q, BETA = 1024, 64, 32, 8.0
GROUPS = {"forward": "floor forward", "fwd+bwd, loss on states": "floor fwd+bwd", "fwd+bwd, CE on logits": "floor CE"}
LIKE_HFLAYERS = ("ours, training", "ours fwd+bwd")  # the cases that compute what hflayers computes


def check(name: str, got: Tensor, want: Tensor) -> None:
    """Stop unless `got` equals `want` to 1e-5."""
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, msg=lambda m: f"{name}: {m}")


def ours_and_floors(patterns: Tensor, probes: Tensor, targets: Tensor) -> dict[str, dict[str, Callable[[], object]]]:
    """The floors and our cases, by group and label, checked against each other."""
    dot = ModernHopfield(size=N, num_patterns=K, score=Dot, beta=BETA).train()
    learned = ModernHopfield(size=N, num_patterns=K, score=Bilinear, beta=BETA).train()
    for net in (dot, learned):
        net.store(patterns)
    batch, wanted = {"probes": probes, "patterns": patterns}, patterns[targets]  # (Q, N)
    weight = learned.score.score.weight  # W (N, N)
    floor_w = nn.Parameter(weight.detach().clone())

    def floor_states() -> Tensor:
        return torch.softmax(BETA * probes @ floor_w @ patterns.T, -1) @ patterns  # (Q, N)

    def floor_ce() -> None:
        logits = BETA * probes @ floor_w @ patterns.T  # (Q, K)
        torch.softmax(logits, -1) @ patterns  # the retrieved states, as ours computes them
        F.cross_entropy(logits, targets).backward()

    check("ours forward", dot(batch).pred, torch.softmax(BETA * probes @ patterns.T, -1) @ patterns)
    F.mse_loss(learned(batch).pred, wanted).backward()
    F.mse_loss(floor_states(), wanted).backward()
    check("ours learned", learned(batch).pred, floor_states())
    check("ours learned grad W", weight.grad, floor_w.grad)
    return {
        "forward": {
            "floor forward": lambda: torch.softmax(BETA * probes @ patterns.T, -1) @ patterns,
            "ours, training": lambda: dot(batch),
            "ours, with energies": lambda: dot.retrieve(probes),
        },
        "fwd+bwd, loss on states": {
            "floor fwd+bwd": lambda: F.mse_loss(floor_states(), wanted).backward(),
            "ours fwd+bwd": lambda: F.mse_loss(learned(batch).pred, wanted).backward(),
        },
        "fwd+bwd, CE on logits": {
            "floor CE": floor_ce,
            "ours CE": lambda: F.cross_entropy(learned(batch).scores, targets).backward(),
        },
    }


def hflayers_cases(directory: Path, patterns: Tensor, probes: Tensor, targets: Tensor,
                   weight: Tensor) -> dict[str, Callable[[], object]]:
    """`hflayers.Hopfield` configured for the floors' maths, forward and learned fwd+bwd, checked against them."""
    sys.path.insert(0, str(directory))
    from hflayers import Hopfield

    off = {f"normalize_{part}{affine}": False for part in ("stored_pattern", "state_pattern", "pattern_projection")
           for affine in ("", "_affine")}
    common = dict(scaling=BETA, update_steps_max=0, stored_pattern_as_static=True, pattern_projection_as_static=True,
                  disable_out_projection=True, input_bias=False, batch_first=True, **off)
    static = Hopfield(state_pattern_as_static=True, **common).train()
    learned = Hopfield(input_size=N, hidden_size=N, state_pattern_as_static=False, **common).train()
    with torch.no_grad():
        learned.association_core.in_proj_weight.copy_(weight.T)  # linear(q, Wᵀ) = qW
    stored, state, wanted = patterns.unsqueeze(0), probes.unsqueeze(0), patterns[targets]  # (1, K, N), (1, Q, N)
    floor_w = nn.Parameter(weight.detach().clone())
    floor = torch.softmax(BETA * probes @ floor_w @ patterns.T, -1) @ patterns  # (Q, N)
    F.mse_loss(floor, wanted).backward()
    check("hflayers forward", static((stored, state, stored)).squeeze(0),
          torch.softmax(BETA * probes @ patterns.T, -1) @ patterns)
    F.mse_loss(learned((stored, state, stored)).squeeze(0), wanted).backward()
    check("hflayers learned", learned((stored, state, stored)).squeeze(0), floor)
    check("hflayers learned grad W", learned.association_core.in_proj_weight.grad.T, floor_w.grad)
    return {
        "hflayers forward": lambda: static((stored, state, stored)),
        "hflayers fwd+bwd": lambda: F.mse_loss(learned((stored, state, stored)).squeeze(0), wanted).backward(),
    }


def calls_per_second(fn: Callable[[], object], calls: int) -> float:
    """Calls/s of `calls` calls of `fn`."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return calls / (time.perf_counter() - start)


def loadavg() -> str:
    """/proc/loadavg as it reads."""
    return Path("/proc/loadavg").read_text().strip()


def main() -> None:
    """Print calls/s of every case, its ratio to its group's floor and ours over hflayers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--hflayers", type=Path, help="an exported hopfield-layers repository: add hflayers.Hopfield")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"loadavg before: {loadavg()}")
    torch.manual_seed(0)
    patterns, probes, targets = torch.randn(K, N).sign(), torch.randn(Q, N), torch.randint(0, K, (Q,))
    groups = ours_and_floors(patterns, probes, targets)
    if args.hflayers:
        weight = torch.nn.init.xavier_uniform_(torch.empty(N, N))
        hf = hflayers_cases(args.hflayers, patterns, probes, targets, weight)
        groups["forward"]["hflayers forward"] = hf["hflayers forward"]
        groups["fwd+bwd, loss on states"]["hflayers fwd+bwd"] = hf["hflayers fwd+bwd"]
    timed = {label: fn for cases in groups.values() for label, fn in cases.items()}
    best = dict.fromkeys(timed, 0.0)
    for fn in timed.values():
        calls_per_second(fn, 20)  # warm-up
    for _ in range(args.rounds):
        for label, fn in timed.items():
            best[label] = max(best[label], calls_per_second(fn, args.calls))
    print(f"{'case':30} {'calls/s':>8} {'x floor':>8} {'floor time x':>13} {'ours / hflayers':>16}")
    for group, cases in groups.items():
        floor = best[GROUPS[group]]
        hflayers = next((best[label] for label in cases if label.startswith("hflayers")), None)
        for label in cases:
            versus = f"{best[label] / hflayers:16.2f}" if hflayers and label in LIKE_HFLAYERS else ""
            print(f"{label:30} {best[label]:8.0f} {best[label] / floor:8.2f} {floor / best[label]:13.2f}{versus}")
    print(f"loadavg after: {loadavg()}")


if __name__ == "__main__":
    main()
