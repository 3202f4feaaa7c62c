"""`replicas=R`: replica r trains exactly as the single run with `seed=seed+r` would, in one process."""

from __future__ import annotations

import json
import math
from pathlib import Path

import lightning as L
import pytest
import torch
from conftest import CONF, FAST, compose_into, one_line
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

import attnmem
from attnmem.core.errors import UserError

R = 3
# 400 stories in batches of 16: 25 steps an epoch, 50 in all; clipping at 0.5 is active on every step
MEMN2N = [*FAST, "model=memn2n", "data=babi_gen", "data.source.num_train=400", "data.source.num_val=60",
          "data.source.num_test=30", "data.batch_size=16", "trainer.max_epochs=2",
          "trainer.gradient_clip_val=0.5"]  # Lightning's default algorithm: the norm
NTM = [*FAST, "model=ntm", "data=copy", "data.steps_per_epoch=25", "data.num_val=8", "data.num_test=4",
       "data.test_lengths=[]", "data.batch_size=4", "data.task.max_length=5", "trainer.max_epochs=2",
       "callbacks.plots=null"]


class StepLosses(L.Callback):
    """Each training step's loss of every replica (`{r: loss}`; a single run's as replica 0)."""

    def __init__(self) -> None:
        self.steps: list[dict[int, float]] = []

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch, batch_idx) -> None:
        losses = getattr(pl_module, "step_losses", None)
        self.steps.append({r: float(v) for r, v in losses.items()} if losses is not None else {0: float(outputs["loss"])})


def train(out: Path, *overrides: str, patches: dict | None = None) -> tuple[list[dict[int, float]], dict]:
    """Train into `out` with a `StepLosses` callback (and `patches`: `{(object, name): value}`)."""
    from attnmem.runtime import run

    recorder, setup = StepLosses(), run.setup

    def recording_setup(cfg, resume_at=None):
        datamodule, module, trainer = setup(cfg, resume_at)
        trainer.callbacks.append(recorder)
        return datamodule, module, trainer

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(run, "setup", recording_setup)
        for (owner, name), value in (patches or {}).items():
            mp.setattr(owner, name, value)
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            run.train(compose_into(out, *overrides))
        GlobalHydra.instance().clear()
    return recorder.steps, json.loads((out / "metrics.json").read_text())


def worst_gap(replicas: list[dict[int, float]], single: list[dict[int, float]], r: int, steps: int = 50) -> float:
    """The largest relative difference between replica r's step losses and the single run's (over the
    replicas' `steps` steps, the single run's first)."""
    assert len(replicas) == steps <= len(single)
    return max(abs(a[r] - b[0]) / abs(b[0]) for a, b in zip(replicas, single))


@pytest.fixture(scope="module")
def memn2n(tmp_path_factory):
    root = tmp_path_factory.mktemp("memn2n")
    singles = [train(root / f"seed{r}", *MEMN2N, f"seed={r}", "callbacks.plots=null") for r in range(R)]
    return root, singles, train(root / "replicas", *MEMN2N, f"replicas={R}")


def test_memn2n_replicas_reproduce_single_runs(memn2n):
    _, singles, (steps, metrics) = memn2n
    for r, (single_steps, single) in enumerate(singles):
        assert worst_gap(steps, single_steps, r) < 1e-5  # the seed's initialisation, batch order, RN draws, clipping
        assert metrics[f"replicas/{r}/val/acc"] == single["val/acc"]
        assert metrics[f"replicas/{r}/val/loss"] == pytest.approx(single["val/loss"], rel=1e-5)
        assert metrics[f"replicas/{r}/test/acc"] == single["test/acc"]
    assert len({s["val/loss"] for _, s in singles}) == R  # three different runs
    root = memn2n[0]
    examples = [json.loads((root / d / "manifest.json").read_text())["examples"] for d in ("seed0", "replicas")]
    assert examples[1] == examples[0] and set(examples[0]) == {"train", "val", "test"}  # the scoreboard's SE needs n


