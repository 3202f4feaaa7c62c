"""Train the NTM on the copy task with a plain PyTorch loop: no Lightning, no Hydra, no config.

The copy task of Graves et al. 2014 (§4.1): the network reads a sequence of random 8-bit vectors, then a
delimiter on a channel of its own, and must write the sequence back while its input is zero.
Run it as `python docs/examples/ntm_copy.py`; it prints the bit errors per sequence as it trains.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from attnmem.nn import NTM

BITS = 8  # the width of one vector; the input has one more channel, the delimiter


def copy_batch(batch_size: int, length: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """A batch of copy sequences of one length: `(inputs (B, 2L + 1, BITS + 1), targets (B, L, BITS))`."""
    bits = torch.randint(0, 2, (batch_size, length, BITS), generator=generator).float()
    inputs = torch.zeros(batch_size, 2 * length + 1, BITS + 1)
    inputs[:, :length, :BITS] = bits  # the sequence
    inputs[:, length, BITS] = 1.0  # the delimiter
    return inputs, bits  # the output phase (the last L steps) must repeat the bits


def bit_errors(model: NTM, lengths: range, generator: torch.Generator, per_length: int = 50) -> float:
    """Bit errors per sequence, averaged over `per_length` fresh sequences of each length."""
    errors = []
    with torch.no_grad():
        for length in lengths:
            inputs, targets = copy_batch(per_length, length, generator)
            logits, _ = model(inputs)  # (B, 2L + 1, BITS)
            wrong = (logits[:, -length:] > 0).float() != targets  # (B, L, BITS)
            errors.append(wrong.sum((1, 2)).float().mean())
    return torch.stack(errors).mean().item()


def train(
    seed: int = 0, steps: int = 1500, batch_size: int = 16, lr: float = 1e-2, lengths: range = range(1, 6)
) -> float:
    """Train an NTM on copy; return its bit errors per sequence on fresh sequences."""
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    model = NTM(input_size=BITS + 1, output_size=BITS, controller_size=100, memory_locations=16, memory_width=16)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)  # lr down to 0: a calm finish
    for step in range(1, steps + 1):
        length = int(torch.randint(lengths.start, lengths.stop, (1,), generator=generator))
        inputs, targets = copy_batch(batch_size, length, generator)
        logits, _ = model(inputs)  # (B, 2L + 1, BITS): logits at every step
        loss = F.binary_cross_entropy_with_logits(logits[:, -length:], targets)  # the output phase only
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        optimizer.step()
        schedule.step()
        if step % 250 == 0:
            print(f"step {step}: loss {loss.item():.4f}, bit errors per sequence "
                  f"{bit_errors(model, lengths, generator):.2f}")
    return bit_errors(model, lengths, generator)


if __name__ == "__main__":
    print(f"final: {train():.2f} bit errors per sequence")
