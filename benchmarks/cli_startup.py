"""Process wall time of the command line: `--help`, an unknown option, `--cfg job` and `debug=fdr`, interleaved
with `python -c "import torch"` (the floor of anything that trains) and `python -c "import hydra"`.

Each round runs every command once, in turn; the median of the rounds is printed per command, with its
ratio to `import torch`. Run it on a quiet machine (it prints the load average before and after).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

ROOT = Path(__file__).resolve().parents[1]


def commands(run_dir: Path) -> dict[str, list[str]]:
    """The commands timed, by label."""
    py = sys.executable
    return {
        "import torch": [py, "-c", "import torch"],
        "import hydra": [py, "-c", "import hydra"],
        "train.py --help": [py, "train.py", "--help"],
        "train.py model=nope (error)": [py, "train.py", "model=nope"],
        "train.py --cfg job": [py, "train.py", "model=ntm", "--cfg", "job"],
        "train.py debug=fdr": [py, "train.py", "debug=fdr", "trainer.enable_progress_bar=false",
                               f"hydra.run.dir={run_dir}/fdr"],
    }


def wall(argv: list[str]) -> float:
    """Seconds one process takes, start to exit."""
    start = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def main() -> None:
    """Print the median wall time of each command over interleaved rounds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    with TemporaryDirectory() as tmp:
        timed = {label: [] for label in commands(Path(tmp))}
        for i in range(args.rounds):
            for label, argv in commands(Path(tmp) / str(i)).items():
                timed[label].append(wall(argv))
    floor = statistics.median(timed["import torch"])
    print(f"{'command':32} {'median s':>9} {'vs import torch':>16}")
    for label, seconds in timed.items():
        median = statistics.median(seconds)
        print(f"{label:32} {median:9.2f} {median / floor:15.2f}x")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