def test_metrics_report_the_selected_replica_every_replica_and_their_spread(memn2n):
    _, _, (_, metrics) = memn2n
    accs = [metrics[f"replicas/{r}/val/acc"] for r in range(R)]
    selected = accs.index(max(accs))  # the default rule: the family's monitor, val/acc max
    assert metrics["replicas"] == R and metrics["replica_selected"] == selected
    for key in ("val/acc", "test/acc", "train/error"):
        values = [metrics[f"replicas/{r}/{key}"] for r in range(R)]
        assert metrics[key] == values[selected]
        mean = sum(values) / R
        assert metrics[f"replicas/mean/{key}"] == pytest.approx(mean)
        assert metrics[f"replicas/std/{key}"] == pytest.approx(math.sqrt(sum((v - mean) ** 2 for v in values) / (R - 1)))


def test_a_resumed_replicas_run_ends_where_an_unbroken_one_does(memn2n):
    root, _, (steps, unbroken) = memn2n
    out = root / "resumed"
    first, _ = train(out, *MEMN2N, f"replicas={R}", "trainer.max_epochs=1")
    (out / "metrics.json").unlink()  # what a run killed after its first epoch's checkpoint leaves
    second, resumed = train(out, *MEMN2N, f"replicas={R}", "resume=auto")
    assert [s[r] for s in first + second for r in range(R)] == [s[r] for s in steps for r in range(R)]
    for r in range(R):  # each replica's random streams, best state and batch order came back from the checkpoint
        assert resumed[f"replicas/{r}/val/loss"] == unbroken[f"replicas/{r}/val/loss"]
        assert resumed[f"replicas/{r}/test/acc"] == unbroken[f"replicas/{r}/test/acc"]


def test_load_run_picks_a_replica(memn2n):
    root, _, _ = memn2n
    selected = json.loads((root / "replicas" / "metrics.json").read_text())["replica_selected"]
    for r, seed in ((1, 1), (None, selected)):
        model = attnmem.load_run(root / "replicas", replica=r).model
        expected = attnmem.load_run(root / f"seed{seed}").model
        for (name, p), q in zip(model.state_dict().items(), expected.state_dict().values()):
            torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5, msg=name)
    with pytest.raises(UserError) as err:
        attnmem.load_run(root / "replicas", replica=R)
    one_line(str(err.value), f"replica={R}", f"replica=0..{R - 1}")


def test_eval_py_evaluates_every_replica_of_a_run(memn2n, compose_cfg, tmp_path):
    from attnmem.runtime import run

    root, _, (_, trained) = memn2n
    metrics = run.evaluate(compose_cfg(f"run_dir={root / 'replicas'}", config_name="eval", run_dir=tmp_path / "ev"))
    for r in range(R):
        assert metrics[f"replicas/{r}/test/acc"] == trained[f"replicas/{r}/test/acc"]
    assert metrics["test/acc"] == trained["test/acc"]


def _shared_initialisation(build):
    def broken(cfg, count, datamodule, family_module):
        datamodule, module = build(cfg, count, datamodule, family_module)
        for member in module.members[1:]:
            member.net.load_state_dict(module.members[0].net.state_dict())
        return datamodule, module

    return broken


def _shared_batch_order(iterate):
    def broken(self):
        for batches in iterate(self):
            yield [batches[0]] * len(batches)

    return broken


def _one_clipping_norm(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None):
    torch.nn.utils.clip_grad_norm_([p for p in self.parameters() if p.grad is not None], gradient_clip_val)


@pytest.mark.parametrize("broken", ["initialisation", "batch order", "clipping norm"])
def test_the_equivalence_check_fails_for_replicas_that_share(broken, memn2n):
    from attnmem.replicas import build as replicas
    from attnmem.replicas.module import Replicas
    from attnmem.replicas.streams import ReplicaLoader

    root, singles, _ = memn2n
    patches = {
        "initialisation": {(replicas, "build"): _shared_initialisation(replicas.build)},
        "batch order": {(ReplicaLoader, "__iter__"): _shared_batch_order(ReplicaLoader.__iter__)},
        "clipping norm": {(Replicas, "configure_gradient_clipping"): _one_clipping_norm},
    }[broken]
    quick = [*MEMN2N, f"replicas={R}", "trainer.max_epochs=1", "callbacks.plots=null"]  # the first 25 steps
    steps, _ = train(root / broken.replace(" ", "_"), *quick, patches=patches)
    assert max(worst_gap(steps, singles[r][0], r, steps=25) for r in range(R)) > 1e-3


