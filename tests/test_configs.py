"""Every model yaml × every data yaml it accepts: compose, instantiate, forward, backward, shapes."""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import io
import json
import tarfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from conftest import CONF
from hydra.utils import get_class, instantiate
from omegaconf import OmegaConf

from attnmem.data.babi_simulator import generate_babi
from attnmem.data.span.span_generator import SpanGenerator
from attnmem.runtime import run

MODELS = sorted(p.stem for p in (CONF / "model").glob("*.yaml"))
DATA = sorted(p.stem for p in (CONF / "data").glob("*.yaml"))
ATTENTION = sorted(p.stem for p in (CONF / "attention").glob("*.yaml"))


def _family(group: str, name: str) -> type:
    return get_class(OmegaConf.load(CONF / group / f"{name}.yaml")._target_)


PAIRS = [(m, d) for m in MODELS for d in DATA if _family("data", d).family in _family("model", m).families]


def _data_overrides(data: str, tmp_path: Path) -> list[str]:
    """Small sizes, and for file readers a folder of generated files in the official format."""
    if data == "babi":
        folder = tmp_path / "babi" / "en"
        folder.mkdir(parents=True)
        for split in ("train", "test"):
            lines = generate_babi(1, 60, seed=0, split=split)
            (folder / f"qa1_single-supporting-fact_{split}.txt").write_text("\n".join(lines) + "\n")
        return [f"data.source.data_dir={folder}"]
    if data == "babi_gen":
        return ["data.source.num_train=60", "data.source.num_val=20", "data.source.num_test=20", "data.batch_size=16"]
    if data in ("mqar", "selective_copy", "induction_heads"):  # the recall family's generators
        return ["data.num_train=32", "data.num_val=16", "data.num_test=16", "data.batch_size=16"]
    if data == "squad":  # generated span questions written as a SQuAD v1.1 file, one paragraph each, 4 articles
        records = SpanGenerator(num_train=48).records("train")
        qas = [{"context": r.context, "qas": [{"id": r.id, "question": r.question, "answers": [
            {"text": t, "answer_start": s} for t, s in r.answers]}]} for r in records]
        path = tmp_path / "squad.json"
        path.write_text(json.dumps({"version": "1.1", "data": [{"title": str(k), "paragraphs": qas[k::4]}
                                                               for k in range(4)]}))
        return [f"data.source.train_path={path}", "data.source.val_fraction=0.25", "data.batch_size=16"]
    if data in ("text_corpus", "babi_corpus", "squad_corpus", "babi_gen_corpus"):  # the same files, read as text
        small = ["data.min_count=1", "data.batch_size=8", "data.val_windows=16"]
        if data == "babi_gen_corpus":  # generated: nothing to write
            return ["data.source.num_stories=4", "data.source.val_fraction=0.3", *small]
        if data == "squad_corpus":
            path = Path(_data_overrides("squad", tmp_path)[0].split("=", 1)[1])
            return [f"data.source.path={path}", "data.source.val_fraction=0.25", *small]
        babi = Path(_data_overrides("babi", tmp_path)[0].split("=", 1)[1])
        if data == "babi_corpus":
            return [f"data.source.data_dir={babi}", "data.source.val_fraction=0.2", *small]
        return [f"data.source.data_dir={babi}", "data.source.pattern=*.txt", "data.source.val_fraction=0.2", *small]
    if data == "span_gen":
        return ["data.source.num_train=48", "data.source.num_val=16", "data.source.num_test=16", "data.batch_size=16"]
    if data == "patterns":
        return ["data.size=64", "data.num_patterns=8", "data.noise=0.2", "data.partner_size=16"]
    if data == "pairs":
        return ["data.size=64", "data.num_patterns=4", "data.partner_size=32"]
    if data == "karate":
        return ["data.steps_per_epoch=2"]
    if data == "sbm":
        return ["data.source.nodes=40", "data.source.train_per_class=2", "data.source.num_val=8", "data.steps_per_epoch=2"]
    if data in ("graph_files", "cora"):  # a ring of 12 nodes of 2 classes, as edge-list files or as LINQS's cora.tgz
        return graph_files(data, tmp_path)
    if data in ("doc_gen", "classify_files", "aclimdb", "squad_topics"):
        return classify_files(data, tmp_path)
    sequence = ["data.batch_size=4", "data.steps_per_epoch=2", "data.num_val=4", "data.num_test=4"]
    if data == "copy":
        return [*sequence, "data.task.max_length=2", "data.test_lengths=[3]"]
    if data == "repeat_copy":
        return [*sequence, "data.task.max_length=2", "data.task.max_repeats=2", "data.test_lengths=[3]"]
    if data == "associative_recall":
        return [*sequence, "data.task.item_length=1", "data.task.max_items=3", "data.test_lengths=[4]"]
    if data == "priority_sort":
        return [*sequence, "data.task.num_vectors=3", "data.task.num_targets=2", "data.test_lengths=[4]"]
    if data in ("digits", "coco_folder"):
        return caption_files(data, tmp_path)
    seq2seq = ["data.source.num_train=16", "data.source.num_val=8", "data.source.num_test=8", "data.batch_size=8",
               "data.source.test_lengths=[7]"]
    if data in ("reverse", "sort", "copy_tokens"):
        return [*seq2seq, "data.source.train_lengths=[1,4]"]
    if data == "addition":
        return [*seq2seq, "data.source.train_lengths=[3,6]"]
    if data == "parallel_text":
        pairs = [("a b c", "x y"), ("b c", "y z z"), ("c a", "z"), ("a", "x x")] * 3
        (tmp_path / "pairs.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in pairs))
        return [f"data.source.train_file={tmp_path / 'pairs.tsv'}", "data.batch_size=8"]
    raise AssertionError(f"conf/data/{data}.yaml has no small-size overrides in tests/test_configs.py")


def graph_files(data: str, tmp_path: Path) -> list[str]:
    """Overrides reading a 12-node ring from edge-list files (`graph_files`) or a local cora.tgz (`cora`)."""
    nodes = [f"n{i}" for i in range(12)]
    edges = "".join(f"{nodes[i]} {nodes[(i + 1) % 12]}\n" for i in range(12))
    content = "".join(f"{n} {i % 3} {(i + 1) % 2} {'ab'[i % 2]}\n" for i, n in enumerate(nodes))
    split = ["data.source.train_per_class=2", "data.source.num_val=4", "data.source.num_test=null",
             "data.steps_per_epoch=2"]
    if data == "graph_files":
        (tmp_path / "edges.txt").write_text(edges)
        (tmp_path / "labels.txt").write_text("".join(f"{n} {'ab'[i % 2]}\n" for i, n in enumerate(nodes)))
        return [f"data.source.edges={tmp_path / 'edges.txt'}", f"data.source.labels={tmp_path / 'labels.txt'}", *split]
    with tarfile.open(tmp_path / "cora.tgz", "w:gz") as tar:
        for name, text in (("cora/cora.content", content), ("cora/cora.cites", edges)):
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    digest = hashlib.sha256((tmp_path / "cora.tgz").read_bytes()).hexdigest()
    return [f"data.source.data_dir={tmp_path}", f"data.source.sha256={digest}", *split]


def caption_files(data: str, tmp_path: Path) -> list[str]:
    """Overrides for 8 small digit canvases, or a folder of 8 grey 16 x 8 PNGs with their COCO captions JSON."""
    if data == "digits":
        return ["data.source.num_train=8", "data.source.num_val=4", "data.source.num_test=4",
                "data.source.test_lengths=[2]", "data.source.lengths=[1,2]", "data.source.width=16", "data.batch_size=8"]
    from PIL import Image

    (tmp_path / "images").mkdir()
    images, notes = [], []
    for i in range(8):
        Image.new("L", (16, 8), 30 * i).save(tmp_path / "images" / f"{i}.png")
        images.append({"id": i, "file_name": f"{i}.png"})
        notes.append({"image_id": i, "caption": f"a {'dark' if i < 4 else 'light'} box"})
    (tmp_path / "captions.json").write_text(json.dumps({"images": images, "annotations": notes}))
    return [f"data.source.images_dir={tmp_path / 'images'}", f"data.source.captions={tmp_path / 'captions.json'}",
            "data.source.channels=1", "data.source.height=8", "data.source.width=16", "data.source.val_fraction=0.25",
            "data.source.test_fraction=0.25", "data.batch_size=8"]


def classify_files(data: str, tmp_path: Path) -> list[str]:
    """Overrides of the classify family: few generated documents, a TSV file, a local aclImdb archive, SQuAD."""
    small = ["data.batch_size=8"]
    if data == "doc_gen":
        return [*small, "data.source.num_train=24", "data.source.num_val=8", "data.source.num_test=8"]
    if data == "squad_topics":
        path = Path(_data_overrides("squad", tmp_path)[0].split("=", 1)[1])
        return [*small, f"data.source.path={path}", "data.source.val_fraction=0.25", "data.source.test_fraction=0.25"]
    texts = [("pos", "A fine film. I liked it!"), ("neg", "Dull. A waste of time."), ("pos", "Great acting."),
             ("neg", "Bad plot. Worse ending.")] * 3
    if data == "classify_files":
        (tmp_path / "docs.tsv").write_text("".join(f"{label}\t{text}\n" for label, text in texts))
        return [*small, f"data.source.train_file={tmp_path / 'docs.tsv'}", "data.source.val_fraction=0.25"]
    with tarfile.open(tmp_path / "aclImdb_v1.tar.gz", "w:gz") as tar:
        for i, (label, text) in enumerate(texts):
            info = tarfile.TarInfo(f"aclImdb/{'train' if i < 8 else 'test'}/{label}/{i}_7.txt")
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    digest = hashlib.sha256((tmp_path / "aclImdb_v1.tar.gz").read_bytes()).hexdigest()
    return [*small, f"data.source.data_dir={tmp_path}", f"data.source.sha256={digest}", "data.min_count=1",
            "data.source.val_fraction=0.25"]


@contextlib.contextmanager
def no_deprecated_calls() -> Iterator[None]:
    """A DeprecationWarning is an error inside: a model must not call a deprecated API (attend's mask=, ...)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        yield


def test_every_model_has_a_data_it_fits():
    assert {m for m, _ in PAIRS} == set(MODELS)


@pytest.mark.parametrize(("model", "data"), PAIRS)
def test_compose_instantiate_forward_backward(compose_cfg, tmp_path, model, data):
    cfg = compose_cfg(f"model={model}", f"data={data}", *_data_overrides(data, tmp_path))
    run.check_compatible(cfg)
    dm = instantiate(cfg.data)
    dm.prepare_data()
    dm.setup("fit")
    net = run.build_model(cfg.model, cfg.attention, dm.dims)
    batch = next(iter(dm.train_dataloader()))
    with no_deprecated_calls():  # the recall family calls its model on the tokens (logits); the others on the batch
        out = net(batch["inputs"]) if _family("data", data).family == "recall" else net(batch)
    pred = out if isinstance(out, torch.Tensor) else out.pred
    assert pred.shape[0] == next(iter(batch.values())).shape[0]
    if not any(p.requires_grad for p in net.parameters()):
        return  # a memory stored without gradients (Hopfield nets with a fixed score): nothing to backpropagate
    pred.float().sum().backward()
    grads = [p.grad for p in net.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


def _takes_score(model: str) -> bool:
    return "score" in inspect.signature(_family("model", model)).parameters


# The score axis, sampled: a model that ignores the score trains once (with `dot`); the DNC's bAbI reader runs
# the core that `dnc` trains with every score, so it takes two; so do SAT (one f_att over keys of its own width:
# Xu et al.'s MLP score and dot), HAN and the Transformer classifier; BiDAF only its own, trilinear
# (tests/models/test_bidaf.py checks its attention flow with dot). A score added later trains only in the models
# named here (its own, qa, seq2seq).
SAMPLED = {"dnc_qa": ("cosine", "dot"), "sat": ("additive", "dot"), "bidaf": ("trilinear",),
           "han": ("additive", "dot"), "transformer_classify": ("scaled_dot", "additive"),
           "mixer_lm": ("scaled_dot", "additive"), "mixer_sequence": ("scaled_dot", "additive")}
SCORE_MODELS = {"trilinear": ("bidaf", "memn2n", "attn_rnn")}
SCORE_PAIRS = [(m, a) for m in MODELS for a in SAMPLED.get(m, ATTENTION)
               if (_takes_score(m) or a == "dot") and m in SCORE_MODELS.get(a, (m,))]


@pytest.mark.parametrize(("model", "attention"), SCORE_PAIRS)
def test_every_score_trains_in_every_model_on_its_natural_data(compose_cfg, tmp_path, model, attention):
    natural = compose_cfg(f"model={model}")
    # the data yaml the model's defaults picked: several yamls may share one class (copy, repeat_copy, ...)
    same_class = [name for name in DATA if _family("data", name).__name__ == natural.data._target_.rsplit(".", 1)[1]]
    data = next((name for name in same_class if OmegaConf.load(CONF / "data" / f"{name}.yaml") == natural.data),
                same_class[0])
    cfg = compose_cfg(f"model={model}", f"attention={attention}", *_data_overrides(data, tmp_path))
    datamodule, module, _ = run.setup(cfg)
    if not any(p.requires_grad for p in module.net.parameters()):
        pytest.skip(f"{model} stores its memory without gradients")
    if sum(p.numel() for p in module.net.parameters() if p.requires_grad) == 1:
        pytest.skip(f"{model} with {attention} learns only a temperature: one scalar cannot memorise a batch")
    optimizer = module.configure_optimizers()
    optimizer = optimizer["optimizer"] if isinstance(optimizer, dict) else optimizer
    batch = next(iter(datamodule.train_dataloader()))
    losses = []
    for _ in range(40):  # one batch, memorised: the family's loss must fall whatever the score
        with no_deprecated_calls():
            loss = module.training_step(batch, 0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0], (attention, losses)
