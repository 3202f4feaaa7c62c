"""NTM training throughput on copy: sequences/s at batch 1 and 32, beside a naive per-sample NTM.

The naive reference is written here for the comparison, in the style of per-sample NTM code
(e.g. loudinthecloud/pytorch-ntm): one sequence at a time, a Python loop over the heads, the
shift as a sum of `torch.roll`s. Same sizes as conf/model/ntm.yaml (LSTM 100, 128 × 20, 1 read
and 1 write head), copy of length 10 (21 steps), forward + backward + Adam step, 1 thread by
default. Target: batched (32) throughput >= 10 × the batch-1 figure.
"""

from __future__ import annotations

import argparse
import functools
import time

import torch
import torch.nn.functional as F
from torch import nn

from attnmem.attention import Cosine
from attnmem.data.algorithmic import Copy, make_batch
from attnmem.models.ntm import NTM


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


def main() -> None:
    """Print the throughputs side by side."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--length", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    task = Copy()
    g = torch.Generator().manual_seed(0)

    def batched(batch_size: int):
        model = NTM(input_size=task.input_size, output_size=task.output_size, score=functools.partial(Cosine))
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        batch = make_batch(task, batch_size, g, size=args.length)

        def step():
            pred = model(batch).pred[batch["mask"]]
            loss = F.binary_cross_entropy_with_logits(pred, batch["targets"][batch["mask"]])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

        return step

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
        "attnmem NTM, batch 1": sequences_per_second(batched(1), 1, args.seconds),
        "attnmem NTM, batch 32": sequences_per_second(batched(32), 32, args.seconds),
    }
    base = rates["attnmem NTM, batch 1"]
    print(f"copy length {args.length} ({2 * args.length + 1} steps), LSTM 100, 128 x 20, threads={args.threads}")
    for name, rate in rates.items():
        print(f"  {name:44s} {rate:8.1f} sequences/s   x{rate / base:5.1f} of batch 1")


if __name__ == "__main__":
    main()
