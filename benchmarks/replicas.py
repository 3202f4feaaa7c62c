"""Replica-steps/s of `replicas=R` (one process, one batched step) vs R single runs of the same steps, in one process.

Both sides are built by the run's own `setup` from the composed config: one family module (`replicas=1`) and
the `Replicas` module of R. Each side trains `--steps` steps on its own loader (the replicas each draw their
own batches), with the optimizer of the run (no clipping: the default configs clip nothing); a side's time covers its
data, forward, backward and optimizer steps, in CPU time of the process on a CPU (other load counts less). Rounds
pair a single run's steps with the replicas'; the ratio printed is the median of the rounds' (their range after it).
The ratio is R x (replica steps/s) / (single steps/s): above 1, R replicas cost less
than R runs. Targets on a 2-core CPU: MemN2N (bAbI task-1 shapes) R=10 >= 1.5, NTM copy R=4 >= 1.25.

`--bound` also times one run at batch R x B (B the case's batch size): R replicas do at least that work, so
R x its steps/s over the single run's is the most any batched replica step can reach on the device.

    python benchmarks/replicas.py                 # every case
    python benchmarks/replicas.py --case ntm --replicas 1 10 64   # on a GPU: add trainer=gpu
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import lightning as L
import torch
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from omegaconf import open_dict

from attnmem.core import packaged
from attnmem.runtime.run import setup

CONF = packaged.conf_dir()  # the packaged configs (src/attnmem/conf)
CASES = {
    "memn2n": (["model=memn2n", "data=babi_gen"], 10),  # 50 memory slots
    "memn2n10": (["model=memn2n", "data=babi_gen", "data.memory_size=10"], 10),  # task 1's own size (fit_memory)
    # generated task 2: stories of different lengths, so the replicas' batches differ in shape (padded to one)
    "memn2n_task2": (["model=memn2n", "data=babi_gen", "data.tasks=[2]"], 10),
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
    clock = time.process_time if device.type == "cpu" else time.perf_counter  # CPU: other load counts less
    done, start = 0, clock()
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
    return steps / (clock() - start)


def bound(out_dir: Path, overrides: list[str], replicas: int, single: float, args: argparse.Namespace,
          device: torch.device) -> float:
    """R x the steps/s of one run at batch R x B over `single`, the single run's steps/s at batch B."""
    batch = compose("train", overrides=overrides).data.batch_size
    wide = build(out_dir, [*overrides, f"data.batch_size={replicas * batch}"], 1)
    best = max(steps_per_second(*wide, args.steps, device) for _ in range(args.rounds))
    return replicas * best / single


def main() -> None:
    """Print each case's steps/s for one run and for R replicas, and the replica-steps/s ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=sorted(CASES), nargs="*", default=sorted(CASES))
    parser.add_argument("--replicas", type=int, nargs="*", help="R values (default: the case's target R)")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--bound", action="store_true", help="also time one run at batch R x B (the ceiling)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    with TemporaryDirectory() as tmp, initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        for case in args.case:
            overrides, target_r = CASES[case]
            single = build(Path(tmp) / case / "single", overrides, 1)
            for r in args.replicas or [target_r]:
                many = build(Path(tmp) / case / f"r{r}", overrides, r) if r > 1 else single
                rounds = [(steps_per_second(*single, args.steps, device), steps_per_second(*many, args.steps, device))
                          for _ in range(args.rounds)]
                ratios = sorted(r * m / s for s, m in rounds)
                best_single, best_many = max(s for s, _ in rounds), max(m for _, m in rounds)
                print(f"{case:12s} R={r:3d}  single {best_single:7.1f} steps/s   replicas {best_many:7.1f} steps/s  "
                      f"replica-steps/s ratio {statistics.median(ratios):5.2f} ({ratios[0]:.2f}-{ratios[-1]:.2f})  "
                      f"({args.device}, threads={args.threads}, median of {args.rounds} paired rounds of "
                      f"{args.steps} steps)")
                if args.bound and r > 1:
                    ceiling = bound(Path(tmp) / case / f"wide{r}", overrides, r, best_single, args, device)
                    print(f"{'':12s} R={r:3d}  bound {ceiling:5.2f}: R x steps/s of one run at batch R x B over single")


if __name__ == "__main__":
    main()
