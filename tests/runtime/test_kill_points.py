"""Kill points (attnmem.core.faults): a run stopped as SIGKILL stops it mid-write of a checkpoint, before its rename,
after the rename and before the manifest's update, mid-manifest (20 kills, each point asserted reached; a 21st
mid-CSV), then continued to its end, ends with an unbroken run's metrics and whole CSV history; no kill leaves a
file that a later read accepts while damaged.

Each run is a forked child of this test's process (torch and Lightning imported once): the child sets
ATTNMEM_KILL_AT and trains as train.py would; the kill point leaves it with os._exit, no cleanup."""

from __future__ import annotations

import csv
import json
import os
import re
import sys
import traceback
from pathlib import Path

import pytest
from conftest import CONF, FAST, compose_into
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from attnmem.core import faults
from attnmem.core.errors import UserError
from attnmem.runtime import checkpoint, run

EPOCHS = 16
RUN = [*FAST, "~callbacks.plots", "data.source.num_train=60", "data.source.num_val=20", "data.source.num_test=20",
       "data.batch_size=32", f"trainer.max_epochs={EPOCHS}"]

# Two run directories, each killed again and again, each run continued as a user would: `resume=auto` once it has a
# checkpoint, else the same command again. A point `<kind>:<stage>:<n>` is the n-th time the child reaches it.
CHAINS = {
    "a": ["manifest.json:mid_write:1",  # a fresh run's manifest, half written
          "checkpoint:mid_write:2",  # last.ckpt of epoch 0 half written: only epoch000.ckpt is there
          "checkpoint:after_rename:3",  # a checkpoint in place, the manifest's next update (a resume's) not made
          "manifest.json:before_update:1",  # a resume read its checkpoint, its manifest entry not written
          "checkpoint:before_rename:3",
          "manifest.json:after_rename:1",
          "checkpoint:mid_write:4",
          "manifest.json:before_rename:1",
          "checkpoint:after_rename:2",
          "checkpoint:before_rename:1",
          "metrics.csv:mid_write:2"],  # the CSV history half written (a 21st kill, beyond the 20)
    "b": ["checkpoint:before_rename:1",
          "checkpoint:mid_write:3",
          "manifest.json:mid_write:1",  # a resume's update of the manifest, half written
          "checkpoint:after_rename:4",
          "manifest.json:before_update:1",
          "checkpoint:before_rename:2",
          "manifest.json:mid_write:1",
          "checkpoint:mid_write:2",
          "checkpoint:after_rename:1",
          "metrics.json:mid_write:1"],  # the finished run's metrics half written: the run is unfinished
}


