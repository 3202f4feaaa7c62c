"""Record hflayers' outputs for `tests/blocks/test_hopfield_parity.py`: state dicts, inputs, outputs, ξ and gradients.

For each configuration in `CONFIGS` it builds the hflayers module (github.com/ml-jku/hopfield-layers, not on
PyPI and never a dependency of attnmem), seeds its weights and inputs, and saves what it computes to
`tests/fixtures/hflayers_parity.pt`; the test rebuilds attnmem's layer with the same arguments, loads the
weights through `from_hflayers_state_dict` and compares, without hflayers. Run it outside the project's
environment (hflayers needs only torch):

    git --git-dir=<fetched hopfield-layers> archive HEAD | tar -x -C <hopfield-layers src>
    PYTHONPATH=src:<hopfield-layers src> python benchmarks/hflayers_parity.py [--check]

`--check` also builds attnmem's layers here and prints the largest deviation of each configuration
(scaled as the test scales it, and absolute).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import torch

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "hflayers_parity.pt"

# name: (class, constructor arguments, input shapes (batch first unless said), padding, association mask)
CONFIGS: dict[str, dict[str, Any]] = {
    "pooling": dict(cls="HopfieldPooling", kwargs=dict(input_size=16, quantity=2),
                    inputs=[(3, 7, 16)], padding=(3, 7), association=None),
    "heads": dict(cls="Hopfield", kwargs=dict(input_size=16, num_heads=4, update_steps_max=3, update_steps_eps=1e-5),
                  inputs=[(3, 6, 16)], padding=None, association=(6, 6)),
    "projections": dict(cls="Hopfield", kwargs=dict(
        input_size=12, hidden_size=6, stored_pattern_size=10, pattern_projection_size=8, pattern_size=5,
        num_heads=2, output_size=7, scaling=0.5, normalize_hopfield_space=True,
        normalize_hopfield_space_affine=True, add_zero_association=True),
        inputs=[(3, 5, 10), (3, 4, 12), (3, 5, 8)], padding=(3, 5), association=None),
    "lookup": dict(cls="HopfieldLayer", kwargs=dict(
        input_size=16, quantity=9, num_heads=2, lookup_weights_as_separated=True, association_activation="tanh"),
        inputs=[(3, 5, 16)], padding=None, association=None),
    "static_state_seq_first": dict(cls="Hopfield", kwargs=dict(
        input_size=8, hidden_size=8, state_pattern_as_static=True, batch_first=False, update_steps_max=2,
        update_steps_eps=1e-5, input_bias=False),
        inputs=[(6, 3, 8), (4, 3, 8), (6, 3, 8)], padding=(3, 6), association=None),
}


def _masks(config: dict[str, Any], generator: torch.Generator, heads: int) -> tuple[Any, Any]:
    padding = association = None
    if config["padding"] is not None:
        padding = torch.zeros(config["padding"], dtype=torch.bool)
        padding[0, -2:] = True  # the first example's last two stored patterns are padding
    if config["association"] is not None:
        association = torch.rand(config["association"], generator=generator) < 0.3
        association.fill_diagonal_(False)  # every state may associate with one pattern at least
    return padding, association


def record(name: str, config: dict[str, Any], hflayers: Any) -> dict[str, Any]:
    """Build the hflayers module of `config`, run it forward and backward, return what the test needs."""
    generator = torch.Generator().manual_seed(sum(map(ord, name)))
    torch.manual_seed(sum(map(ord, name)))
    module = getattr(hflayers, config["cls"])(**config["kwargs"])
    with torch.no_grad():  # away from hflayers' near-identity initialisation, so every weight matters
        for param in module.parameters():
            param.add_(0.3 * torch.randn(param.shape, generator=generator))
    inputs = [torch.randn(shape, generator=generator).requires_grad_() for shape in config["inputs"]]
    heads = config["kwargs"].get("num_heads", 1)
    padding, association = _masks(config, generator, heads)
    data = inputs[0] if len(inputs) == 1 else tuple(inputs)
    output = module(data, stored_pattern_padding_mask=padding, association_mask=association)
    weights = torch.randn(output.shape, generator=generator)
    (output * weights).sum().backward()
    return dict(cls=config["cls"], kwargs=config["kwargs"],
                state_dict={k: v.detach().clone() for k, v in module.state_dict().items()},
                inputs=[x.detach() for x in inputs], padding=padding, association=association,
                output=output.detach(), output_weights=weights,
                xi=module.get_association_matrix(data, stored_pattern_padding_mask=padding,
                                                 association_mask=association),
                input_grads=[x.grad for x in inputs],
                param_grads={k: p.grad for k, p in module.named_parameters() if p.grad is not None})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=FIXTURE)
    parser.add_argument("--check", action="store_true", help="compare attnmem's layers here too")
    args = parser.parse_args()
    import hflayers  # noqa: PLC0415 - only this script needs it, from PYTHONPATH

    records = {name: record(name, config, hflayers) for name, config in CONFIGS.items()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(records, args.out, _use_new_zipfile_serialization=False)  # the zip format costs ~0.5 KB a tensor
    print(f"{args.out}: {args.out.stat().st_size} bytes, configurations {', '.join(records)}")
    if args.check:
        import sys  # noqa: PLC0415

        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "blocks"))
        from test_hopfield_parity import deviations  # noqa: PLC0415

        for name, rec in records.items():
            scaled, absolute = deviations(rec), deviations(rec, absolute=True)
            print(name, {k: f"{scaled[k]:.1e} (absolute {absolute[k]:.1e})" for k in scaled})


if __name__ == "__main__":
    main()
