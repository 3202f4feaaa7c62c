"""MemN2N training steps against a plain-PyTorch floor with the same features, side by side.

The floor is the paper's model written as bare tensor code here (no modules, no score objects, no `Output`):
3 hops, d = 20, position encoding, temporal encoding, adjacent tying with Wᵀ = C^K on the answers' rows, and the
memory's empty slots in the softmax as the reference code's "nothing" entry (log of their count). Random noise is
off in both (it is a draw of indices per batch, the same work in both). Before timing, the floor is checked to give
our logits and gradients from our weights. One step = forward, summed cross-entropy, backward, SGD; 1 thread;
batches of generated bAbI task 1 with the memory sized per task (task 1's 10 slots, the reference rule) and 50
slots. Rounds alternate ours and the floor on the same batches, timed in CPU seconds of this process (other load
counts less); the printed ratio is the median of the rounds'.

    python benchmarks/memn2n_floor.py [--rounds 7] [--steps 100]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from attnmem.attention import Dot
from attnmem.core import packaged
from attnmem.models.memn2n import MemN2N

Batch = dict[str, torch.Tensor]
CONF = packaged.conf_dir()  # the packaged configs (src/attnmem/conf)


def floor_logits(words: list[torch.Tensor], times: list[torch.Tensor], batch: Batch, pe: torch.Tensor,
                 answers: torch.Tensor, memory_size: int) -> torch.Tensor:
    """MemN2N's logits (B, A) from embeddings `words` (K + 1 of (V, d)) and `times` (K + 1 of (S_max, d))."""
    story, query = batch["story"], batch["query"]  # (B, S, L), (B, Lq)
    hops, (s, length) = len(words) - 1, story.shape[1:]
    slots = story.ne(0).any(-1)  # (B, S)
    n = slots.sum(-1, keepdim=True)  # (B, 1)
    recency = (n - 1 - torch.arange(s)).clamp_min(0)  # (B, S), 0 = the most recent
    nothing = (memory_size - n).log()  # (B, 1): the empty slots' zero vectors score 0 each
    encoded = [(F.embedding(story, w, padding_idx=0) * pe[:length]).sum(-2) for w in words]  # (B, S, d) each
    u = (F.embedding(query, words[0], padding_idx=0) * pe[: query.shape[1]]).sum(-2)  # (B, d)
    for k in range(hops):
        m = encoded[k] + F.embedding(recency, times[k])  # (B, S, d)
        c = encoded[k + 1] + F.embedding(recency, times[k + 1])
        scores = torch.bmm(m, u.unsqueeze(-1)).squeeze(-1).masked_fill(~slots, -torch.inf)  # (B, S)
        p = torch.softmax(torch.cat([scores, nothing], -1), -1)[:, :-1]  # (B, S)
        u = u + torch.bmm(p.unsqueeze(1), c).squeeze(1)  # (B, d)
    return u @ words[-1][answers].T  # (B, A)


def batches(memory_size: int, count: int) -> tuple[list[Batch], dict[str, int], list[int]]:
    """`count` training batches of generated task 1 (batch 32) with `memory_size` slots, the sizes and answers."""
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        cfg = compose("train", overrides=["data.batch_size=32", f"data.memory_size={memory_size}"])
    data = instantiate(cfg.data)
    data.prepare_data()
    data.setup("fit")
    loader = list(data.train_dataloader())  # one epoch (94 batches), repeated as needed
    dims = data.dims
    sizes = {"vocab_size": dims.vocab_size, "num_answers": dims.num_answers, "memory_size": dims.memory_size,
             "sentence_len": dims.sentence_len}
    return [loader[i % len(loader)] for i in range(count)], sizes, list(dims.answer_words)


def steps(memory_size: int, count: int) -> tuple[Callable[[], None], Callable[[], None]]:
    """Ours and the floor, each a function running `count` SGD steps on the same batches."""
    data, sizes, answer_words = batches(memory_size, count)
    torch.manual_seed(0)
    ours = MemN2N(**sizes, score=functools.partial(Dot), random_noise=0.0, answer_words=answer_words)
    words = [e.weight.detach().clone().requires_grad_() for e in (*ours.A, ours.C[-1])]
    times = [e.weight.detach().clone().requires_grad_() for e in (*ours.T_A, ours.T_C[-1])]
    answers = torch.tensor(answer_words)
    pe, slots = ours.position, sizes["memory_size"]

    def floor_loss(batch: Batch) -> torch.Tensor:
        logits = floor_logits(words, times, batch, pe, answers, slots)
        return F.cross_entropy(logits, batch["answer"], reduction="sum")

    def ours_loss(batch: Batch) -> torch.Tensor:
        return F.cross_entropy(ours(batch["story"], batch["query"]), batch["answer"], reduction="sum")

    check(ours, ours_loss, floor_loss, words, data[0])
    ours_opt = torch.optim.SGD(ours.parameters(), lr=0.005)
    floor_opt = torch.optim.SGD(words + times, lr=0.005)

    def run(loss_of: Callable[[Batch], torch.Tensor], optimizer: torch.optim.Optimizer) -> Callable[[], None]:
        def go() -> None:
            for batch in data:
                optimizer.zero_grad()
                loss_of(batch).backward()
                optimizer.step()

        return go

    return run(ours_loss, ours_opt), run(floor_loss, floor_opt)


def check(ours: MemN2N, ours_loss: Callable[[Batch], torch.Tensor], floor_loss: Callable[[Batch], torch.Tensor],
          words: list[torch.Tensor], batch: Batch) -> None:
    """The floor computes our model: the same loss, and the same gradient of the first embedding."""
    ours_value, floor_value = ours_loss(batch), floor_loss(batch)
    ours_value.backward()
    floor_value.backward()
    torch.testing.assert_close(floor_value, ours_value, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(words[0].grad, ours.A[0].weight.grad, rtol=1e-4, atol=1e-5)
    ours.zero_grad()
    words[0].grad = None


def main() -> None:
    """Print steps/s of ours and the floor per memory size, and the median ratio of paired rounds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"MemN2N (3 hops, d 20, PE, TE, adjacent tying), batch 32, SGD, {args.rounds} paired rounds of "
          f"{args.steps} steps, 1 thread; load {open('/proc/loadavg').read().split()[:3]}")
    print(f"{'slots':>5} | {'ours steps/s':>12} | {'floor steps/s':>13} | ours/floor (median, range)")
    for memory_size in (10, 50):
        ours, floor = steps(memory_size, args.steps)
        pairs = []
        for _ in range(args.rounds):
            rates = []
            for go in (ours, floor):
                start = time.process_time()
                go()
                rates.append(args.steps / (time.process_time() - start))
            pairs.append(rates)
        ratios = [a / b for a, b in pairs]
        print(f"{memory_size:>5} | {statistics.median(a for a, _ in pairs):>12.1f} | "
              f"{statistics.median(b for _, b in pairs):>13.1f} | {statistics.median(ratios):.2f}× "
              f"({min(ratios):.2f}–{max(ratios):.2f})")


if __name__ == "__main__":
    main()
