"""A CSV log that survives a resume (earlier rows kept, the rest appended), and `logged_history` to read it back."""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.loggers import CSVLogger as LightningCSVLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter

from attnmem.core.atomic import write_text


class CSVLogger(LightningCSVLogger):
    """Lightning's `CSVLogger`, with `metrics.csv` kept up to `keep_before` (a resumed checkpoint's step).

    Lightning deletes `metrics.csv` when its writer starts, so a resumed run lost the epochs before the
    interruption. Here a resumed run keeps every row logged before its checkpoint's step (the rows after it
    are logged again) and appends. The file is rewritten through a temporary name and a rename.
    """

    def __init__(self, *args: Any, keep_before: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.keep_before = keep_before

    @property
    def experiment(self) -> ExperimentWriter:
        """The writer; on the first call it keeps the history a resumed run continues."""
        if self._experiment is None:
            self._fs.makedirs(self.root_dir, exist_ok=True)
            self._experiment = _Writer(self.log_dir, self.keep_before)
        return self._experiment


class _Writer(ExperimentWriter):
    def __init__(self, log_dir: str, keep_before: int | None) -> None:
        self.keep_before = keep_before
        super().__init__(log_dir)

    def _check_log_dir_exists(self) -> None:
        path = Path(self.metrics_file_path)
        if self.keep_before is None or not path.is_file():
            return super()._check_log_dir_exists()
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            rows = [r for r in reader if r.get("step") and int(r["step"]) < self.keep_before]
            header = list(reader.fieldnames or [])
        self.metrics_keys = sorted(header)
        self._write(header, rows)

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