def test_ntm_replicas_reproduce_single_runs(tmp_path):
    steps, metrics = train(tmp_path / "replicas", *NTM, "replicas=2")
    for r in range(2):
        single_steps, single = train(tmp_path / f"seed{r}", *NTM, f"seed={r}")
        assert worst_gap(steps, single_steps, r) < 1e-5
        assert metrics[f"replicas/{r}/val/bit_errors"] == pytest.approx(single["val/bit_errors"], rel=1e-6)


@pytest.mark.parametrize(("model", "path"), [
    (["model=dnc"], "one batched vmap"),  # its link step's own autograd Function, batched by its vmap rule
    (["model=transformer_sequence"], "a loop"),  # dropout 0.1: each replica's masks from its own stream
])
def test_other_models_reproduce_single_runs(model, path, tmp_path, capsys):
    tiny = [*NTM, "data.steps_per_epoch=10", *model]
    steps, metrics = train(tmp_path / "replicas", *tiny, "replicas=2")
    assert path in capsys.readouterr().out
    for r in range(2):
        single_steps, single = train(tmp_path / f"seed{r}", *tiny, f"seed={r}")
        assert worst_gap(steps, single_steps, r, steps=20) < 1e-5
        assert metrics[f"replicas/{r}/val/loss"] == pytest.approx(single["val/loss"], rel=1e-5)


@pytest.mark.parametrize(("option", "path"), [
    ("model.tying=layerwise", "one batched vmap"),  # H is a weight but no lookup table: no fold
    ("model.tying=adjacent", "one batch of all replicas' rows"),  # every weight a table: `fold`
    ("model.tying=layerwise model.nil_gradient=true", "one batched vmap"),  # each replica's nil row its own
    ("model.tying=adjacent model.nil_gradient=true", "one batch of all replicas' rows"),
    # Wᵀ = C^K over every word and time word: each replica's logits from its own C^K and T_C
    ("model.answer_softmax=vocabulary model.time_word=true model.nil_gradient=true", "one batch of all replicas' rows"),
    ("model.answer_softmax=vocabulary model.time_word=true", "one batch of all replicas' rows"),
])
def test_memn2n_replicas_fold_where_every_weight_is_a_table_else_vmap(option, path, tmp_path, capsys):
    quick = [*MEMN2N, *option.split(), "trainer.max_epochs=1", "callbacks.plots=null"]
    steps, metrics = train(tmp_path / "replicas", *quick, "replicas=2")
    assert path in capsys.readouterr().out
    single_steps, single = train(tmp_path / "seed1", *quick, "seed=1")
    assert worst_gap(steps, single_steps, 1, steps=25) < 1e-5
    assert metrics["replicas/1/val/loss"] == pytest.approx(single["val/loss"], rel=1e-5)


def test_aligned_pads_the_named_keys_along_dim_1_to_the_longest():
    from attnmem.replicas.batch import aligned

    short = {"story": torch.ones(2, 3, 4, dtype=torch.long), "rn_keys": torch.zeros(2, 4), "answer": torch.zeros(2)}
    long = {"story": torch.ones(2, 5, 4, dtype=torch.long), "rn_keys": torch.zeros(2, 6), "answer": torch.ones(2)}
    out = aligned([short, long], {"story": 0, "rn_keys": 1.0, "absent": 0})
    assert out[0]["story"].shape == (2, 5, 4) and out[0]["story"].dtype == torch.long
    assert out[0]["story"][:, :3].eq(1).all() and out[0]["story"][:, 3:].eq(0).all()
    assert out[0]["rn_keys"].tolist() == [[0, 0, 0, 0, 1, 1]] * 2
    assert out[1]["story"] is long["story"] and out[0]["answer"] is short["answer"]  # the longest and other keys as is
    assert short["story"].shape == (2, 3, 4)  # the batches given are left as they were


