"""End-To-End Memory Network (Sukhbaatar et al. 2015)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import cast

import torch
from torch import Tensor, nn

from attnmem.attention.scores import score_factory
from attnmem.blocks.embedding import lookup
from attnmem.blocks.output import Output
from attnmem.blocks.position_encoding import bag_of_words, position_encoding
from attnmem.blocks.recency import noisy_recency, recency
from attnmem.core import compat
from attnmem.models.contract import AfterClipping, LinearStartable, WeightMatrices
from attnmem.models.memn2n_options import check_options, output_words
from attnmem.models.memn2n_read import address

__all__ = ["MemN2N"]


class MemN2N(nn.Module, AfterClipping, WeightMatrices, LinearStartable):
    """End-To-End Memory Network, Sukhbaatar et al. 2015, "End-To-End Memory Networks" (NeurIPS).

    One hop (§2.1): input memories m_i = Σ_j l_j ∘ A x_ij + T_A(i), output memories
    c_i = Σ_j l_j ∘ C x_ij + T_C(i), weights p = softmax(score(u, m)) (eq. 1), read o = Σ_i p_i c_i
    (eq. 2); hops stack with u^{k+1} = u^k + o^k (eq. 4, or H u^k + o^k with layer-wise tying);
    the answer is â = softmax(W u^{K+1}) (eqs. 3, 5; the softmax is left to the loss).
    The question is u^1 = Σ_j l_j ∘ B q_j. Linear start (LS, §4.2): with `linear_start = True` the weights are
    the raw masked scores (no softmax); the `LinearStart` callback toggles it. Embeddings and W, H are drawn from
    N(0, init_std²); word id 0 embeds to zero.

    `forward(story, query)` takes word ids and returns the answer logits. Time is each sentence's recency,
    computed from the story (no time input); the answer candidates are fixed at construction (`num_answers`,
    `answer_words`). The qa family trains it through `attnmem.tasks.qa_nets.MemN2NQA`; `answer(story, query,
    drawn)` is `forward` with RN's numbers drawn beforehand (`draws`).

    Args:
        vocab_size: V, the words (id 0 is the pad, nil, word).
        num_answers: the answer classes.
        memory_size: the most sentences a story holds (the memory's slots; the rows of T_A, T_C).
        sentence_len: the most words of a sentence or question, J (with `time_word`, J = sentence_len + 1).
        score: `score(query_dim=d, key_dim=d)`, called once per hop; the paper's is `Dot`. A name ("dot", ...),
            a score class or a factory.
        embed_dim: d.
        hops: K.
        encoding: "position" is PE (§4.1) with one global sentence length J, as in the reference code; "bow"
            sets l_j = 1.
        temporal: temporal encoding (§4.1); rows of T_A / T_C are indexed by recency (0 = most recent).
        time_word: the reference code's form of temporal encoding, where the time index is one more word of each
            sentence: J counts it (J = sentence_len + 1) and T(i) is weighted by the last position's l_J.
        answer_softmax: "answers" normalises â over the answer classes; "vocabulary" over every word (and, with
            `time_word`, every time word), as the paper's V × d matrix W and the reference code do (needs
            Wᵀ = C^K through `answer_words`). `pred` then has the answer classes first and the other words after
            them, so its argmax is wrong whenever a non-answer word wins.
        tying: (§2.2) "adjacent" has A^{k+1} = C^k and B = A^1 (T_A/T_C tied the same way); "layerwise" shares
            A, C (and T_A, T_C) over hops and adds the linear map H.
        random_noise: RN (§4.1) spreads the time indices over this fraction (~10%) of extra empty slots while
            training, as the reference code's `randomize_time` does; 0 turns it off.
        init_std: the standard deviation of the initial embeddings and W, H (the reference code's 0.1).
        answer_words: each answer class's word id, from the data; with it adjacent tying also sets Wᵀ = C^K on
            those rows, as the paper and reference code do; otherwise, and with layer-wise tying, W is a separate
            d -> num_answers map.
        empty_memories: "attend" (the reference code's behaviour) keeps the memory's empty slots, up to
            `memory_size`, in the softmax as zero vectors: a "nothing" option whose weight grows with the free
            space; "mask" gives them weight 0. On bAbI 1k "attend" generalised far better (task 6, seed 0: 8%
            validation error vs 24%).
        embeddings: pretrained vectors from the data (`data.source.embeddings`): every A^k, C^k and B starts
            from them where a word has a vector (a non-zero row; the rest stay random) and is trained from there.
        nil_gradient: the reference code's nil (pad) word takes gradient like any word: at the pads of every
            sentence and question up to J's words, and at every position of each empty memory slot ("attend").
            Its row stays zero (the task zeroes its gradient in `after_clipping`, as the reference code resets it
            after each update: Memory.m, train.m), so only per-weight clipping changes: the reference code's
            Weight.m measures each table's gradient with the nil row in it. False: the pad word takes no gradient
            (`padding_idx`).

    Shapes:
        - embeddings: (V, d)
    """

    B: nn.Embedding
    linear: Tensor  # buffers
    output_words: Tensor
    position: Tensor
    time_weight: Tensor | None

    def __init__(
        self,
        *,
        vocab_size: int,
        num_answers: int,
        memory_size: int,
        sentence_len: int,
        score: str | Callable[..., nn.Module] = "dot",
        embed_dim: int = 20,
        hops: int = 3,
        encoding: str = "position",
        temporal: bool = True,
        time_word: bool = False,
        answer_softmax: str = "answers",
        tying: str = "adjacent",
        random_noise: float = 0.1,
        init_std: float = 0.1,
        answer_words: Sequence[int] | None = None,
        empty_memories: str = "attend",
        embeddings: Tensor | None = None,
        nil_gradient: bool = False,
    ) -> None:
        super().__init__()
        sizes = {"vocab_size": vocab_size, "num_answers": num_answers, "memory_size": memory_size}
        sizes |= {"sentence_len": sentence_len, "embed_dim": embed_dim, "hops": hops}
        check_options(sizes, encoding=encoding, tying=tying, random_noise=random_noise, init_std=init_std,
                      empty_memories=empty_memories, answer_words=answer_words, embeddings=embeddings,
                      answer_softmax=answer_softmax)
        self.hops, self.memory_size, self.sentence_len = hops, memory_size, sentence_len
        self.temporal, self.random_noise, self.init_std = temporal, random_noise, init_std
        self.empty_memories = empty_memories
        self.pad = None if nil_gradient else 0  # the lookups' padding_idx: the nil word takes gradient without one
        # a buffer, so a checkpoint saved during linear start is evaluated without softmax too
        self.register_buffer("linear", torch.tensor(False))
        d = embed_dim
        # an embedding list E with A^k = E[k-1], C^k = E[k] (adjacent), or E = [A, C] (layer-wise)
        n = hops + 1 if tying == "adjacent" else 2
        E = [nn.Embedding(vocab_size, d, padding_idx=self.pad) for _ in range(n)]
        T = [nn.Embedding(memory_size, d) for _ in range(n)] if temporal else []
        a, c = (range(hops), range(1, hops + 1)) if tying == "adjacent" else ([0] * hops, [1] * hops)
        self.A, self.C = nn.ModuleList(E[i] for i in a), nn.ModuleList(E[i] for i in c)
        self.T_A = nn.ModuleList(T[i] for i in a) if temporal else None
        self.T_C = nn.ModuleList(T[i] for i in c) if temporal else None
        self.B = (cast(nn.Embedding, self.A[0]) if tying == "adjacent"  # A^1, an embedding
                  else nn.Embedding(vocab_size, d, padding_idx=self.pad))
        self.H = nn.Linear(d, d, bias=False) if tying == "layerwise" else None
        self._build_answer_layer(d, num_answers, vocab_size, answer_words, tying=tying, answer_softmax=answer_softmax)
        self.scores = nn.ModuleList(score_factory(score, owner="MemN2N")(query_dim=d, key_dim=d) for _ in range(hops))
        self._register_encoding(encoding, sentence_len, d, time_word=temporal and time_word)
        self._reset_parameters(embeddings)

    def _build_answer_layer(self, d: int, num_answers: int, vocab_size: int, answer_words: Sequence[int] | None, *,
                            tying: str, answer_softmax: str) -> None:
        # adjacent tying with answers that are words: Wᵀ = C^K restricted to the answers' rows (§2.2)
        tied = answer_words if tying == "adjacent" else None  # the answers' words, when Wᵀ = C^K
        self.W = None if tied is not None else nn.Linear(d, num_answers, bias=False)
        self.vocabulary_softmax = answer_softmax == "vocabulary"
        words = output_words(tied if tied is not None else [], vocab_size, self.vocabulary_softmax)
        self.register_buffer("output_words", words, persistent=False)

    def _register_encoding(self, encoding: str, sentence_len: int, d: int, *, time_word: bool) -> None:
        words = sentence_len + 1 if time_word else sentence_len  # J: the time word is the last word
        pe = position_encoding(words, d) if encoding == "position" else torch.ones(words, d)
        self.register_buffer("position", pe, persistent=False)  # (J, d)
        self.register_buffer("time_weight", pe[-1] if time_word else None, persistent=False)  # (d,) l_J

    def _reset_parameters(self, embeddings: Tensor | None) -> None:
        # the score modules keep their own initialisation
        for module in (*self.A, *self.C, self.B, *(self.T_A or ()), *(self.T_C or ()), self.H, self.W):
            if module is not None:
                nn.init.normal_(module.weight, std=self.init_std)
        with torch.no_grad():
            for embed in (*self.A, *self.C, self.B):
                if embeddings is not None:  # the words with a vector (a non-zero row) start from it
                    known = embeddings.abs().sum(-1) > 0  # (V,)
                    embed.weight[known] = embeddings[known].to(embed.weight.dtype)
                embed.weight[0].zero_()  # the pad word adds nothing to a sentence

    def weight_matrices(self) -> list[list[nn.Parameter]]:
        """The weights per-weight clipping measures together (`task.clip_per_weight`).

        Returns:
            Each distinct embedding with its time table, one matrix [E; T] as the reference code's lookup table of
            words and time words.
        """
        none = [None] * self.hops
        groups: dict[int, list[nn.Parameter]] = {}
        for embed, table in (*zip(self.A, self.T_A or none), *zip(self.C, self.T_C or none)):
            weights = [embed.weight] + ([] if table is None else [table.weight])
            groups.setdefault(id(embed), cast("list[nn.Parameter]", weights))  # the embeddings' Parameters
        return list(groups.values())

    def _encode(self, embed: nn.Embedding, words: Tensor, nil: Tensor | None = None) -> Tensor:
        """Embed `words (..., L)` and sum over positions weighted by l_j: (..., d); with `nil (B,)` (`nil_gradient`)
        the nil words that pad the question to J's words too."""
        encoded = bag_of_words(embed.weight, words, self.position, owner="MemN2N", padding_idx=self.pad)  # (..., d)
        nil_words = 0.0 if nil is None else self._nil_words(embed.weight, words.shape[-1], self.sentence_len,
                                                             self.position, nil)
        return encoded + nil_words

    @staticmethod
    def _nil_words(weight: Tensor, first: int, last: int, encoding: Tensor, nil: Tensor) -> Tensor:
        """Σ_j l_j ∘ E x_j over positions `first` .. `last`-1 of `encoding (J, d)` that all hold the nil word, row
        `nil (B,)` of `weight (V, d)`: (B, d), zero in value (the row is zero), the nil row's gradient."""
        return encoding[first:last].sum(0) * weight[nil]  # (B, d)

    def draws(self, story: Tensor) -> dict[str, Tensor]:
        """The uniform numbers RN draws for a story while training (none otherwise).

        Args:
            story: the story's word ids (only its shape and device count).

        Shapes:
            - story: (B, S, L)
            - rn_blank: (B, 1); rn_keys: (B, S + ceil(S · random_noise))

        Returns:
            `{"rn_blank": ..., "rn_keys": ...}`, or `{}` when RN is off or the model is not training.
        """
        if not (self.training and self.temporal and self.random_noise > 0):
            return {}
        b, s = story.shape[:2]
        most = math.ceil(s * self.random_noise)
        blank = torch.rand(b, 1, device=story.device)  # (B, 1), drawn first as before
        return {"rn_blank": blank, "rn_keys": torch.rand(b, s + most, device=story.device)}  # (B, S + most)

    def _time_index(self, slot_mask: Tensor, drawn: dict[str, Tensor]) -> Tensor:
        """Recency of each slot (B, S), spread by RN's `drawn` numbers (`draws`) over extra empty slots."""
        return noisy_recency(slot_mask, drawn, self.random_noise, self.memory_size) if drawn else recency(slot_mask)

    def after_clipping(self) -> None:
        """Zero the pad word's gradient in every table once clipping has measured it, so that word id 0 stays a zero
        vector (the reference code resets its nil word after each update: Memory.m, train.m)."""
        for embed in {id(e): e for e in (*self.A, *self.C, self.B)}.values():
            if embed.weight.grad is not None:
                embed.weight.grad[0] = 0

    @property
    def linear_start(self) -> bool:
        """Whether memory addressing skips the softmax (linear start, §4.2)."""
        return bool(self.linear)

    @linear_start.setter
    def linear_start(self, value: bool) -> None:
        self.linear.fill_(value)

    def _memories(self, story: Tensor, slot_mask: Tensor, time: Tensor | None,
                 nil: Tensor | None = None) -> tuple[dict[int, Tensor], dict[int, Tensor]]:
        """Each distinct embedding's memory of `story (B, S, L)`, Σ_j l_j ∘ E x_ij + T(i): (B, S, d), keyed by id(E);
        with `nil (B,)` (`nil_gradient`) the sentences' nil words up to J's words too, and an empty slot's memory
        (B, 1, d), all nil words, keyed the same (else none).

        The K distinct embeddings (tied ones once: C^k = A^{k+1} adjacent, one A and one C layer-wise) are looked
        up side by side as one table [E_1 … E_K] (V, K·d), their T tables (tied the same way) as one. Every read
        masks the empty slots (`slot_mask (B, S)` False): on a CPU only the real sentences are encoded and the
        empty slots hold zeros; a GPU (where picking them out waits for the device) and `vmap` (which cannot
        batch the picking) encode every slot.
        """
        none = [None] * self.hops
        distinct = {id(e): (e, t) for e, t in (*zip(self.A, self.T_A or none), *zip(self.C, self.T_C or none))}
        embeds, tables = zip(*distinct.values())
        k, d = len(embeds), embeds[0].embedding_dim
        packed = story.device.type == "cpu" and not compat.maybe_batched(story)
        real = slot_mask.nonzero(as_tuple=True) if packed else None  # (N,), (N,): the real sentences' rows, slots
        sentences = story[real] if packed else story  # (N, L) packed, else (B, S, L)
        weight = torch.cat([e.weight for e in embeds], dim=-1)  # (V, K·d)
        position = self.position.repeat(1, k)  # (J, K·d)
        encoded = bag_of_words(weight, sentences, position, owner="MemN2N", padding_idx=self.pad)  # (N or B, S, K·d)
        if time is not None:
            timed = lookup(torch.cat([t.weight for t in tables], dim=-1), time[real] if packed else time)
            encoded = encoded + (timed if self.time_weight is None else timed * self.time_weight.repeat(k))
        if packed:
            encoded = encoded.new_zeros(*story.shape[:2], k * d).index_put(real, encoded)  # (B, S, K·d)
        if nil is None:
            return dict(zip(distinct, encoded.split(d, dim=-1))), {}  # (B, S, d) each
        encoded = encoded + self._nil_words(weight, story.shape[-1], self.sentence_len, position, nil).unsqueeze(1)
        nothing = self._nil_words(weight, 0, len(position), position, nil).unsqueeze(1)  # (B, 1, K·d)
        return dict(zip(distinct, encoded.split(d, dim=-1))), dict(zip(distinct, nothing.split(d, dim=-1)))

    def forward(self, story: Tensor, query: Tensor, *,
                return_attention: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """Answer logits for a story and a question. While training, RN (`random_noise`) draws its numbers here
        (`draws`).

        Args:
            story: word ids of S sentences, left-aligned; 0 pads, and a sentence of only pads is an empty slot.
            query: word ids of the question; 0 pads.
            return_attention: also return each hop's weights over the sentences.

        Shapes:
            - story: (B, S, L)
            - query: (B, L)
            - logits: (B, num_answers) ("vocabulary": (B, V), (B, V + memory_size) with `time_word`);
              weights: (B, hops, S)

        Returns:
            `logits`, or `(logits, weights)` with `return_attention`.
        """
        if story.dim() != 3 or query.dim() != 2 or story.shape[0] != query.shape[0]:
            raise ValueError(f"MemN2N expects story (B, S, L) and query (B, L) word ids, got story of shape "
                             f"{tuple(story.shape)} and query of shape {tuple(query.shape)}")
        out = self.answer(story, query, self.draws(story))
        return (out.pred, torch.stack(out.attention, 1)) if return_attention else out.pred

    def answer(self, story: Tensor, query: Tensor, drawn: dict[str, Tensor]) -> Output:
        """`forward`'s answer as an `Output`, from RN's numbers drawn beforehand (the training adapter's call,
        `tasks.qa_nets.MemN2NQA`).

        Args:
            story: word ids of S sentences, as `forward`'s.
            query: word ids of the question, as `forward`'s.
            drawn: RN's numbers (`draws`; {} without RN).

        Shapes:
            - story: (B, S, L)
            - query: (B, L)
            - drawn: rn_blank (B, 1), rn_keys (B, S + ceil(S · random_noise))

        Returns:
            `Output(pred (B, A), attention: per hop (B, S))`.
        """
        if story.shape[1] > self.memory_size:
            raise ValueError(f"MemN2N: a story of {story.shape[1]} sentences exceeds memory_size={self.memory_size} "
                             "(data.memory_size in a run)")
        nil = self._nil_rows(query)  # (B,) each row's nil word (`nil_gradient`), else None
        slot_mask = story.ne(0 if nil is None else nil.view(-1, 1, 1)).any(-1)  # (B, S) True for a real sentence
        time = self._time_index(slot_mask, drawn) if self.temporal else None
        u = self._encode(self.B, query, nil).unsqueeze(1)  # (B, 1, d)
        memories, nothing = self._memories(story, slot_mask, time, nil)  # (B, S, d) each; (B, 1, d) each
        mask, linear = slot_mask.unsqueeze(1), self.linear_start  # (B, 1, S)
        empty, empty_log = ~mask, None  # the log of the empty slots' count (0 = -inf); "mask" leaves them out
        if self.empty_memories == "attend":
            empty_log = (self.memory_size - mask.sum(-1, keepdim=True)).clamp_min(0).log()  # (B, 1, 1)
        attention = []
        for score, embed_a, embed_c in zip(self.scores, self.A, self.C):  # hop k: A^k, C^k
            m, c = memories[id(embed_a)], memories[id(embed_c)]  # (B, S, d) each
            empty_slot = (nothing[id(embed_a)], nothing[id(embed_c)]) if nothing else None
            o, weights = address(score, u, m, c, empty, empty_log, linear, empty_slot)
            u = (u if self.H is None else self.H(u)) + o  # (B, 1, d)
            attention.append(weights.squeeze(1))  # (B, S)
        pred = self._tied_answers(u.squeeze(1)) if self.W is None else self.W(u.squeeze(1))
        return Output(pred=pred, attention=attention)  # (B, num_answers)

    def _nil_rows(self, query: Tensor) -> Tensor | None:
        """The row of the tables that holds each example's nil word, `(B,)` zeros with `nil_gradient` (which
        gives that row gradient); None otherwise (the pad word, `padding_idx`)."""
        return torch.zeros_like(query[:, 0], dtype=torch.long) if self.pad is None else None  # (B,)

    def _tied_answers(self, u: Tensor) -> Tensor:
        """Logits `u (B, d)` Wᵀ with Wᵀ = C^K's answer rows: (B, A); "vocabulary": (B, V), (B, V + S) with the time
        words."""
        pred = u @ cast(nn.Embedding, self.C[-1]).weight[self.output_words].T  # (B, A); "vocabulary": (B, V)
        if self.vocabulary_softmax and self.time_weight is not None:  # the time words are words too
            assert self.T_C is not None  # time words come with temporal encoding: its T tables exist
            pred = torch.cat([pred, u @ cast(nn.Embedding, self.T_C[-1]).weight.T], dim=-1)  # (B, V + S)
        return pred
