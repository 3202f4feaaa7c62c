"""Training tokens/s of our Transformer (attention=scaled_dot) vs the same model on `torch.nn.Transformer` layers.

Both models have the same embeddings, sinusoidal positions, sizes (d_model, heads, layers, d_ff,
dropout, pre-LN with a final LayerNorm per stack) and output layer; only the encoder-decoder stack
differs. One training step is forward, cross-entropy, backward and an Adam step on a batch of
reverse-like data (lengths 1-20, right-padded, source padding masked, causal target); tokens are
the real target tokens. Steps are interleaved so machine noise hits both alike; target ratio >= 0.9.
"""

from __future__ import annotations

import argparse
import time
import warnings

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmem.attention import ScaledDot
from attnmem.blocks.transformer import Positions
from attnmem.models.transformer import Transformer

PAD, BOS, EOS, VOCAB = 0, 1, 2, 14

# nn.Transformer's note that pre-LN layers skip its nested-tensor inference path (training never takes it)
warnings.filterwarnings("ignore", message="enable_nested_tensor is True")


class TorchTransformer(nn.Module):
    """Our embeddings, positions and output layer around `torch.nn.Transformer`."""

    def __init__(self, *, d_model: int, heads: int, layers: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.scale = d_model**0.5
        self.src_embed, self.tgt_embed = nn.Embedding(VOCAB, d_model), nn.Embedding(VOCAB, d_model)
        self.src_positions = Positions(d_model, 256, "sinusoidal", dropout)
        self.tgt_positions = Positions(d_model, 256, "sinusoidal", dropout)
        self.transformer = nn.Transformer(
            d_model, heads, layers, layers, d_ff, dropout, batch_first=True, norm_first=True
        )
        self.generator = nn.Linear(d_model, VOCAB)

    def forward(self, batch: dict[str, Tensor]) -> Tensor:
        src, tgt = batch["src"], batch["tgt"][:, :-1]
        causal = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1], dtype=torch.bool)
        hidden = self.transformer(
            self.src_positions(self.src_embed(src) * self.scale),
            self.tgt_positions(self.tgt_embed(tgt) * self.scale),
            tgt_mask=causal,
            src_key_padding_mask=src == PAD,
            memory_key_padding_mask=src == PAD,
            tgt_is_causal=True,
        )
        return self.generator(hidden)  # (B, Lt-1, V)


def reverse_batch(g: torch.Generator, batch_size: int, max_length: int) -> dict[str, Tensor]:
    """Random sources of lengths 1..max_length and their reversals as [bos, y, eos] targets, padded."""
    lengths = torch.randint(1, max_length + 1, (batch_size,), generator=g)
    src = torch.full((batch_size, max_length), PAD)
    tgt = torch.full((batch_size, max_length + 2), PAD)
    for i, n in enumerate(lengths.tolist()):
        tokens = torch.randint(4, VOCAB, (n,), generator=g)
        src[i, :n] = tokens
        tgt[i, : n + 2] = torch.cat([torch.tensor([BOS]), tokens.flip(0), torch.tensor([EOS])])
    width = int(lengths.max())
    return {"src": src[:, :width], "tgt": tgt[:, : width + 2]}


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, batch: dict[str, Tensor]) -> None:
    """Forward, cross-entropy on non-pad targets, backward, optimizer step."""
    out = model(batch)
    logits = out.pred if hasattr(out, "pred") else out
    loss = F.cross_entropy(logits.flatten(0, 1), batch["tgt"][:, 1:].flatten(), ignore_index=PAD)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


def main() -> None:
    """Print tokens/s of both models and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--d-ff", type=int, default=256)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20, help="steps per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    sizes = {
        "d_model": args.d_model,
        "heads": args.heads,
        "layers": args.layers,
        "d_ff": args.d_ff,
        "dropout": args.dropout,
    }
    models = {
        "ours (attention=scaled_dot)": Transformer(
            src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, pad_id=PAD, score=ScaledDot, **sizes
        ),
        "torch.nn.Transformer layers": TorchTransformer(**sizes),
    }
    optimizers = {name: torch.optim.Adam(m.parameters(), lr=1e-3) for name, m in models.items()}
    g = torch.Generator().manual_seed(0)
    batches = [reverse_batch(g, args.batch_size, 20) for _ in range(args.steps)]
    tokens = sum(int((b["tgt"][:, 1:] != PAD).sum()) for b in batches)
    for name, model in models.items():
        model.train()
        for batch in batches[:3]:  # warm-up
            train_step(model, optimizers[name], batch)
    best = {name: float("inf") for name in models}
    for _ in range(args.rounds):  # interleaved rounds, best of each
        for name, model in models.items():
            start = time.perf_counter()
            for batch in batches:
                train_step(model, optimizers[name], batch)
            best[name] = min(best[name], time.perf_counter() - start)
    print(
        f"{sizes}, batch {args.batch_size}, lengths 1-20, 1 thread, best of {args.rounds} rounds of {args.steps} steps"
    )
    reference = tokens / best["torch.nn.Transformer layers"]
    for name, model in models.items():
        params = sum(p.numel() for p in model.parameters())
        rate = tokens / best[name]
        print(f"  {name:30s} {rate:9.0f} tokens/s   {params:8d} params   ratio {rate / reference:5.2f}")


if __name__ == "__main__":
    main()