@pytest.mark.parametrize("tying", ["adjacent", "layerwise"])  # folded into one batch, or one vmap
def test_memn2n_replicas_of_different_story_lengths_still_take_one_batched_step(tying, tmp_path):
    # generated task 2: the replicas' batches hold different numbers of sentences on most steps; padded with empty
    # slots (and RN's keys), each step is still one batched forward, and each replica still its seed's single run
    from attnmem.replicas import module as replicas
    from attnmem.replicas.batch import Batched

    quick = [*MEMN2N, "data.tasks=[2]", f"model.tying={tying}", "trainer.max_epochs=1", "callbacks.plots=null"]
    lengths, forwards = [], []

    def recording_aligned(batches, pads):
        lengths.append({b["story"].shape[1] for b in batches})
        return aligned(batches, pads)

    def recording_call(self, nets, batches):
        forwards.append({b["story"].shape[1] for b in batches})
        return call(self, nets, batches)

    aligned, call = replicas.aligned, Batched.__call__
    patches = {(replicas, "aligned"): recording_aligned, (Batched, "__call__"): recording_call}
    steps, metrics = train(tmp_path / "replicas", *quick, "replicas=2", patches=patches)
    assert len(steps) == len(forwards) == 25 and all(len(s) == 1 for s in forwards)  # every step batched, one shape
    assert sum(len(s) > 1 for s in lengths) >= 15  # though the batches came in different shapes
    single_steps, single = train(tmp_path / "seed1", *quick, "seed=1")
    assert worst_gap(steps, single_steps, 1, steps=25) < 1e-5
    assert metrics["replicas/1/val/acc"] == single["val/acc"]
    assert metrics["replicas/1/val/loss"] == pytest.approx(single["val/loss"], rel=1e-5)


@pytest.mark.parametrize("nil", ["model.nil_gradient=true", "model.nil_gradient=false"])
def test_the_memn2n_recipe_reproduces_single_runs(nil, tmp_path):
    # the paper recipe: linear start (on every replica), SGD and MultiStepLR, summed loss, the last state, batches
    # drawn with replacement, and each weight matrix clipped by its own spectral norm (at 2 here, so it clips on most
    # steps; the recipe's is 40), with the nil word's gradient in it or not; generated task 2, whose stories differ in
    # length, so the batches are padded
    recipe = [FAST[0], "experiment=memn2n_babi", "data=babi_gen", "data.tasks=[2]", "data.source.num_train=200",
              "data.source.num_val=50", "data.source.num_test=50", "trainer.max_epochs=3",
              "callbacks.linear_start.epochs=1", "scheduler.milestones=[1]", "callbacks.plots=null",
              "trainer.gradient_clip_val=2", nil]
    steps, metrics = train(tmp_path / "replicas", *recipe, "replicas=2")
    for r in range(2):
        single_steps, single = train(tmp_path / f"seed{r}", *recipe, f"seed={r}")
        assert worst_gap(steps, single_steps, r, steps=18) < 1e-5  # 200 questions, 32 drawn a batch: 6 a epoch
        assert metrics[f"replicas/{r}/val/error"] == single["val/error"]
        assert metrics[f"replicas/{r}/train/loss"] == pytest.approx(single["train/loss"], rel=1e-5)


def test_each_replica_keeps_its_best_state_and_stops_on_its_own_patience(compose_cfg):
    from attnmem.runtime import run

    _, module, trainer = run.setup(compose_cfg(FAST[0], *MEMN2N[len(FAST):], "replicas=2", "callbacks.early_stopping.patience=2"))
    assert not [c for c in trainer.callbacks if isinstance(c, L.pytorch.callbacks.EarlyStopping)]  # one per replica
    weights = module.members[0].net.memn2n.B.weight
    for epoch, acc in enumerate([0.5, 0.6, 0.6, 0.55]):
        with torch.no_grad():
            weights.fill_(epoch)
        module._keep_best(0, {"val/acc": acc})
        module._keep_best(1, {"val/acc": 0.1 * epoch})
    assert module.best_score == [0.6, pytest.approx(0.3)] and module.wait == [2, 0]
    assert module.stopped[0] and not module.stopped[1]  # two epochs without improvement: patience 2
    assert float(module.best_state[0]["memn2n.B.weight"][0, 0]) == 1.0  # the state of epoch 1, its first best


