"""Replica-steps/s of `replicas=R` (one process, one batched step) vs R single runs of the same steps, in one process.

Both sides are built by the run's own `setup` from the composed config: one family module (`replicas=1`) and
the `Replicas` module of R. Each side trains `--steps` steps on its own loader (the replicas each draw their
own batches), with the optimizer of the run (no clipping: the default configs clip nothing); a side's time covers its
data, forward, backward and optimizer steps. Rounds interleave (single, replicas, single, ...) and the best
of each side is kept. The ratio is R x (replica steps/s) / (single steps/s): above 1, R replicas cost less
than R runs. Targets on a 2-core CPU: MemN2N (bAbI task-1 shapes) R=10 >= 1.5, NTM copy R=4 >= 1.25.

    python benchmarks/replicas.py                 # both cases
    python benchmarks/replicas.py --case ntm --replicas 1 10 64   # on a GPU: add trainer=gpu
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import lightning as L
import torch
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from omegaconf import open_dict

from attnmem.runtime.run import setup

CONF = Path(__file__).resolve().parents[1] / "conf"
CASES = {
    "memn2n": (["model=memn2n", "data=babi_gen"], 10),  # 50 memory slots
    "memn2n10": (["model=memn2n", "data=babi_gen", "data.memory_size=10"], 10),  # task 1's own size (fit_memory)
    "ntm": (["model=ntm", "data=copy", "data.batch_size=16"], 4),
}


def build(out_dir: Path, overrides: list[str], replicas: int) -> tuple[L.LightningModule, Any, torch.optim.Optimizer]:
    """The run's module, its training loader and its optimizer, for `replicas` replicas."""
    overrides = [*overrides, f"replicas={replicas}", "print_config=none"]
    cfg = compose("train", overrides=overrides, return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(out_dir)
    HydraConfig.instance().set_config(cfg)
    datamodule, module, _ = setup(cfg)
    optimizer = module.configure_optimizers()
    optimizer = optimizer["optimizer"] if isinstance(optimizer, dict) else optimizer
    return module, datamodule.train_dataloader(), optimizer


def steps_per_second(module: L.LightningModule, loader: Any, optimizer: torch.optim.Optimizer, steps: int,
                     device: torch.device) -> float:
    """Training steps/s of `module` over `steps` batches of `loader` (repeated as needed)."""
    module.to(device).train()
    done, start = 0, time.perf_counter()
    while done < steps:
        for batch in loader:
            batch = L.pytorch.utilities.move_data_to_device(batch, device)
            loss = module.training_step(batch, done)
            optimizer.zero_grad()
            loss.backward()
            module.on_after_backward()
            optimizer.step()
            done += 1
            if done == steps:
                break
    if device.type == "cuda":
        torch.cuda.synchronize()
    return steps / (time.perf_counter() - start)


def main() -> None:
    """Print each case's steps/s for one run and for R replicas, and the replica-steps/s ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=sorted(CASES), nargs="*", default=sorted(CASES))
    parser.add_argument("--replicas", type=int, nargs="*", help="R values (default: the case's target R)")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    with TemporaryDirectory() as tmp, initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        for case in args.case:
            overrides, target_r = CASES[case]
            single = build(Path(tmp) / case / "single", overrides, 1)
            for r in args.replicas or [target_r]:
                many = build(Path(tmp) / case / f"r{r}", overrides, r) if r > 1 else single
                best_single = best_many = 0.0
                for _ in range(args.rounds):
                    best_single = max(best_single, steps_per_second(*single, args.steps, device))
                    best_many = max(best_many, steps_per_second(*many, args.steps, device))
                ratio = r * best_many / best_single
                print(f"{case:7s} R={r:3d}  single {best_single:7.1f} steps/s   replicas {best_many:7.1f} steps/s  "
                      f"replica-steps/s ratio {ratio:5.2f}  ({args.device}, threads={args.threads}, "
                      f"best of {args.rounds} interleaved rounds of {args.steps} steps)")


if __name__ == "__main__":
    main()
