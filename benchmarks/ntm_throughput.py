"""NTM training throughput on copy: sequences/s at batch 1 and 32, beside a naive per-sample NTM and, with
`--peer`, beside pytorch-ntm (loudinthecloud/pytorch-ntm) in paired interleaved rounds.

The naive reference is written here for the comparison, in the style of per-sample NTM code
(e.g. loudinthecloud/pytorch-ntm): one sequence at a time, a Python loop over the heads, the
shift as a sum of `torch.roll`s. Ours runs its fused loop (`models/ntm_sequence.py`) and, for comparison, `NTM.step`
step by step under autograd. Same sizes as conf/model/ntm.yaml (LSTM 100, 128 × 20, 1 read
and 1 write head), copy of length 10 (21 steps), forward + backward + Adam step, 1 thread by
default. Batched (32) throughput was to be >= 10 × the batch-1 figure: 10.6–10.9× with the step-by-step loop, 8.9–9.2×
with the fused one, whose batch 1 gained more (docs/ntm.md).

The peer is not a package: bring its repository with the search tool's `fetch` and export its `ntm/` folder
outside the project (`git --git-dir=<mirror> archive HEAD ntm | tar -x -C ~/.cache/attnmem/bench/pytorch-ntm`).
Its step, as its `train.py` (`train_batch`): the input phase and the delimiter, then the output phase with no
input, each step a call of `EncapsulatedNTM`; a sigmoid output and `BCELoss` (ours: logits and the fused
`BCEWithLogits`). Both train with Adam here (its recipe uses RMSprop and clips each gradient value to ±10;
neither changes the step's cost). Each round times ours and the peer back to back on the same batch in CPU
seconds of this process; the printed ratio is the median of the rounds' ratios.
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
from attnmem.models.ntm import NTM

PEER = Path.home() / ".cache" / "attnmem" / "bench" / "pytorch-ntm"


class NaiveNTM(nn.Module):
    """A per-sample NTM: (N, M) memory, one head at a time, unbatched maths (the reference)."""

    def __init__(self, input_size: int, output_size: int, controller: int = 100, n: int = 128, m: int = 20) -> None:
        super().__init__()
        self.n, self.m, self.controller = n, m, controller
        self.lstm = nn.LSTMCell(input_size + m, controller)
        self.read_head = nn.Linear(controller, m + 6)  # k, β, g, s (3), γ
        self.write_head = nn.Linear(controller, 3 * m + 6)  # + e, a
        self.out = nn.Linear(controller + m, output_size)

    def address(self, params, memory, previous):
        k, beta, g, s, gamma = params[: self.m], params[self.m], params[self.m + 1], params[-4:-1], params[-1]
        w = torch.softmax(F.softplus(beta) * F.cosine_similarity(memory, k.unsqueeze(0), dim=-1, eps=1e-8), 0)
        g = torch.sigmoid(g)
        w = g * w + (1 - g) * previous
        s = torch.softmax(s, 0)
        w = s[0] * torch.roll(w, -1) + s[1] * w + s[2] * torch.roll(w, 1)
        w = (w + 1e-16) ** (1 + F.softplus(gamma))
        return w / w.sum()

    def forward(self, x):  # x (T, I): one sequence
        memory = torch.full((self.n, self.m), 1e-6)
        w_read = F.one_hot(torch.tensor(0), self.n).float()
        w_write = w_read
        read = w_read @ memory
        h = c = torch.zeros(1, self.controller)
        outputs = []
        for t in range(x.shape[0]):
            h, c = self.lstm(torch.cat([x[t], read]).unsqueeze(0), (h, c))
            w_read = self.address(self.read_head(h[0]), memory, w_read)
            params = self.write_head(h[0])
            w_write = self.address(params[: self.m + 6], memory, w_write)
            read = w_read @ memory
            erase, add = torch.sigmoid(params[self.m + 6 : 2 * self.m + 6]), torch.tanh(params[2 * self.m + 6 :])
            memory = memory * (1 - torch.outer(w_write, erase)) + torch.outer(w_write, add)
            outputs.append(self.out(torch.cat([h[0], read])))
        return torch.stack(outputs)


def sequences_per_second(step, batch_size: int, seconds: float) -> float:
    """Training sequences per second of `step()` (one batch of `batch_size`), run for about `seconds`."""
    step()  # warm-up
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step()
        done += batch_size
    return done / (time.perf_counter() - start)


def our_step(batch: dict[str, torch.Tensor], fused: bool = True) -> Callable[[], None]:
    """One training step of our NTM (conf/model/ntm.yaml's sizes) on `batch`: forward, BCE on the output phase,
    backward, Adam; `fused=False` runs `NTM.step` in a loop, differentiated by autograd."""
    model = NTM(input_size=batch["inputs"].shape[-1], output_size=batch["targets"].shape[-1],
                score=functools.partial(Cosine))
    model.fused = model.fused if fused else None
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    mask = batch["mask"]

    def step() -> None:
        loss = F.binary_cross_entropy_with_logits(model(batch["inputs"])[0][mask], batch["targets"][mask])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return step


def peer_step(path: Path, batch: dict[str, torch.Tensor], length: int) -> Callable[[], None]:
    """One training step of pytorch-ntm's `EncapsulatedNTM` at our sizes on `batch`, as its `train_batch`."""
    sys.path.insert(0, str(path))
    try:
        from ntm.aio import EncapsulatedNTM  # noqa: PLC0415 (the peer lives outside the project's environment)
    except ImportError as error:
        raise SystemExit(f"no pytorch-ntm `ntm/` folder under {path} ({error}); see this file's docstring") from None
    inputs, targets = batch["inputs"].shape[-1], batch["targets"].shape[-1]
    net = EncapsulatedNTM(inputs, targets, 100, 1, 1, 128, 20)  # LSTM 100, 1 layer, 1 read + 1 write head, 128 × 20
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    x = batch["inputs"][:, : length + 1].transpose(0, 1)  # (L + 1, B, I): the vectors and the delimiter
    y = batch["targets"][batch["mask"]].view(len(batch["inputs"]), length, targets).transpose(0, 1)  # (L, B, O)

    def step() -> None:
        optimizer.zero_grad()
        net.init_sequence(x.shape[1])
        for x_t in x:
            net(x_t)
        out = torch.stack([net()[0] for _ in range(length)])  # (L, B, O), sigmoid outputs
        F.binary_cross_entropy(out, y).backward()
        optimizer.step()

    return step


def cpu_rate(step: Callable[[], None], batch_size: int, steps: int) -> float:
    """Training sequences per CPU second of this process over `steps` steps (after one warm-up step)."""
    step()
    start = time.process_time()
    for _ in range(steps):
        step()
    return steps * batch_size / (time.process_time() - start)


def against_peer(path: Path, length: int, rounds: int, steps: int) -> None:
    """Ours and pytorch-ntm at batch 1 and 32 in paired interleaved rounds: sequences/s and the median ratio."""
    task, g = Copy(min_length=length, max_length=length), torch.Generator().manual_seed(0)
    print(f"\nbeside pytorch-ntm ({path}), {rounds} paired rounds of {steps} steps, CPU time of this process:")
    print(f"{'batch':>5} | {'ours seq/s':>10} | {'pytorch-ntm':>11} | ours/peer (median of rounds, range)")
    for b in (1, 32):
        batch = make_batch(task, b, g, size=length)
        ours = our_step(batch)
        theirs = peer_step(path, batch, length)
        pairs = [(cpu_rate(ours, b, steps), cpu_rate(theirs, b, steps)) for _ in range(rounds)]
        ratios = [a / p for a, p in pairs]
        ours_rate, peer_rate = statistics.median(a for a, _ in pairs), statistics.median(p for _, p in pairs)
        print(f"{b:>5} | {ours_rate:>10.1f} | {peer_rate:>11.1f} | {statistics.median(ratios):.2f}× "
              f"({min(ratios):.2f}–{max(ratios):.2f})")


def main() -> None:
    """Print the throughputs side by side."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--length", type=int, default=10)
    parser.add_argument("--peer", type=Path, default=None, help=f"pytorch-ntm's exported tree (e.g. {PEER})")
    parser.add_argument("--rounds", type=int, default=7, help="paired rounds beside the peer")
    parser.add_argument("--steps", type=int, default=10, help="training steps per round beside the peer")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    task = Copy()
    g = torch.Generator().manual_seed(0)

    naive = NaiveNTM(task.input_size, task.output_size)
    naive_optimizer = torch.optim.Adam(naive.parameters(), lr=1e-3)
    one = make_batch(task, 1, g, size=args.length)

    def naive_step():
        pred = naive(one["inputs"][0])[one["mask"][0]]
        loss = F.binary_cross_entropy_with_logits(pred, one["targets"][0][one["mask"][0]])
        naive_optimizer.zero_grad()
        loss.backward()
        naive_optimizer.step()

    rates = {
        "naive per-sample NTM (reference), batch 1": sequences_per_second(naive_step, 1, args.seconds),
        **{
            f"attnmem NTM{'' if fused else ' step by step'}, batch {b}": sequences_per_second(
                our_step(make_batch(task, b, g, size=args.length), fused), b, args.seconds)
            for b in (1, 32) for fused in (True, False)
        },
    }
    base = rates["attnmem NTM, batch 1"]
    print(f"copy length {args.length} ({2 * args.length + 1} steps), LSTM 100, 128 x 20, threads={args.threads}")
    for name, rate in rates.items():
        print(f"  {name:44s} {rate:8.1f} sequences/s   x{rate / base:5.1f} of batch 1")
    if args.peer is not None:
        against_peer(args.peer, args.length, args.rounds, args.steps)


if __name__ == "__main__":
    main()
