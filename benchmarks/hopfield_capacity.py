"""The Hopfield capacity curve: mean final overlap against the load α = K/N, classical vs modern.

Every point stores K = round(α·N) random ±1 patterns (`PatternsDataModule`, noise 0) and starts
one probe at each stored pattern; the classical net (`Hopfield`, async, random order) runs to
convergence, the modern one (`ModernHopfield`, dot score, β = 8) makes one update. The models
and metrics are the ones `train.py` runs, in-process and without Lightning, so the whole grid
takes minutes instead of one process per point:

    python benchmarks/hopfield_capacity.py                      # N = 1000, 15 loads, 5 seeds
    python benchmarks/hopfield_capacity.py --sizes 100 250 500 1000
    python benchmarks/hopfield_capacity.py --runs outputs/multirun/<date>_<time>   # from train.py runs

Writes `<out>/capacity.png` and `<out>/capacity.json`; prints a table and the wall time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import defaultdict
from pathlib import Path

import torch
from omegaconf import OmegaConf

from attnmem.attention import Dot
from attnmem.data.patterns import PatternsDataModule
from attnmem.evaluation import plots
from attnmem.models.hopfield import Hopfield
from attnmem.models.modern_hopfield import ModernHopfield
from attnmem.tasks.patterns import overlaps

LOADS = [round(0.02 * i, 2) for i in range(1, 16)]  # 0.02 .. 0.30
Curves = dict[str, dict[float, list[float]]]  # "classical N=1000" -> load -> overlap per seed


def one_point(network: str, size: int, load: float, seed: int) -> float:
    """Mean final overlap of one network, size, load and seed."""
    torch.manual_seed(seed)  # the async unit order
    dm = PatternsDataModule(size=size, load=load, noise=0.0, seed=seed, batch_size=size)
    dm.setup()
    batch = next(iter(dm.test_dataloader()))
    if network == "classical":
        net = Hopfield(size=size, update="async", order="random", max_steps=100)
    else:
        net = ModernHopfield(size=size, num_patterns=dm.num_patterns, score=Dot, beta=8.0, update_steps=1)
    net.store(batch["patterns"])
    out = net(batch)
    return float(overlaps(out.pred, batch["patterns"][batch["targets"]]).mean())


def simulate(sizes: list[int], loads: list[float], seeds: int) -> Curves:
    """Every network × size × load × seed, in-process."""
    curves: Curves = defaultdict(lambda: defaultdict(list))
    for network in ("classical", "modern"):
        for size in sizes:
            for load in loads:
                for seed in range(seeds):
                    curves[f"{network} N={size}"][load].append(one_point(network, size, load, seed))
    return curves


def from_runs(root: Path) -> Curves:
    """The curves from finished `train.py` runs under `root` (each job's metrics.json and config)."""
    curves: Curves = defaultdict(lambda: defaultdict(list))
    for metrics_path in sorted(root.rglob("metrics.json")):
        cfg = OmegaConf.load(metrics_path.parent / ".hydra" / "config.yaml")
        network = "classical" if cfg.model._target_.endswith(".Hopfield") else "modern"
        k = cfg.data.num_patterns if cfg.data.num_patterns is not None else round(cfg.data.load * cfg.data.size)
        overlap = json.loads(metrics_path.read_text())["test/overlap"]
        curves[f"{network} N={cfg.data.size}"][round(k / cfg.data.size, 4)].append(overlap)
    return curves


def report(curves: Curves, out_dir: Path) -> None:
    """Print the table; write the plot and the numbers."""
    loads = sorted({load for points in curves.values() for load in points})
    print("load  " + "  ".join(f"{name:>18}" for name in curves))
    for load in loads:
        cells = []
        for points in curves.values():
            values = points.get(load, [])
            cells.append(f"{statistics.mean(values):8.3f} ± {statistics.pstdev(values):.3f}" if values else " " * 18)
        print(f"{load:4.2f}  " + "  ".join(f"{c:>18}" for c in cells))
    summary = {name: [(load, statistics.mean(v), statistics.pstdev(v)) for load, v in sorted(points.items())]
               for name, points in curves.items()}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "capacity.json").write_text(json.dumps(summary, indent=2) + "\n")
    path = plots.save(plots.capacity_curve(summary), out_dir / "capacity.png")
    print(f"plot: {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000])
    parser.add_argument("--loads", type=float, nargs="+", default=LOADS)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--runs", type=Path, default=None, help="collect finished train.py runs instead")
    parser.add_argument("--out", type=Path, default=Path("outputs/benchmarks/hopfield_capacity"))
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    curves = from_runs(args.runs) if args.runs else simulate(args.sizes, args.loads, args.seeds)
    seconds = time.perf_counter() - start
    report(curves, args.out)
    print(f"wall time: {seconds:.1f} s")


if __name__ == "__main__":
    main()
