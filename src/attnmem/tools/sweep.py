"""Run a W&B sweep file (`sweeps/*.yaml`) locally as Hydra jobs, and summarise a finished sweep.

    python -m attnmem.tools.sweep memn2n_hops [--dry-run] [--launcher joblib] [--resume DIR] [key=value ...]
    python -m attnmem.tools.sweep paper/memn2n_babi1k --replicas 10   # each task's 10 seeds in one job
    python -m attnmem.tools.sweep my_sweep.yaml                       # a file of yours
    python -m attnmem.tools.sweep report DIR | export.csv --sweep sweeps/X.yaml

`grid` runs the grid, `random` `run_cap` points drawn (seeded) here, `bayes` Hydra's Optuna sweeper with
`run_cap` trials. Jobs go through Hydra's launcher (the basic one runs them in this process: one import
for the whole sweep) into `outputs/sweeps/<name>/<date>_<time>/<job>/`, with the overrides `wandb agent`
would pass (`${args_no_hyphens}`), so a local job and a W&B job run the same config.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.plugins import Plugins
from hydra.core.utils import JobStatus
from hydra.errors import CompactHydraException
from hydra.types import HydraContext, RunMode
from hydra.utils import get_class, to_absolute_path
from omegaconf import DictConfig, OmegaConf

from attnmem.core import atomic, compat, packaged
from attnmem.core.errors import UserError
from attnmem.replicas import sweep as sweep_replicas
from attnmem.runtime import cli, extras
from attnmem.tools import protocol, scoreboard, sweep_report, sweep_spec
from attnmem.tools.sweep_spec import (
    args_no_hyphens,
    first_point,
    grid_points,
    load_spec,
    optuna_overrides,
    random_points,
)

# attnmem.train's @hydra.main(config_path="pkg://attnmem.conf", config_name="train"): the packaged configs
CONFIG_NAME = "train"
SPEC_FILE = "sweep.yaml"
_ABSENT = object()


def check_names(spec: dict[str, Any], path: Path, extra: list[str]) -> None:
    """Every parameter must be a config group or a key of the composed config (W&B's names have no Hydra +/~)."""
    loader = GlobalHydra.instance().config_loader()
    groups = {k: v for k, v in first_point(spec).items() if loader.get_group_options(k)}
    try:  # the groups' choices decide which keys exist; a bad extra override is reported with the jobs
        cfg = compose(CONFIG_NAME, overrides=args_no_hyphens(groups) + extra)
    except Exception:  # noqa: BLE001 - check_jobs names the failing job with Hydra's message
        return
    for name in spec["parameters"]:
        if name.startswith("hydra") or name in groups:
            continue
        if OmegaConf.select(cfg, name, default=_ABSENT) is _ABSENT:
            raise UserError(f"{path}: parameters.{name}: not a config key or group of {CONFIG_NAME}.yaml")


def check_jobs(jobs: list[list[str]], path: Path) -> None:
    """Compose every job with Hydra's compose API, so a bad value stops the sweep before any job runs; a job
    that differs from a composed one only in an integer `seed=` composes as it did, and is skipped."""
    composed = set()
    for i, job in enumerate(jobs):
        key = tuple("seed=<int>" if o.startswith("seed=") and o[5:].lstrip("-").isdigit() else o for o in job)
        if key in composed:
            continue
        composed.add(key)
        try:
            compose(CONFIG_NAME, overrides=job)
        except Exception as err:  # Hydra raises several types; all mean this job's overrides do not compose
            text = cli.one_line(err) if isinstance(err, CompactHydraException) else str(err).splitlines()[0]
            raise UserError(f"{path}: job {i} ({' '.join(job)}): {text}") from None


def monitored_metric(job: list[str]) -> dict[str, str]:
    """The metric a job monitors (`monitor`, else its family's) as a sweep metric: what ranks a file without one."""
    cfg = compose(CONFIG_NAME, overrides=job)
    data_cls: Any = get_class(cfg.data._target_)  # a datamodule class: its family_module names the family's task
    task: Any = get_class(data_cls.family_module)  # a FamilyModule subclass (monitor, mode)
    mode = cfg.get("mode") or task.mode
    return {"name": cfg.get("monitor") or task.monitor, "goal": "maximize" if mode == "max" else "minimize"}


def train_job(cfg: DictConfig) -> Any:
    """One sweep job: what train.py's main does (a picklable function, so joblib can send it)."""
    return cli.guarded(cfg, "train")


def _launch(jobs: list[list[str]], base: list[str]) -> list[Any]:
    # Hydra's own multirun without its sweeper: our job list is explicit (a sampled or partly done grid),
    # and a failed job is recorded, not raised, so the others still run
    hydra = GlobalHydra.instance().hydra
    assert hydra is not None  # main runs the jobs inside initialize_config_dir
    cfg = hydra.compose_config(CONFIG_NAME, overrides=base, run_mode=RunMode.MULTIRUN, with_log_configuration=True)
    context = HydraContext(config_loader=hydra.config_loader, callbacks=compat.hydra_callbacks(cfg))
    launcher = Plugins.instance().instantiate_launcher(hydra_context=context, task_function=train_job, config=cfg)
    return list(launcher.launch(jobs, initial_job_idx=0)) if jobs else []


def _optuna(spec: dict[str, Any], base: list[str], extra: list[str], seed: int, out: Path) -> str | None:
    goal = spec["metric"]["goal"]
    overrides = (
        optuna_overrides(spec)
        + extra
        + base
        + [
            "hydra/sweeper=optuna",
            f"hydra.sweeper.n_trials={spec['run_cap']}",
            "hydra.sweeper.n_jobs=1",
            f"hydra.sweeper.direction={goal}",
            f"hydra.sweeper.sampler.seed={seed}",
            f"hydra.sweeper.study_name={spec['name']}",
            f"monitor={spec['metric']['name']}",
            f"mode={'max' if goal == 'maximize' else 'min'}",
        ]
    )
    hydra = GlobalHydra.instance().hydra
    assert hydra is not None  # main runs the study inside initialize_config_dir
    try:
        hydra.multirun(CONFIG_NAME, train_job, overrides)
    except Exception as err:  # the Optuna sweeper stops at a failed trial; the report lists what finished
        return f"the Optuna study stopped at a failed trial: {str(err).splitlines()[0]}; start a new sweep"
    trials = sorted(int(d.name) for d in out.iterdir() if d.name.isdigit())
    return _failed(out, trials, "start a new sweep (a bayes sweep cannot be resumed)")


def sweep_dir(spec: dict[str, Any], cfg: DictConfig) -> Path:
    """`<paths.log_dir>/sweeps/<name>/<date>_<time>`."""
    return (
        Path(to_absolute_path(cfg.paths.log_dir))
        / "sweeps"
        / spec["name"]
        / datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    )


def plan(spec: dict[str, Any], seed: int, extra: list[str]) -> list[list[str]]:
    """The jobs of a grid (its first `run_cap` points, as W&B) or random sweep as override lists (the overrides on
    the command line last)."""
    points = grid_points(spec)[: spec.get("run_cap")] if spec["method"] == "grid" else random_points(spec, seed)
    return [args_no_hyphens(p) + extra for p in points]


def run(
    path: Path,
    *,
    launcher: str = "basic",
    n_jobs: int = 2,
    resume: Path | None = None,
    dry_run: bool = False,
    seed: int | None = None,
    extra: list[str] | None = None,
    replicas: int | None = None,
) -> Path | None:
    """Check the sweep file, run its jobs (of `resume`: the unfinished ones), report; then fail if a job failed."""
    path = packaged.sweep_file(path)
    spec, extra = load_spec(path), list(extra or [])
    with initialize_config_dir(config_dir=str(packaged.conf_dir()), version_base="1.3", job_name="train"):
        if resume is not None:
            spec, jobs, extra, seed = _resumed(resume, path, spec, extra, seed, replicas)
        else:
            seed, replicas = seed or 0, replicas or 1
            jobs = plan(spec, seed, extra) if spec["method"] != "bayes" else []
            jobs = sweep_replicas.fold(jobs, replicas, _replica_rule(path, spec))
        check_names(spec, path, extra)
        first = jobs[0] if jobs else args_no_hyphens(first_point(spec)) + extra
        check_jobs(jobs or [first], path)
        if "metric" not in spec:  # W&B's grid and random need none; the report ranks by what the jobs monitor
            spec["metric"] = monitored_metric(jobs[0])
        _notes(spec, path)
        if dry_run:
            _print_plan(spec, jobs, extra)
            return None
        if launcher == "joblib":
            extras.require("hydra_joblib_launcher")
        if spec["method"] == "bayes":
            extras.require("hydra_optuna_sweeper")
        out = resume or sweep_dir(spec, compose(CONFIG_NAME, overrides=first))  # extra may need the sweep's groups
        if resume is None:  # a resumed sweep keeps its record as it is (but its wall time)
            _save(out, path, spec, jobs, extra, seed, replicas or 1)
        base = ["hydra.mode=MULTIRUN", f"hydra.sweep.dir={out}"]
        base += ["hydra/launcher=joblib", f"hydra.launcher.n_jobs={n_jobs}"] if launcher == "joblib" else []
        start = time.perf_counter()
        bayes = spec["method"] == "bayes"
        failed = _optuna(spec, base, extra, seed, out) if bayes else _grid(spec, jobs, base, out, path)
    seconds = time.perf_counter() - start
    print(f"sweep {spec['name']}: {seconds:.0f} s")
    _add_seconds(out, seconds)
    report(out)
    if failed:  # the report covers what finished; the exit status says that not everything did
        raise UserError(f"sweep {spec['name']}: {failed}")
    return out


def _replica_rule(path: Path, spec: dict[str, Any]) -> str | None:
    # a protocol's selection rule (the lowest of its first key) picks each replicas=R job's reported replica
    proto = protocol.load(path, spec["parameters"])
    key = proto.select[0] if proto is not None and proto.select else None
    return f"{key}:min" if key and key.startswith(("train/", "val/")) else None


def report(source: Path, sweep_file: Path | None = None) -> None:
    """The sweep's report; for a paper protocol's sweep also its table under the paper's selection rule."""
    sweep_report.report(source, sweep_file=sweep_file)
    saved = source / SPEC_FILE
    if source.is_dir() and protocol.sidecar(Path(yaml.safe_load(saved.read_text())["file"])).is_file():
        print(scoreboard.markdown(scoreboard.build(source)))


def _add_seconds(out: Path, seconds: float) -> None:
    """Add a session's wall time to the sweep's record (a resumed sweep adds each session's)."""
    saved = yaml.safe_load((out / SPEC_FILE).read_text())
    saved["seconds"] = saved.get("seconds", 0.0) + seconds
    atomic.write_text(out / SPEC_FILE, yaml.safe_dump(saved, sort_keys=False))


def _notes(spec: dict[str, Any], path: Path) -> None:
    """What the local run differs in from W&B's, and a paper protocol's note (its sidecar checked here, before
    any job runs)."""
    if "early_terminate" in spec:
        print(f"note: {path}: early_terminate is applied by W&B's agent only; the local runner trains every "
              "job to its end (each job's own early stopping still applies)")
    proto = protocol.load(path, spec["parameters"])
    if proto is not None and proto.note:
        print(f"note: {proto.path}: {proto.note.strip()}")


def _job(overrides: list[str], index: int, out: Path) -> list[str]:
    # the job directory is its index in the full list, so a resumed sweep fills the same directories;
    # a job that was killed after a checkpoint continues from it
    resume = ["resume=auto"] if (out / str(index) / "checkpoints" / "last.ckpt").is_file() else []
    return overrides + resume + [f"hydra.sweep.subdir={index}"]


def _grid(spec: dict[str, Any], jobs: list[list[str]], base: list[str], out: Path, path: Path) -> str | None:
    """Run the jobs of a grid or random sweep that have not finished; what failed, in one line (None if none)."""
    pending = [i for i, _ in enumerate(jobs) if not (out / str(i) / "metrics.json").is_file()]
    print(f"sweep {spec['name']}: {len(pending)} of {len(jobs)} jobs to run into {out}")
    returns = _launch([_job(jobs[i], i, out) for i in pending], base)
    # a job stopped by a user error has printed its line and returned (cli.guarded); the others raised
    for i, error in ((i, _job_error(r)) for i, r in zip(pending, returns) if r.status == JobStatus.FAILED):
        print(f"error: job {i} failed: {type(error).__name__}: {error}", file=sys.stderr)
    return _failed(out, pending, f"run them again with: python -m attnmem.tools.sweep {path} --resume {out}")


def _failed(out: Path, jobs: list[int], again: str) -> str | None:
    """Those of `jobs` left without metrics.json (their errors printed above), in one line; None if none is."""
    failed = [i for i in jobs if not (out / str(i) / "metrics.json").is_file()]
    if not failed:
        return None
    return (f"{len(failed)} of {len(jobs)} jobs failed ({', '.join(f'job {i}' for i in failed)}: errors above; the "
            f"report covers the finished ones): fix the cause, then {again}")


def _job_error(ret: Any) -> BaseException:
    """The exception a failed job raised: `JobReturn.return_value` raises it (and writes a line, swallowed here)."""
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            value = ret.return_value
    except Exception as err:  # whatever the job raised
        return err
    raise ValueError(f"the job did not fail (it returned {value!r})")


def _print_plan(spec: dict[str, Any], jobs: list[list[str]], extra: list[str]) -> None:
    if spec["method"] == "bayes":
        print(
            f"python train.py -m hydra/sweeper=optuna hydra.sweeper.n_trials={spec['run_cap']} "
            + " ".join(f"'{o}'" for o in optuna_overrides(spec) + extra)
        )
        return
    for i, job in enumerate(jobs):
        print(f"{i}: python {spec['program']} " + " ".join(f"'{o}'" if " " in o else o for o in job))
    print(f"{len(jobs)} jobs")


def _save(
    out: Path, path: Path, spec: dict[str, Any], jobs: list[list[str]], extra: list[str], seed: int, replicas: int
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    saved = {"file": str(path), "seed": seed, "overrides": extra, "replicas": replicas, "spec": spec, "jobs": jobs}
    atomic.write_text(out / SPEC_FILE, yaml.safe_dump(saved, sort_keys=False))


def _resumed(
    out: Path, path: Path, spec: dict[str, Any], extra: list[str], seed: int | None, replicas: int | None
) -> tuple[dict[str, Any], list[list[str]], list[str], int]:
    """The saved sweep of `out` (spec, jobs, overrides, seed); one line when this command would change it."""
    saved_path = out / SPEC_FILE
    if not saved_path.is_file():
        raise UserError(f"--resume {out}: no {SPEC_FILE} there; is it a sweep directory?")
    saved = yaml.safe_load(saved_path.read_text())
    if saved["spec"]["name"] != spec["name"]:
        raise UserError(f"--resume {out}: made by sweep '{saved['spec']['name']}', not {path}")
    if saved["spec"]["method"] == "bayes":
        raise UserError(f"--resume {out}: a bayes (Optuna) sweep cannot be resumed; start a new one")
    sweep_spec.check_resume(out, path, saved, spec, extra, {"--seed": seed, "--replicas": replicas})
    return saved["spec"], saved["jobs"], saved["overrides"], saved["seed"]


def main(argv: list[str] | None = None) -> None:
    """Command line: run a sweep file, or `report DIR`."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv[:1] == ["report"]:
            parser = argparse.ArgumentParser(prog="python -m attnmem.tools.sweep report")
            parser.add_argument("source", type=Path, help="a sweep directory, or a W&B runs export (.csv)")
            parser.add_argument("--sweep", type=Path, help="the sweep file or name (needed for a CSV export)")
            args = parser.parse_args(argv[1:])
            report(args.source, sweep_file=packaged.sweep_file(args.sweep) if args.sweep else None)
            return
        parser = argparse.ArgumentParser(prog="python -m attnmem.tools.sweep", description=__doc__.splitlines()[0])
        parser.add_argument("file", type=Path, help="a sweep file, or a packaged sweep's name (memn2n_hops)")
        parser.add_argument("overrides", nargs="*", help="Hydra overrides added to every job (key=value)")
        parser.add_argument("--dry-run", action="store_true", help="print the jobs and stop")
        parser.add_argument("--launcher", choices=("basic", "joblib"), default="basic")
        parser.add_argument("--n-jobs", type=int, default=2, help="parallel processes with --launcher joblib")
        parser.add_argument("--resume", type=Path, help="a sweep directory: run its unfinished jobs")
        parser.add_argument("--seed", type=int, help="seed of the random method's draws and of Optuna (default 0)")
        parser.add_argument("--replicas", type=int, help="train up to R consecutive seeds in one job (default 1)")
        args = parser.parse_intermixed_args(argv)
        run(
            args.file,
            launcher=args.launcher,
            n_jobs=args.n_jobs,
            resume=args.resume,
            dry_run=args.dry_run,
            seed=args.seed,
            extra=args.overrides,
            replicas=args.replicas,
        )
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
