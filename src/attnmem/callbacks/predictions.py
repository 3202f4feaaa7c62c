"""Write a family module's test predictions to `predictions.json` in the run directory."""

from __future__ import annotations

from pathlib import Path

import lightning as L

from attnmem.core.atomic import write_json


class PredictionsWriter(L.Callback):
    """After testing, rank 0 writes the module's `predictions` (`{question_id: answer_text}`) to `dirpath`.

    Only a module that keeps predictions (the `span` family: gathered from every process at the end of
    its test epoch) has them; for the others this callback writes nothing. The file is written through a
    temporary name and a rename, in the format the official SQuAD evaluation script reads.
    """

    def __init__(self, dirpath: str | Path) -> None:
        self.dirpath = Path(dirpath)

    def on_test_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        predictions = getattr(pl_module, "predictions", None)
        if predictions is not None and trainer.is_global_zero:
            write_json(self.dirpath / "predictions.json", predictions)
