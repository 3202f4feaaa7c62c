"""Issue 53's GPU clause: MQAR (256, 16) at width 128, attention and one other mixer, a time cap each.

Each mixer trains as `python train.py experiment=mqar_<mixer>` with the single-valued parameters of
sweeps/paper/zoology_figure2_256x16.yaml (Zoology's Figure 2 setting of the cell: `trainer=gpu`, vocabulary 8192,
100k/3k/3k examples, batch 256, the head tied to the token table, no random fillers, AdamW with weight decay 0.1), at
width 128 and the recipe's learning rate, stopped by `trainer.max_time` (or at 99% validation accuracy, the recipes'
early stop). Printed per mixer: training steps/s (`global_step / train_seconds` of its metrics.json), validation and
test accuracy at the cap, and the time of the whole run (data, validation and test included). Without a CUDA GPU it
says so and exits 0.

    python benchmarks/gpu_recall.py [--minutes 4] [--mixers attention delta_rule] [--json out.json]

Figures: docs/recall.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from attnmem.core import packaged
from attnmem.tools.sweep_spec import args_no_hyphens, load_spec

ROOT = Path(__file__).resolve().parent.parent  # where train.py is
GRID = packaged.sweeps_dir() / "paper" / "zoology_figure2_256x16.yaml"  # Zoology's Figure 2 grid at (256, 16)


def cell() -> list[str]:
    """The grid's overrides that have one value (the task, data, optimizer and trainer), at width 128."""
    spec = load_spec(GRID)
    fixed = {name: param["value"] for name, param in spec["parameters"].items() if "value" in param}
    return [*args_no_hyphens(fixed), "model.d_model=128", "trainer.enable_progress_bar=false"]


def train(mixer: str, minutes: float, out_dir: Path) -> dict[str, Any]:
    """Train `experiment=mqar_<mixer>` on the cell for at most `minutes`; its figures from metrics.json."""
    cap = time.strftime("00:%H:%M:%S", time.gmtime(round(60 * minutes)))
    command = [sys.executable, "train.py", f"experiment=mqar_{mixer}", *cell(), f"++trainer.max_time={cap}",
               f"hydra.run.dir={out_dir}"]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"exit {done.returncode}: {last}", "seconds": seconds}
    metrics = json.loads((out_dir / "metrics.json").read_text())
    return {
        "steps": metrics["global_step"],
        "steps_per_s": metrics["global_step"] / metrics["train_seconds"],
        "val_acc": metrics["val/acc"],
        "test_acc": metrics["test/acc"],
        "seconds": seconds,
    }


def main() -> int:
    """Train each mixer under the cap, print a row each, optionally write the figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=4.0, help="the cap of each run's training")
    parser.add_argument("--mixers", nargs="+", default=["attention", "delta_rule"])
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("gpu_recall: no CUDA GPU is visible (torch.cuda.is_available() is False); nothing to measure")
        return 0
    device = f"{torch.cuda.get_device_name()} (torch {torch.__version__}, CUDA {torch.version.cuda})"
    print(f"gpu_recall on {device}: MQAR (256, 16), width 128, a {args.minutes:g}-minute cap per mixer")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mixer in args.mixers:
            results[mixer] = figures = train(mixer, args.minutes, Path(tmp) / mixer)
            if "error" in figures:
                print(f"{mixer:18s} {figures['error']}")
                continue
            print(f"{mixer:18s} {figures['steps']:6d} steps, {figures['steps_per_s']:6.1f} steps/s | "
                  f"val {100 * figures['val_acc']:5.1f}% test {100 * figures['test_acc']:5.1f}% | "
                  f"whole run {figures['seconds']:.0f} s", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"device": device, "minutes": args.minutes, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
