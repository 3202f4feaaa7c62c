"""A sweep's seed axis as replicas (`--replicas R`): the jobs folded into `replicas=R` runs, and their rows unfolded.

`fold` turns the jobs that differ only in `seed=` into one job per run of up to R consecutive seeds
(`seed=<first> replicas=<count>`); `unfold` gives back one report row per replica, with its seed and its
`replicas/<r>/` metrics, so the report and the scoreboard see what R separate jobs would have written.
"""

from __future__ import annotations

from typing import Any

from attnmem.core.errors import UserError

SEED = "seed="


def fold(jobs: list[list[str]], replicas: int, select: str | None = None) -> list[list[str]]:
    """The jobs with their seeds grouped into `replicas=R` jobs (with `replica_select=<select>` when given)."""
    if replicas < 1:
        raise UserError(f"--replicas {replicas}: expected an integer >= 1 (seeds trained in one process)")
    if replicas == 1:
        return jobs
    groups: dict[tuple[str, ...], list[int]] = {}
    for job in jobs:
        seeds = [o for o in job if o.startswith(SEED)]
        if not seeds or not seeds[0].removeprefix(SEED).lstrip("-").isdigit():
            raise UserError(f"--replicas {replicas}: the sweep's jobs need an integer seed=<n> to fold; "
                            f"this one has {' '.join(job)}")
        rest = tuple(o if not o.startswith(SEED) else SEED for o in job)
        groups.setdefault(rest, []).append(int(seeds[0].removeprefix(SEED)))
    folded = []
    for rest, firsts in groups.items():
        for first, count in _runs(sorted(firsts), replicas):
            job = [f"{SEED}{first}" if o == SEED else o for o in rest] + [f"replicas={count}"]
            folded.append(job + ([f"replica_select={select}"] if select and count > 1 else []))
    return folded


def _runs(seeds: list[int], most: int) -> list[tuple[int, int]]:
    # consecutive seeds in runs of at most `most`: (first seed, count)
    runs: list[tuple[int, int]] = []
    for seed in seeds:
        if runs and seed == runs[-1][0] + runs[-1][1] and runs[-1][1] < most:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((seed, 1))
    return runs


def unfold(row: dict[str, Any], metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per replica of a `replicas=R` job (its seed advanced by r), or the job's own row."""
    count = metrics.get("replicas", 1)
    if count <= 1:
        return [row | metrics]
    shared = {k: v for k, v in metrics.items() if "/" not in k}  # epoch, global_step, train_seconds, ...
    rows = []
    for r in range(count):
        prefix = f"replicas/{r}/"
        own = {k.removeprefix(prefix): v for k, v in metrics.items() if k.startswith(prefix)}
        seed = {"seed": str(int(row["seed"]) + r)} if str(row.get("seed", "")).lstrip("-").isdigit() else {}
        rows.append(row | seed | shared | own | {"replica": r})
    return rows


def seeds_in(job: list[str]) -> int:
    """How many seeds a job trains: its `replicas=`, else 1."""
    return next((int(o.removeprefix("replicas=")) for o in job if o.startswith("replicas=")), 1)
