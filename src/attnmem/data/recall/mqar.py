"""Multi-query associative recall (MQAR; Arora et al. 2024, "Zoology", §3 and Appendix), a recall source.

A sequence opens with `num_kv_pairs` key-value pairs `k1 v1 k2 v2 ...` (keys and values from the two halves of the
vocabulary, distinct within a sequence); the rest holds queries of those keys, each at an even offset after the
pairs. The target at a query's position is its key's value (the model predicts it as the next token); every other
position is -100 (not scored). As Zoology's `multiquery_ar`: keys are drawn from `1 .. vocab_size//2 - 1` (0 is the
filler), values from `vocab_size//2 .. vocab_size - 1`; a query's offset is drawn without replacement from the
`(seq_len - 2·num_kv_pairs) // 2` slots with the power law p(i) ∝ a·i^(a-1), i = 1, 2, ... (`power_a` = a: 0.01, most
queries close after the pairs; 1.0, uniform); and with `random_non_queries` every filler becomes a token drawn
uniformly from the whole vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from attnmem.data.recall.checks import IGNORE, check_range, distinct


@dataclass(frozen=True)
class MQAR:
    """Zoology's MQAR as a recall source (`data.source`): `generate(n, seed)` gives `(inputs, targets)`, (n, seq_len).

    `num_queries`: how many of the keys are queried, the first ones drawn (None: every key, as Zoology).
    """

    vocab_size: int = 8192
    seq_len: int = 64  # the input length T
    num_kv_pairs: int = 8
    num_queries: int | None = None
    power_a: float = 0.01
    random_non_queries: bool = True

    def check(self) -> None:
        """A one-line `ValueError` naming the first option out of its range (`generate` checks first; the
        datamodule, at setup: outside Hydra's instantiation, which would wrap it in a traceback)."""
        check_range("seq_len", self.seq_len, 4, why=" (one key-value pair and one query slot)")
        pairs, queries = self.num_kv_pairs, self.num_queries
        if queries is None:
            check_range("num_kv_pairs", pairs, 1, self.seq_len // 4,
                        why=f" for seq_len={self.seq_len} (4 * num_kv_pairs <= seq_len: the pairs, then a query slot "
                            "for each, as Zoology; or set data.source.num_queries below num_kv_pairs)")
        else:
            check_range("num_kv_pairs", pairs, 1, (self.seq_len - 2) // 2,
                        why=f" for seq_len={self.seq_len} (2 * num_kv_pairs + 2 <= seq_len: the pairs, a query slot)")
            check_range("num_queries", queries, 1, min(pairs, self.slots),
                        why=f" (at most num_kv_pairs={pairs}, and the {self.slots} query slot(s) of seq_len="
                            f"{self.seq_len}: (seq_len - 2 * num_kv_pairs) // 2)")
        check_range("vocab_size", self.vocab_size, 2 * pairs + 2,
                    why=f" for num_kv_pairs={pairs} (keys from 1 .. vocab_size//2 - 1, values from vocab_size//2 .. "
                        "vocab_size - 1, distinct within a sequence)")
        if not self.power_a > 0:
            raise ValueError(f"data.source.power_a={self.power_a} is out of range: it must be > 0 (1.0: query "
                             "positions uniform; Zoology's 0.01: most queries close after the pairs)")

    @property
    def slots(self) -> int:
        """The query slots: even offsets after the pairs."""
        return (self.seq_len - 2 * self.num_kv_pairs) // 2

    def slot_probabilities(self) -> Tensor:
        """Zoology's power law over the query slots, p(i) ∝ a·i^(a-1) for i = 1 .. slots, normalised: (slots,)."""
        i = torch.arange(1, self.slots + 1, dtype=torch.float64)
        p = self.power_a * i ** (self.power_a - 1)
        return p / p.sum()

    def generate(self, num_examples: int, seed: int) -> tuple[Tensor, Tensor]:
        """`inputs (N, T)` token ids and `targets (N, T)`: a query's key's value at its position, -100 elsewhere."""
        self.check()
        g = torch.Generator().manual_seed(seed)
        n, pairs, half = num_examples, self.num_kv_pairs, self.vocab_size // 2
        queries = pairs if self.num_queries is None else self.num_queries
        keys = distinct(g, n, half - 1, pairs) + 1  # (N, K) in [1, V/2)
        values = distinct(g, n, self.vocab_size - half, pairs) + half  # (N, K) in [V/2, V)
        gaps = torch.multinomial(self.slot_probabilities().float().expand(n, -1), queries, replacement=False,
                                 generator=g) if n else torch.zeros(0, queries, dtype=torch.long)  # (N, Q)
        positions = 2 * pairs + 2 * gaps  # (N, Q): even offsets after the pairs
        inputs = torch.zeros(n, self.seq_len, dtype=torch.long)
        inputs[:, 0 : 2 * pairs : 2], inputs[:, 1 : 2 * pairs : 2] = keys, values
        inputs.scatter_(1, positions, keys[:, :queries])
        targets = torch.full_like(inputs, IGNORE).scatter_(1, positions, values[:, :queries])
        if self.random_non_queries:  # 0 is neither a key nor a value: exactly the fillers
            noise = torch.randint(self.vocab_size, inputs.shape, generator=g)
            inputs = torch.where(inputs == 0, noise, inputs)
        return inputs, targets