def test_each_replica_stops_past_the_stopping_threshold_as_a_single_run_does(compose_cfg):
    from attnmem.runtime import run

    _, module, _ = run.setup(compose_cfg(FAST[0], *MEMN2N[len(FAST):], "replicas=3",
                                         "+callbacks.early_stopping.stopping_threshold=0.9"))
    for acc0, acc1, acc2 in [(0.5, 0.8, 0.2), (0.95, 0.9, 0.3)]:
        for r, acc in enumerate((acc0, acc1, acc2)):
            module._keep_best(r, {"val/acc": acc})
    # Lightning's rule: strictly past the threshold (0.9 is not), whatever the patience
    assert "past stopping_threshold 0.9" in module.stopped[0] and not module.stopped[1] and not module.stopped[2]
    assert module.active() == [1, 2]


def test_a_run_whose_replicas_stop_at_the_threshold_ends_early_and_reports_why(tmp_path):
    # 2 epochs of 25 steps; every replica is past 0.0 at the first validation, so the run ends after epoch 1
    _, metrics = train(tmp_path, FAST[0], *MEMN2N[len(FAST):], "replicas=2",
                       "+callbacks.early_stopping.stopping_threshold=0.0")
    assert metrics["global_step"] == 25
    assert all("past stopping_threshold 0.0" in metrics[f"replicas/{r}/stopped"] for r in range(2))


@pytest.mark.parametrize(("overrides", "fragments"), [
    ([*MEMN2N, "replicas=0"], ["replicas=0", ">= 1"]),
    ([*FAST, "replicas=2", "model=hopfield"], ["replicas=2", "no trainable parameters", "replicas=1"]),
    ([*MEMN2N, "replicas=2", "replica_select=val/acc"], ["replica_select=val/acc", "<metric>:<min|max>"]),
    ([*MEMN2N, "replicas=2", "replica_select=test/acc:max"], ["replica_select=test/acc:max", "train/ or val/"]),
    ([*MEMN2N, "replicas=2", "replica_select=val/nope:max"], ["replica_select=val/nope:max", "val/acc", "val/loss"]),
    ([*NTM, "replicas=2", "+data.curriculum={levels:[2],threshold:0}"], ["replicas=2", "data.curriculum"]),
    ([*MEMN2N, "replicas=2", "scheduler={_target_:attnmem.tasks.schedules.plateau,_partial_:true}"],
     ["replicas=2", "scheduler=ReduceLROnPlateau"]),
    ([*MEMN2N, "replicas=2", "+callbacks.linear_start={_target_:attnmem.callbacks.linear_start.LinearStart,patience:1}"],
     ["replicas=2", "callbacks.linear_start.patience"]),
])
def test_bad_replica_options_stop_in_one_line(overrides, fragments, compose_cfg):
    from attnmem.runtime import run

    with pytest.raises(UserError) as err:
        run.train(compose_cfg(*overrides, "trainer.max_epochs=1"))
    one_line(str(err.value), *fragments)


def test_more_replicas_than_memory_holds_are_refused_with_the_number_that_fits(compose_cfg, monkeypatch):
    from attnmem.replicas import build as replicas
    from attnmem.runtime import run

    _, single, _ = run.setup(compose_cfg(*MEMN2N))
    params = sum(p.numel() for p in single.net.parameters())
    monkeypatch.setattr(replicas, "_available_bytes", lambda device: 2 * 3 * replicas.BYTES_PER_PARAMETER * params)
    with pytest.raises(UserError) as err:
        run.setup(compose_cfg(*MEMN2N, "replicas=10"))
    one_line(str(err.value), "replicas=10", "use replicas=3 or fewer")


def test_the_learning_curves_are_the_selected_replicas():
    from attnmem.callbacks.plots import curves

    logged = {"val/acc": {0: 0.5}, "replicas/0/val/acc": {0: 0.4}, "replicas/1/val/acc": {0: 0.6},
              "replicas/1/train/loss": {0: 1.0}, "replicas/1/val/task3/acc": {0: 0.7}, "replicas/mean/val/acc": {0: 0.5}}
    assert curves(logged) == {"val/acc": {0: 0.5}}  # a single run's (here: the replicas' mean while training)
    assert curves(logged, "replicas/1/") == {"val/acc": {0: 0.6}, "train/loss": {0: 1.0}}
