"""A tiny data folder in every format the recipes read, laid out as `attnmem-data fetch` lays out the real one."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from attnmem.data.babi_simulator import generate_babi
from attnmem.data.catalog import DATASETS
from attnmem.data.span.span_generator import SpanGenerator
from attnmem.runtime import run

ARTICLES, PARAGRAPHS = 44, 7  # the CPU recipes take the first 40 articles; classify holds out 15% of 7 paragraphs
GLOVE_WORDS = ("the", "of", "city", ". . .", "at the end")  # GloVe 840B has tokens with spaces in them


def write_babi(root: Path) -> None:
    """`babi/en/` and `babi/en-10k/`: every task a few generated stories in the official format."""
    for folder in ("en", "en-10k"):
        (root / "babi" / folder).mkdir(parents=True)
        for task in range(1, 21):
            lines = generate_babi(1, 20, seed=task, split="train")
            (root / "babi" / folder / f"qa{task}_fixture_train.txt").write_text("\n".join(lines) + "\n")


def squad_json(records: list, articles: int) -> dict:
    """Generated span questions as a SQuAD v1.1 file: `articles` articles of `PARAGRAPHS` one-question paragraphs."""
    paragraphs = [{"context": r.context, "qas": [{"id": r.id, "question": r.question, "answers": [
        {"text": t, "answer_start": s} for t, s in r.answers]}]} for r in records]
    return {"version": "1.1", "data": [{"title": f"article {a}", "paragraphs": paragraphs[a::articles]}
                                       for a in range(articles)]}


def write_squad(root: Path) -> None:
    """`squad/train-v1.1.json` and `squad/dev-v1.1.json`, each with 44 articles."""
    (root / "squad").mkdir(parents=True)
    for name, split in (("train-v1.1.json", "train"), ("dev-v1.1.json", "val")):
        records = SpanGenerator(num_train=ARTICLES * PARAGRAPHS, num_val=ARTICLES * PARAGRAPHS, entities_per_context=1,
                                fillers=0).records(split)  # short contexts: the paper-size models run them fast
        (root / "squad" / name).write_text(json.dumps(squad_json(records, ARTICLES)))


def write_glove(root: Path) -> None:
    """`glove/`: the files the recipes name, at their widths, a few words each."""
    (root / "glove").mkdir(parents=True)
    for name, dim in (("glove.840B.300d.txt", 300), *((f"glove.6B.{d}d.txt", d) for d in (50, 100, 200, 300))):
        lines = [f"{w} {' '.join(f'{(i + k) % 7 / 10:.1f}' for k in range(dim))}" for i, w in enumerate(GLOVE_WORDS)]
        (root / "glove" / name).write_text("\n".join(lines) + "\n")


def write_data_folder(root: Path) -> Path:
    """Every dataset the experiments read, tiny, under `root` (what `paths.data_dir` points at)."""
    write_babi(root)
    write_squad(root)
    write_glove(root)
    return root


def datasets_named(cfg: DictConfig, root: Path) -> set[str]:
    """The folders of the data folder `root` (their first path part) that the composed config's data options name."""
    found, stack = set(), [OmegaConf.to_container(cfg.data, resolve=True)]
    while stack:
        node = stack.pop()
        if isinstance(node, dict | list):
            stack.extend(node.values() if isinstance(node, dict) else node)
        elif isinstance(node, str) and node.startswith(f"{root}/"):
            found.add(Path(node).relative_to(root).parts[0])
    return found


def run_one_batch(compose_cfg: Callable[..., DictConfig], run_dir: Path, data_folder: Path, name: str) -> None:
    """Experiment `name` trains one batch and validates on the data folder (no plots: the model tests draw them)."""
    cfg = compose_cfg(f"experiment={name}", "debug=fdr", "trainer.enable_progress_bar=false", "~callbacks.plots",
                      f"paths.data_dir={data_folder}", "threads=1")
    # what it reads of the data folder is what `attnmem-data list` says it needs
    assert datasets_named(cfg, data_folder) == {d.folder for d in DATASETS.values() if name in d.recipes}
    run.train(cfg)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["global_step"] == 1
    assert any(k.startswith("val/") for k in metrics), metrics
