"""The capacity of the hetero-associative memories: exact recall of y against the number of stored pairs K.

Every point stores K random ±1 pairs (x of N units, y of M; `PatternsDataModule` with `partner_size`)
and recalls y from `--probes` probes per pair, each its stored x with 10% of its bits flipped
(`--noise`); recall is the fraction of probes whose y comes back exactly (`test/recall` of a
`train.py` run). The capacity is the largest K at which recall, averaged over the seeds, is still
>= 99%; every smaller K must hold it too. The models and metric are the ones `train.py` runs,
in-process and without Lightning:

    python benchmarks/bam_capacity.py                            # N = M = 100, K = 1..20, 5 seeds
    python benchmarks/bam_capacity.py --runs outputs/multirun/<date>_<time>   # from train.py runs

Writes `<out>/capacity.png` and `<out>/capacity.json`; prints a table, the capacities and the wall time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
from omegaconf import OmegaConf

from attnmem.data.patterns import PatternsDataModule
from attnmem.evaluation import plots
from attnmem.models.bam import BAM
from attnmem.models.hetero_associative import HeteroAssociative

LEVEL = 0.99  # the recall that defines the capacity
Curves = dict[str, dict[int, list[float]]]  # "BAM" -> K -> recall per seed


def one_point(network: str, size: int, partner_size: int, pairs: int, *, noise: float, probes: int, seed: int) -> float:
    """Exact recall of y of one network, K and seed."""
    dm = PatternsDataModule(
        size=size,
        num_patterns=pairs,
        partner_size=partner_size,
        noise=noise,
        probes_per_pattern=probes,
        seed=seed,
        batch_size=pairs * probes,
    )
    dm.setup()
    batch = next(iter(dm.test_dataloader()))
    net = BAM if network == "BAM" else HeteroAssociative
    out = net(size=size, partner_size=partner_size)(batch)
    return float((out.pred == batch["pairs"][batch["targets"]]).all(-1).float().mean())


def simulate(args: argparse.Namespace) -> Curves:
    """Every network × K × seed, in-process."""
    curves: Curves = defaultdict(lambda: defaultdict(list))
    for network in ("BAM", "hetero-associative"):
        for pairs in range(1, args.max_pairs + 1):
            for seed in range(args.seeds):
                curves[network][pairs].append(
                    one_point(
                        network, args.size, args.partner_size, pairs, noise=args.noise, probes=args.probes, seed=seed
                    )
                )
    return curves


def from_runs(root: Path) -> Curves:
    """The curves from finished `train.py` runs under `root` (each job's metrics.json and config)."""
    curves: Curves = defaultdict(lambda: defaultdict(list))
    for metrics_path in sorted(root.rglob("metrics.json")):
        cfg = OmegaConf.load(metrics_path.parent / ".hydra" / "config.yaml")
        network = "BAM" if cfg.model._target_.endswith(".BAM") else "hetero-associative"
        curves[network][cfg.data.num_patterns].append(json.loads(metrics_path.read_text())["test/recall"])
    return curves


def capacity(points: dict[int, list[float]]) -> int:
    """The largest K whose mean recall, and that of every smaller K, is >= LEVEL (0 when K = 1 fails)."""
    held = 0
    for pairs in sorted(points):
        if statistics.mean(points[pairs]) < LEVEL:
            break
        held = pairs
    return held


def figure(curves: Curves, title: str) -> plt.Figure:
    """Mean recall ± std over seeds against K, one line per network, the 99% level dashed."""
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    for name, points in curves.items():
        ks = sorted(points)
        ax.errorbar(
            ks,
            [statistics.mean(points[k]) for k in ks],
            yerr=[statistics.pstdev(points[k]) for k in ks],
            marker="o",
            markersize=3,
            capsize=2,
            label=f"{name} (capacity {capacity(points)})",
        )
    ax.axhline(LEVEL, color="gray", linestyle="--", label="99% recall")
    ax.set_xlabel("stored pairs K")
    ax.set_ylabel("exact recall of y")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def report(curves: Curves, out_dir: Path, title: str) -> None:
    """Print the table and the capacities; write the plot and the numbers."""
    print("   K  " + "  ".join(f"{name:>18}" for name in curves))
    for pairs in sorted({k for points in curves.values() for k in points}):
        cells = [
            f"{statistics.mean(p[pairs]):8.4f} ± {statistics.pstdev(p[pairs]):.4f}" if pairs in p else " " * 18
            for p in curves.values()
        ]
        print(f"{pairs:4d}  " + "  ".join(f"{c:>18}" for c in cells))
    summary = {
        name: {"capacity": capacity(p), "recall": {k: statistics.mean(v) for k, v in sorted(p.items())}}
        for name, p in curves.items()
    }
    for name, values in summary.items():
        print(f"capacity {name}: K = {values['capacity']} (recall >= {LEVEL:.0%})")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "capacity.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"plot: {plots.save(figure(curves, title), out_dir / 'capacity.png')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100, help="N, units of x")
    parser.add_argument("--partner-size", type=int, default=100, help="M, units of y")
    parser.add_argument("--max-pairs", type=int, default=20)
    parser.add_argument("--noise", type=float, default=0.1, help="fraction of a probe's bits flipped")
    parser.add_argument("--probes", type=int, default=20, help="probes per stored pair")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--runs", type=Path, default=None, help="collect finished train.py runs instead")
    parser.add_argument("--out", type=Path, default=Path("outputs/benchmarks/bam_capacity"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    start = time.perf_counter()
    curves = from_runs(args.runs) if args.runs else simulate(args)
    seconds = time.perf_counter() - start
    title = f"N = {args.size}, M = {args.partner_size}, {args.noise:.0%} of x flipped, {args.seeds} seeds"
    report(curves, args.out, title if not args.runs else f"train.py runs under {args.runs}")
    print(f"wall time: {seconds:.1f} s")


if __name__ == "__main__":
    main()