def _train(run_dir: Path, log: Path, *overrides: str, kill: str | None = None) -> int:
    """Train in a forked child (killed at `kill`, if given); its exit code, 137 for a kill."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child leaves through os._exit only: never back into pytest
        code, out = 1, open(log, "a")  # noqa: SIM115 - open until os._exit
        os.dup2(out.fileno(), 1)
        os.dup2(out.fileno(), 2)
        sys.stdout = sys.stderr = out
        try:
            print(f"--- {kill or 'to the end'} {overrides}", flush=True)
            if kill:
                os.environ[faults.KILL_AT] = kill
                os.environ[faults.KILL_MARK] = str(log.with_suffix(".mark"))
            GlobalHydra.instance().clear()
            with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
                run.train(compose_into(run_dir, *RUN, *overrides))
            code = 0
        except BaseException:  # the child reports whatever stopped it in the log
            traceback.print_exc()
        finally:
            out.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _continue(run_dir: Path) -> tuple[str, ...]:
    """What a user continues a stopped run with: resume=auto once there is a checkpoint (the run directory guard
    refuses the same command then), else the same command."""
    return ("resume=auto",) if any((run_dir / "checkpoints").glob("[!.]*.ckpt")) else ()


def _nothing_damaged_is_accepted(run_dir: Path, point: str, temps_before: set[Path]) -> None:
    """Every file under its own name reads whole; the hidden temp file a mid-write kill leaves is damaged (refused)."""
    for ckpt in run_dir.rglob("*.ckpt"):
        assert checkpoint.load(ckpt)["state_dict"], ckpt
    for data in run_dir.rglob("*.json"):
        json.loads(data.read_text())
    for table in run_dir.rglob("*.csv"):
        rows = list(csv.reader(table.open()))
        assert all(len(row) == len(rows[0]) for row in rows), table
    assert not (run_dir / "metrics.json").exists(), f"{point}: the run finished"
    kind, stage, _ = point.split(":")
    if stage == "mid_write":
        temps = [p for p in _temps(run_dir) - temps_before if _kind_of(p) == kind]
        assert len(temps) == 1, f"{point}: no temp file left half written"
        if kind == "checkpoint":
            with pytest.raises(UserError, match=r"is damaged \(truncated|not a checkpoint"):
                checkpoint.load(temps[0])
        elif kind.endswith(".json"):
            with pytest.raises(ValueError):
                json.loads(temps[0].read_text())


def _temps(run_dir: Path) -> set[Path]:
    return set(run_dir.rglob(".*.tmp"))


def _kind_of(temp: Path) -> str:
    # the kind (core.faults.kind) of the file that a hidden temp name `.<name>.<pid>.tmp` stands for
    return faults.kind(Path(temp.name[1:].rsplit(".", 2)[0]))


def _metrics(run_dir: Path) -> dict:
    return {k: v for k, v in json.loads((run_dir / "metrics.json").read_text()).items() if not k.endswith("_seconds")}


@pytest.fixture(scope="module")
def unbroken(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run trained without a kill, once for the module (in a child, as the killed ones)."""
    out = tmp_path_factory.mktemp("unbroken")
    assert _train(out / "run", out / "train.log") == 0, (out / "train.log").read_text()[-3000:]
    return out / "run"


@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_a_run_killed_at_each_point_continues_to_an_unbroken_runs_end(tmp_path, unbroken, chain):
    run_dir, log = tmp_path / "run", tmp_path / "train.log"
    mark = log.with_suffix(".mark")
    for i, point in enumerate(CHAINS[chain]):
        temps = _temps(run_dir)
        code = _train(run_dir, log, *_continue(run_dir), kill=point)
        assert code == faults.EXIT_CODE, f"kill {i} at {point}: exit {code}\n{log.read_text()[-3000:]}"
        assert mark.read_text().splitlines()[-1] == point, f"kill {i}: {point} not reached"
        _nothing_damaged_is_accepted(run_dir, point, temps)
    assert mark.read_text().splitlines() == CHAINS[chain]

    code = _train(run_dir, log, *_continue(run_dir))
    assert code == 0, log.read_text()[-3000:]
    assert _metrics(run_dir) == _metrics(unbroken)
    assert _metrics(unbroken)["epoch"] == EPOCHS
    history = (run_dir / "csv" / "metrics.csv").read_text()
    assert history == (unbroken / "csv" / "metrics.csv").read_text()  # every epoch, before the kills and after
    assert history.count("\n") > EPOCHS
    resumes = json.loads((run_dir / "manifest.json").read_text()).get("resumes", [])
    # from last.ckpt, or the newest intact checkpoint where a kill left none: never a temp file
    assert resumes and all(re.fullmatch(r"checkpoints/(last|epoch\d+)\.ckpt", r["checkpoint"]) for r in resumes)
    names = {p.name for p in (run_dir / "checkpoints").glob("*.ckpt")}
    unbroken_names = {p.name for p in (unbroken / "checkpoints").glob("*.ckpt")}
    # the unbroken run's checkpoints, and none else but one a resume started from (Lightning never deletes that)
    assert names >= unbroken_names and names - unbroken_names <= {Path(r["checkpoint"]).name for r in resumes}
    assert not _temps(run_dir)  # the resume that took over a killed process's lock removed its half-written files
