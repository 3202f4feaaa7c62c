"""A CSV log that survives a resume (earlier rows kept, the rest appended), the record a checkpoint keeps of it, and
`logged_history` to read it back."""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from pathlib import Path
from typing import Any, cast

import lightning as L
from lightning.pytorch.loggers import CSVLogger as LightningCSVLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter

from attnmem.core import compat
from attnmem.core.atomic import disk_fault, write_text

LOG_KEY = "attnmem_csv_log"  # a checkpoint's record of the CSV log: its rows then, and the epoch's row to come


# the private names of Lightning's CSVLogger this class overrides or calls: core/compat.py, SUBCLASSED
class CSVLogger(LightningCSVLogger):
    """Lightning's `CSVLogger`, with `metrics.csv` kept as it was when a resumed run's checkpoint was written.

    Lightning deletes `metrics.csv` when its writer starts, so a resumed run lost the epochs before the
    interruption. Here a resumed run keeps the rows logged before its checkpoint (the rows after it are logged
    again) and appends: the first `resume_log["rows"]` rows (the checkpoint's record, `record`), or for a
    checkpoint without that record every row before its step, `keep_before`. A checkpoint written at a training
    epoch's end comes before Lightning logs that epoch's row, and a run resumed from it goes on past the epoch,
    so the row is written from the checkpoint's record of it (`resume_log["row"]`), whether or not the killed
    run got to write it. The file is rewritten through a temporary name and a rename.
    """

    def __init__(self, *args: Any, keep_before: int | None = None, resume_log: dict[str, Any] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.keep_before, self.resume_log = keep_before, resume_log or {}

    @property
    def experiment(self) -> _Writer:
        """The writer; on the first call it keeps the history a resumed run continues."""
        if self._experiment is None:
            self._fs.makedirs(self.root_dir, exist_ok=True)
            self._experiment = _Writer(self.log_dir, self.keep_before, self.resume_log)
        return cast(_Writer, self._experiment)  # set here only (Lightning declares its base class's writer)


# the private names of Lightning's ExperimentWriter this class overrides or calls: core/compat.py, SUBCLASSED
class _Writer(ExperimentWriter):
    def __init__(self, log_dir: str, keep_before: int | None, resume_log: dict[str, Any]) -> None:
        self.keep_before, self.resume_log = keep_before, resume_log
        self.rows = 0  # rows logged, those kept from before a resume included
        super().__init__(log_dir)

    def _check_log_dir_exists(self) -> None:
        path = Path(self.metrics_file_path)
        if self.keep_before is None or not path.is_file():
            return super()._check_log_dir_exists()
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
            header = list(reader.fieldnames or [])
        if "rows" in self.resume_log:
            rows = rows[: self.resume_log["rows"]]
        else:
            rows = [r for r in rows if r.get("step") and int(r["step"]) < self.keep_before]
        self.metrics_keys = sorted(header)
        self._write(header, rows)
        self.rows = len(rows)
        if row := dict(self.resume_log.get("row") or {}):
            self.log_metrics(row, row.pop("step"))
            self.save()

    def log_metrics(self, metrics_dict: dict[str, float], step: int | None = None) -> None:
        """Record the metrics as Lightning does, counting the row."""
        super().log_metrics(metrics_dict, step)
        self.rows += 1

    def save(self) -> None:
        """Lightning's save; a write the disk refuses (full, read-only, the run directory gone) is one line."""
        try:
            super().save()
        except OSError as error:
            if (fault := disk_fault(error, self.metrics_file_path, writing=True)) is None:
                raise
            raise fault from None

    def _rewrite_with_new_header(self, fieldnames: list[str]) -> None:
        with open(self.metrics_file_path, newline="") as f:
            rows = list(csv.DictReader(f))
        self._write(fieldnames, rows)

    def _write(self, fieldnames: list[str], rows: list[dict[str, Any]]) -> None:
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=fieldnames)
        writer.writeheader()
        writer.writerows(rows)
        write_text(Path(self.metrics_file_path), text.getvalue())


def record(trainer: L.Trainer, checkpoint: dict[str, Any]) -> None:
    """Record in a checkpoint how many rows the CSV log holds, and, in one written at a training epoch's end, that
    epoch's row, which Lightning logs only after the checkpoint (a run resumed from it goes on past the epoch)."""
    logger = next((lg for lg in trainer.loggers if isinstance(lg, CSVLogger)), None)
    if logger is None or not trainer.is_global_zero:
        return
    log: dict[str, Any] = {"rows": logger.experiment.rows}
    # a tracker of processed epochs too, though Lightning declares a base class without them (a private name)
    progress: Any = trainer.fit_loop.epoch_progress.current
    if progress.processed > progress.completed:  # in the epoch-end hooks: the module has logged, the loggers wait
        trained = {k: float(v) for k, v in trainer.callback_metrics.items() if "train" in k.split("/")[:-1]}
        step = compat.batches_that_stepped(trainer) - 1  # the step Lightning logs the epoch's row at
        log["row"] = {"epoch": trainer.current_epoch, **trained, "step": step}
    checkpoint[LOG_KEY] = log


def logged_history(trainer: L.Trainer) -> dict[str, dict[int, float]]:
    """Every epoch-level scalar named `split/metric` in the trainer's CSV log, by epoch (empty without one)."""
    logger = next((lg for lg in trainer.loggers if isinstance(lg, LightningCSVLogger)), None)
    if logger is None:
        return {}
    logger.save()
    path = Path(logger.experiment.metrics_file_path)
    if not path.is_file():
        return {}
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    history: dict[str, dict[int, float]] = defaultdict(dict)
    for row in rows:
        for key, value in row.items():
            if value and row.get("epoch") and "/" in key:
                history[key][int(row["epoch"])] = float(value)
    return history
