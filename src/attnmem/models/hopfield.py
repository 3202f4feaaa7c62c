"""Classical Hopfield network (Hopfield 1982): Hebbian storage, sign updates, an energy that never rises."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch
from torch import Tensor, nn

from attnmem.blocks.output import Retrieval
from attnmem.core.float32 import in_float32
from attnmem.models.contract import StoresPatterns

__all__ = ["Hopfield", "async_sweep", "energy", "hebbian", "sync_step"]

UPDATES = ("async", "sync")
ORDERS = ("random", "fixed")


def hebbian(patterns: Tensor) -> Tensor:
    """Hebbian weights w_ij = (1/N) Σₙ xᵢⁿ xⱼⁿ with w_ii = 0, from `patterns (K, N)`: (N, N)."""
    n = patterns.shape[-1]
    weights = patterns.T @ patterns / n  # (N, N)
    return weights.fill_diagonal_(0.0)


def energy(weights: Tensor, bias: Tensor, states: Tensor) -> Tensor:
    """E = -½ sᵀWs - bᵀs of `states (B, N)`: (B,)."""
    return -0.5 * ((states @ weights) * states).sum(-1) - states @ bias


def sign(field: Tensor) -> Tensor:
    """+1 where the field is >= 0, else -1."""
    return torch.where(field >= 0, 1.0, -1.0).to(field.dtype)


def _sign(field: np.ndarray) -> np.ndarray:
    return np.where(field >= 0, 1.0, -1.0)


def async_sweep(weights: Tensor, bias: Tensor, states: Tensor, order: Tensor, fields: Tensor | None = None) -> Tensor:
    """Update the units in `order` one at a time, every probe of `states (B, N)` together; in place.

    Returns `changed (B,)`, True for a probe where some unit flipped. Exactly the sequential sweep,
    but a unit that would keep its sign in every probe is skipped at the cost of one lookup: the
    fields h = sW + b and which units would flip are kept current, for the probes a flip touches
    only, by adding the row of W of the flipped unit. `fields (B, N)`, when given (float64, so
    thousands of additions do not drift), are those of `states` and are updated in place too.
    The loop is bound by per-call cost, which numpy has a fraction of torch's: it runs in numpy.
    """
    if fields is None:
        fields = states.double() @ weights.double() + bias.double()  # (B, N)
    w = weights.cpu().numpy()
    s = states.cpu().numpy()  # shares memory with a CPU `states`
    h = fields.cpu().numpy()
    unstable = _sign(h) != s  # (B, N) units that would change if updated now
    count = unstable.sum(0)  # (N,) probes in which each unit would change
    changed = np.zeros(s.shape[0], dtype=bool)
    for unit in order.tolist():
        if not count[unit]:
            continue
        probes = np.flatnonzero(unstable[:, unit])  # (P,)
        new = _sign(h[probes, unit]).astype(s.dtype)
        delta = new - s[probes, unit]  # (P,) ±2 (±1 from a masked 0)
        s[probes, unit] = new
        h[probes] += delta[:, None] * w[unit]  # W is symmetric: its row is its column
        rows = _sign(h[probes]) != s[probes]
        count += rows.sum(0) - unstable[probes].sum(0)
        unstable[probes] = rows
        changed[probes] = True
    if states.device.type != "cpu":
        states.copy_(torch.from_numpy(s))
        fields.copy_(torch.from_numpy(h))
    return torch.from_numpy(changed).to(states.device)


def _energy_from_fields(bias: Tensor, states: Tensor, fields: Tensor) -> Tensor:
    """E = -½ sᵀWs - bᵀs = -½ sᵀ(h + b) from the fields h = Ws + b: (B,), without a matrix product."""
    return (-0.5 * (states * (fields.to(states.dtype) + bias)).sum(-1))


def sync_step(weights: Tensor, bias: Tensor, states: Tensor) -> Tensor:
    """Update every unit at once from the same states: (B, N)."""
    return sign(states @ weights + bias)


class Hopfield(nn.Module, StoresPatterns):
    """Classical Hopfield network, Hopfield 1982, "Neural networks and physical systems with emergent
    collective computational abilities" (PNAS), with Hebbian storage (eq. 2 there) and sign units.

    `store(patterns)` sets w_ij = (1/N) Σₙ xᵢⁿ xⱼⁿ, w_ii = 0 (symmetric: the energy E = -½ sᵀWs - bᵀs
    cannot rise under asynchronous updates); b is the constant field `bias` on every unit. Units
    take s = +1 when their field Σⱼ wᵢⱼ sⱼ + bᵢ is >= 0, else -1. `update="async"` updates one unit
    at a time, in a fresh random order per sweep (`order="random"`) or in index order; a step is
    one sweep over all N units. `update="sync"` updates all units at once and stops at a fixed
    point or a 2-cycle. Updating stops when no probe changes, or after `max_steps` steps.
    The capacity with random patterns is α = K/N ≈ 0.138 (Amit, Gutfreund & Sompolinsky 1985).
    """

    families: ClassVar[tuple[str, ...]] = ("patterns",)
    weights: Tensor  # buffers
    bias: Tensor
    stored: Tensor

    def __init__(self, *, size: int, update: str = "async", order: str = "random", max_steps: int = 100,
                 bias: float = 0.0) -> None:
        super().__init__()
        if size < 2:
            raise ValueError(f"Hopfield: size must be >= 2, got {size}")
        if update not in UPDATES:
            raise ValueError(f"Hopfield: update must be one of {UPDATES}, got {update!r}")
        if order not in ORDERS:
            raise ValueError(f"Hopfield: order must be one of {ORDERS}, got {order!r}")
        if max_steps < 1:
            raise ValueError(f"Hopfield: max_steps must be >= 1, got {max_steps}")
        self.size, self.update, self.order, self.max_steps = size, update, order, max_steps
        self.register_buffer("weights", torch.zeros(size, size))  # W, (N, N)
        self.register_buffer("bias", torch.full((size,), float(bias)))  # b, (N,)
        self.register_buffer("stored", torch.tensor(False))

    @torch.no_grad()
    @in_float32  # w_ij = (1/N) Σ xᵢxⱼ rounded to 16 bits would shift every field
    def store(self, patterns: Tensor) -> None:
        """Store `patterns (K, N)` in {-1, +1} by the Hebbian rule (replacing what was stored)."""
        if patterns.shape[-1] != self.size:
            raise ValueError(f"Hopfield: patterns of {patterns.shape[-1]} units for size={self.size}")
        self.weights.copy_(hebbian(patterns.to(self.weights.dtype)))
        self.stored.fill_(True)

    @torch.no_grad()
    def forward(self, batch: dict[str, Tensor]) -> Retrieval:
        """Retrieve from `batch["probes"] (B, N)`; a net that has stored nothing stores `batch["patterns"]` first."""
        if not self.stored:
            self.store(batch["patterns"])
        return self.retrieve(batch["probes"])

    @torch.no_grad()
    @in_float32  # a field near 0 must keep its sign, and the energy must not rise by rounding
    def retrieve(self, probes: Tensor) -> Retrieval:
        """Run the updates from `probes (B, N)` until no probe changes or `max_steps`."""
        states = probes.to(self.weights.dtype).clone()  # (B, N); masked units (0) take a sign at their update
        if self.update == "sync":
            return self._retrieve_sync(states)
        fields = states.double() @ self.weights.double() + self.bias.double()  # (B, N), kept current by the sweeps
        energies = [_energy_from_fields(self.bias, states, fields)]
        steps = torch.zeros(states.shape[0], dtype=torch.long, device=states.device)
        active = torch.arange(states.shape[0], device=states.device)  # probes not yet at a fixed point
        for _ in range(self.max_steps):
            moving, moving_fields = states[active], fields[active]  # a probe a sweep left unchanged is fixed
            changed = async_sweep(self.weights, self.bias, moving, self._order(), moving_fields)
            states[active], fields[active] = moving, moving_fields
            steps[active] += changed
            latest = energies[-1].clone()
            latest[active] = _energy_from_fields(self.bias, moving, moving_fields)
            energies.append(latest)
            active = active[changed]
            if len(active) == 0:
                break
        return Retrieval(pred=states, energy=torch.stack(energies, dim=-1), steps=steps)

    def _retrieve_sync(self, states: Tensor) -> Retrieval:
        energies = [energy(self.weights, self.bias, states)]
        steps = torch.zeros(states.shape[0], dtype=torch.long, device=states.device)
        previous = states  # the states one step back, to see a 2-cycle
        for _ in range(self.max_steps):
            new = sync_step(self.weights, self.bias, states)
            changed = (new != states).any(-1) & (new != previous).any(-1)  # neither fixed nor in a 2-cycle
            previous, states = states, new
            steps += changed
            energies.append(energy(self.weights, self.bias, states))
            if not changed.any():
                break
        return Retrieval(pred=states, energy=torch.stack(energies, dim=-1), steps=steps)

    def _order(self) -> Tensor:
        if self.order == "fixed":
            return torch.arange(self.size)
        return torch.randperm(self.size)
