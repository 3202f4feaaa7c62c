"""Wall time of a paper protocol's seed axis as `replicas=10` jobs vs one job per seed, end to end.

The MemN2N bAbI 1k protocol (`sweeps/paper/memn2n_babi1k.yaml`: tasks x 10 seeds) run by the sweep runner
twice, in this process with Hydra's basic launcher (one import for all jobs either way): once as it is
(tasks x 10 jobs), once with `--replicas 10` (one job per task). Every job trains, validates, tests,
checkpoints and draws its figures as a real run does. `--tasks` and `--epochs` shrink the protocol to fit
the machine (the full one is 20 tasks and the recipe's 120 epochs); the target ratio is >= 2. The bAbI 1k
files are read from `--data-dir`, by default `babi/en` in the data folder (`$ATTNMEM_DATA_DIR`, else `data/`),
where `attnmem-data fetch babi` places them.

    python benchmarks/replicas_protocol.py --tasks 2 --epochs 20
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from tempfile import TemporaryDirectory

import torch
import yaml

from attnmem.core import packaged
from attnmem.data.catalog import data_dir
from attnmem.tools import sweep

ROOT = Path(__file__).resolve().parents[1]
PROTOCOL = packaged.sweeps_dir() / "paper" / "memn2n_babi1k.yaml"


def shrunk(out: Path, tasks: int) -> Path:
    """The protocol's sweep file with its first `tasks` tasks (its seeds unchanged), written into `out`."""
    spec = yaml.safe_load(PROTOCOL.read_text())
    spec["parameters"]["data.tasks"]["values"] = spec["parameters"]["data.tasks"]["values"][:tasks]
    spec["program"] = str(ROOT / spec["program"])
    path = out / PROTOCOL.name
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def seconds(path: Path, extra: list[str], replicas: int) -> float:
    """Wall time of the sweep of `path`, its seeds folded into `replicas` per job."""
    start = time.perf_counter()
    sweep.run(path, extra=extra, replicas=replicas)
    return time.perf_counter() - start


def main() -> None:
    """Run both forms of the shrunk protocol and print their wall times and ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="the bAbI 1k folder (qaN_*_train.txt); default: babi/en in the data folder "
                        "($ATTNMEM_DATA_DIR, else data/)")
    parser.add_argument("--tasks", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=20)
    args = parser.parse_args()
    folder = args.data_dir or data_dir() / "babi" / "en"
    if not any(folder.glob("qa*_train.txt")):
        raise SystemExit(f"error: {folder}: no bAbI 1k training files (qaN_*_train.txt): run `attnmem-data fetch "
                         "babi`, or pass --data-dir")
    torch.set_num_threads(1)
    with TemporaryDirectory() as tmp:
        path = shrunk(Path(tmp), args.tasks)
        extra = [f"data.source.data_dir={folder.resolve()}", f"trainer.max_epochs={args.epochs}",
                 f"callbacks.linear_start.epochs={args.epochs // 4}", "trainer.enable_progress_bar=false",
                 f"paths.log_dir={tmp}"]
        jobs = seconds(path, extra, 1)
        folded = seconds(path, extra, 10)
    print(f"memn2n_babi1k, {args.tasks} tasks x 10 seeds, {args.epochs} epochs (linear start {args.epochs // 4})")
    print(f"  {args.tasks * 10} jobs of one seed     {jobs:7.0f} s")
    print(f"  {args.tasks} jobs of 10 replicas    {folded:7.0f} s")
    print(f"  wall-time ratio {jobs / folded:.2f}  (target >= 2)")


if __name__ == "__main__":
    main()
