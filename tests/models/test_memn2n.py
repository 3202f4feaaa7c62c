"""MemN2N: shapes over every score, masking, PE values, tying, linear start, a learning check."""

from __future__ import annotations

import functools
import math
from types import SimpleNamespace

import lightning as L
import pytest
import torch
import torch.nn.functional as F
from conftest import one_line
from hydra.utils import instantiate
from torch.utils.data import DataLoader

from attnmem.attention import Additive, Bilinear, Cosine, Dot, ScaledDot
from attnmem.blocks.embedding import lookup
from attnmem.blocks.output import Output
from attnmem.blocks.position_encoding import position_encoding
from attnmem.callbacks.linear_start import LinearStart
from attnmem.core.errors import UserError
from attnmem.models.memn2n import MemN2N

torch.set_num_threads(1)

SCORES = [Dot, ScaledDot, Bilinear, Additive, Cosine]
SIZES = {"vocab_size": 12, "num_answers": 5, "memory_size": 6, "sentence_len": 3}


def make_model(**kw) -> MemN2N:
    args = dict(SIZES, score=functools.partial(Dot)) | kw
    return MemN2N(**args)


def run(model: MemN2N, batch: dict) -> Output:
    """Logits and per-hop weights of a qa batch through the tensor forward, `model(story, query)`."""
    pred, attention = model(batch["story"], batch["query"], return_attention=True)  # (B, A), (B, hops, S)
    return Output(pred=pred, attention=list(attention.unbind(1)))


def babi1(n: int, g: torch.Generator, persons: int = 4, places: int = 5, slots: int = 6) -> dict:
    """Stories "p went l" (2..slots sentences); query "where p"; answer: p's most recent place."""
    where, went, person0, place0 = 1, 2, 3, 3 + persons
    who = torch.randint(persons, (n, slots), generator=g)
    place = torch.randint(places, (n, slots), generator=g)
    story = torch.stack([who + person0, torch.full_like(who, went), place + place0], -1)  # (n, S, 3)
    length = torch.randint(2, slots + 1, (n,), generator=g)
    real = torch.arange(slots) < length[:, None]  # (n, S)
    story[~real] = 0
    q = who[torch.arange(n), (torch.rand(n, generator=g) * length).long()]  # someone in the story
    last = ((who == q[:, None]) & real).long().mul(torch.arange(1, slots + 1)).argmax(-1)
    query = torch.stack([torch.full_like(q, where), q + person0], -1)  # (n, 2)
    return {"story": story, "query": query, "answer": place[torch.arange(n), last], "task": torch.zeros_like(q)}


@pytest.fixture(scope="module")
def batch() -> dict:
    return babi1(8, torch.Generator().manual_seed(0))


@pytest.mark.parametrize("score", SCORES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("tying", ["adjacent", "layerwise"])
@pytest.mark.parametrize("encoding", ["position", "bow"])
@pytest.mark.parametrize("hops", [1, 2, 3])
def test_shapes_and_grads(batch, score, tying, encoding, hops):
    torch.manual_seed(0)
    model = make_model(score=functools.partial(score), tying=tying, encoding=encoding, hops=hops)
    out = run(model, batch)
    assert isinstance(out, Output)
    assert out.pred.shape == (8, 5)
    assert len(out.attention) == hops and all(w.shape == (8, 6) for w in out.attention)
    F.cross_entropy(out.pred, batch["answer"], reduction="sum").backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert model.W.weight.grad.abs().sum() > 0 and model.C[-1].weight.grad.abs().sum() > 0


@pytest.mark.parametrize("training", [True, False])
def test_masked_empty_slots_get_zero_weight_and_rows_sum_to_one(batch, training):
    model = make_model(hops=3, empty_memories="mask").train(training)
    real = batch["story"].ne(0).any(-1)  # (B, S)
    assert (~real).any()
    for weights in run(model, batch).attention:
        assert torch.all(weights[~real] == 0)
        torch.testing.assert_close(weights.sum(-1), torch.ones(8))


def test_position_encoding_by_hand():
    # l_kj = 1 + 4 (k - 1.5)(j - 2) / 6 for d = 2, J = 3; rows j, columns k
    expected = torch.tensor([[4 / 3, 2 / 3], [1.0, 1.0], [2 / 3, 4 / 3]])
    torch.testing.assert_close(position_encoding(3, 2), expected)
    model = make_model(embed_dim=2)
    torch.testing.assert_close(model.position, expected)
    torch.testing.assert_close(make_model(embed_dim=2, encoding="bow").position, torch.ones(3, 2))


def test_the_time_word_counts_in_j_and_weights_the_time_embedding_by_l_j():
    # the reference code's time word: J = 3 + 1 for d = 2, so l_kj = 1 + 4 (k - 1.5)(j - 2.5) / 8
    model = make_model(embed_dim=2, time_word=True)
    expected = torch.tensor([[1.375, 0.625], [1.125, 0.875], [0.875, 1.125], [0.625, 1.375]])
    torch.testing.assert_close(model.position, expected)
    torch.testing.assert_close(model.time_weight, torch.tensor([0.625, 1.375]))
    story = torch.tensor([[[4, 5, 0], [6, 0, 0]] + [[0, 0, 0]] * 4])  # (1, 6, 3): two sentences
    real = story.ne(0).any(-1)  # (1, 6)
    time = model._time_index(real, {})  # (1, 6): [1, 0, ...]
    memory = model._memories(story, real, time)[0][id(model.A[0])]  # (1, 6, 2)
    words = model.A[0].weight.detach()
    first = words[4] * expected[0] + words[5] * expected[1] + model.T_A[0].weight[1].detach() * expected[3]
    torch.testing.assert_close(memory[0, 0], first)
    assert torch.all(memory[0, 2:] == 0)  # on a CPU only the real sentences are encoded: every read masks the rest
    # under vmap every slot is encoded: the real ones alike
    everywhere = torch.vmap(lambda s, t: model._memories(s, s.ne(0).any(-1), t)[0][id(model.A[0])])(story, time)
    torch.testing.assert_close(everywhere[0, :2], memory[0, :2], rtol=0, atol=0)
    assert make_model(embed_dim=2, time_word=True, temporal=False).position.shape == (3, 2)  # no time, no word
    assert make_model(embed_dim=2).time_weight is None


def test_weight_matrices_pair_each_embedding_with_its_time_table():
    model = make_model(hops=3)
    groups = model.weight_matrices()
    tables = [*model.A, model.C[-1]]
    times = [*model.T_A, model.T_C[-1]]
    assert [[id(p) for p in g] for g in groups] == [[id(e.weight), id(t.weight)] for e, t in zip(tables, times)]
    layerwise = make_model(hops=3, tying="layerwise").weight_matrices()
    assert len(layerwise) == 2 and all(len(g) == 2 for g in layerwise)
    assert [len(g) for g in make_model(hops=2, temporal=False).weight_matrices()] == [1, 1, 1]


def test_encode_weights_words_by_position_and_ignores_pad():
    model = make_model(embed_dim=2)
    words = torch.tensor([[4, 5, 0]])
    embed = model.A[0].weight.detach()
    expected = embed[4] * torch.tensor([4 / 3, 2 / 3]) + embed[5] * torch.tensor([1.0, 1.0])
    torch.testing.assert_close(model._encode(model.A[0], words)[0], expected)
    assert torch.all(embed[0] == 0)


@pytest.mark.parametrize("padding_idx", [0, None])
def test_lookup_gives_embeddings_values_and_gradients_exactly_and_under_vmap(padding_idx):
    weight = torch.randn(7, 3, requires_grad=True)
    ids = torch.tensor([[1, 0, 4, 4], [6, 1, 0, 4]])  # repeated ids, the pad word
    upstream = torch.randn(2, 4, 3)
    ours = lookup(weight, ids, padding_idx)
    (grad,) = torch.autograd.grad((ours * upstream).sum(), weight)
    theirs = F.embedding(ids, weight, padding_idx)
    (expected,) = torch.autograd.grad((theirs * upstream).sum(), weight)
    assert torch.equal(ours, theirs) and torch.equal(grad, expected)
    assert torch.all(grad[0] == 0) == (padding_idx == 0) and torch.all(grad[[2, 3, 5]] == 0)
    # R = 2 tables under vmap, as the replicas' batched forward takes them
    tables = torch.randn(2, 7, 3, requires_grad=True)
    (grads,) = torch.autograd.grad((torch.vmap(lambda w, i: lookup(w, i, padding_idx))(tables, ids) * upstream).sum(),
                                   tables)
    for r in range(2):
        (one,) = torch.autograd.grad((F.embedding(ids[r], tables[r], padding_idx) * upstream[r]).sum(), tables)
        torch.testing.assert_close(grads[r], one[r], rtol=0, atol=0)


def test_time_index_counts_back_from_the_most_recent_sentence():
    model = make_model(random_noise=0.5).eval()
    mask = torch.tensor([[True, True, True, False, False, False], [True] * 6])
    assert model.draws(mask.unsqueeze(-1).long()) == {}  # RN draws only while training
    torch.testing.assert_close(model._time_index(mask, {})[0, :3], torch.tensor([2, 1, 0]))
    torch.testing.assert_close(model._time_index(mask, {})[1], torch.tensor([5, 4, 3, 2, 1, 0]))
    torch.manual_seed(0)
    story = mask.repeat(200, 1).unsqueeze(-1).long()  # (400, 6, 1)
    drawn = model.train().draws(story)
    assert drawn["rn_blank"].shape == (400, 1) and drawn["rn_keys"].shape == (400, 6 + 3)  # ceil(6 * 0.5) extra
    noisy = model._time_index(mask.repeat(200, 1), drawn)  # (400, 6)
    short, full = noisy[0::2, :3], noisy[1::2]
    assert torch.all(short[:, :-1] > short[:, 1:]) and short.max() <= 4  # 3 sentences + <= 2 blanks
    assert (short != torch.tensor([2, 1, 0])).any(-1).float().mean() > 0.2  # RN moved some indices
    assert torch.all(full[:, :-1] >= full[:, 1:]) and full.max() == 5  # capped at memory_size - 1


def test_adjacent_tying_shares_modules():
    model = make_model(hops=3)
    for k in range(2):
        assert model.A[k + 1] is model.C[k] and model.T_A[k + 1] is model.T_C[k]
    assert model.B is model.A[0] and model.H is None
    # V=5, S=4, d=2, K=2, 3 answers: 3 word + 3 time embeddings + W
    tiny = MemN2N(vocab_size=5, num_answers=3, memory_size=4, sentence_len=3, score=Dot, embed_dim=2, hops=2)
    assert sum(p.numel() for p in tiny.parameters()) == 3 * 5 * 2 + 3 * 4 * 2 + 2 * 3


def test_layerwise_tying_shares_modules():
    model = make_model(hops=3, tying="layerwise")
    assert all(a is model.A[0] for a in model.A) and all(c is model.C[0] for c in model.C)
    assert all(t is model.T_A[0] for t in model.T_A) and all(t is model.T_C[0] for t in model.T_C)
    assert model.A[0] is not model.C[0] and model.B is not model.A[0] and model.H is not None
    # B, A, C + T_A, T_C + H + W
    tiny = MemN2N(
        vocab_size=5, num_answers=3, memory_size=4, sentence_len=3, score=Dot, embed_dim=2, hops=2, tying="layerwise"
    )
    assert sum(p.numel() for p in tiny.parameters()) == 3 * 5 * 2 + 2 * 4 * 2 + 2 * 2 + 2 * 3
    no_time = make_model(hops=2, temporal=False)
    assert no_time.T_A is None and sum(p.numel() for p in no_time.parameters()) == 3 * 12 * 20 + 20 * 5


def test_linear_start_skips_the_softmax(batch):
    model = make_model(hops=2).eval()
    model.linear_start = True
    real = batch["story"].ne(0).any(-1)  # (B, S)
    weights = run(model, batch).attention[0]
    u = model._encode(model.B, batch["query"])  # (B, d)
    m = model._encode(model.A[0], batch["story"]) + model.T_A[0](model._time_index(real, {}))  # (B, S, d)
    expected = (m @ u.unsqueeze(-1)).squeeze(-1).masked_fill(~real, 0.0)  # Dot, no softmax
    torch.testing.assert_close(weights, expected)
    assert not torch.allclose(weights.sum(-1), torch.ones(8))
    model.linear_start = False
    # the memory_size - n empty slots are zero vectors in the softmax: Dot gives them score 0
    empty = SIZES["memory_size"] - real.sum(-1, keepdim=True)  # (B, 1)
    with_empty = torch.cat([expected.masked_fill(~real, -torch.inf), empty.log()], -1)
    torch.testing.assert_close(run(model, batch).attention[0], torch.softmax(with_empty, -1)[:, :-1])
    assert torch.all(run(model, batch).attention[0].sum(-1) < 1)
    model.empty_memories = "mask"
    torch.testing.assert_close(run(model, batch).attention[0], torch.softmax(expected.masked_fill(~real, -torch.inf), -1))


def test_empty_slots_take_the_scores_value_of_a_zero_key(batch):
    torch.manual_seed(0)
    model = make_model(hops=1, score=functools.partial(Additive)).eval()  # Additive: score(u, 0) is not 0
    real = batch["story"].ne(0).any(-1)  # (B, S)
    u = model._encode(model.B, batch["query"]).unsqueeze(1)  # (B, 1, d)
    m = model._encode(model.A[0], batch["story"]) + model.T_A[0](model._time_index(real, {}))  # (B, S, d)
    score = model.scores[0]
    nothing = score(u, torch.zeros_like(m[:, :1])).squeeze(1)  # (B, 1)
    assert nothing.abs().min() > 1e-3
    empty = SIZES["memory_size"] - real.sum(-1, keepdim=True)  # (B, 1)
    scores = torch.cat([score(u, m).squeeze(1).masked_fill(~real, -torch.inf), nothing + empty.log()], -1)
    torch.testing.assert_close(run(model, batch).attention[0], torch.softmax(scores, -1)[:, :-1])


def fake_trainer(epoch: int, opt, scheduler, loop=None, val_loss=None) -> SimpleNamespace:
    return SimpleNamespace(
        current_epoch=epoch, optimizers=[opt], lr_scheduler_configs=[SimpleNamespace(scheduler=scheduler)],
        fit_loop=loop, sanity_checking=False, callback_metrics={} if val_loss is None else {"val/loss": val_loss},
    )


def run_epochs(callback, module, opt, scheduler, max_epochs, val_losses=()) -> tuple[list, SimpleNamespace]:
    """(LS flag, lr) per epoch as Lightning would step them, with the scripted validation losses; and the loop."""
    loop, seen, epoch = SimpleNamespace(max_epochs=max_epochs), [], 0
    callback.on_train_start(fake_trainer(0, opt, scheduler, loop), module)
    while epoch < loop.max_epochs:
        callback.on_train_epoch_start(fake_trainer(epoch, opt, scheduler, loop), module)
        seen.append((module.net.linear_start, opt.param_groups[0]["lr"]))
        opt.step()
        loss = val_losses[epoch] if epoch < len(val_losses) else 1.0 / (epoch + 1)  # falling unless scripted
        callback.on_validation_end(fake_trainer(epoch, opt, scheduler, loop, loss), module)
        scheduler.step()  # Lightning steps an epoch scheduler after validation and on_train_epoch_end
        epoch += 1
    return seen, loop


def test_linear_start_callback_toggles_and_restarts_the_schedule():
    module = SimpleNamespace(net=make_model())
    opt = torch.optim.SGD(module.net.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    callback = LinearStart(epochs=3, lr=0.005)
    seen = []
    for epoch in range(8):
        callback.on_train_epoch_start(fake_trainer(epoch, opt, scheduler), module)
        seen.append((module.net.linear_start, opt.param_groups[0]["lr"]))
        opt.step()
        scheduler.step()  # Lightning steps an epoch scheduler after on_train_epoch_end
    # LS at 0.005 (a StepLR step during LS is overridden), then 0.01 halved every 2 epochs after LS
    lrs = [0.005, 0.005, 0.005, 0.01, 0.01, 0.005, 0.005, 0.0025]
    assert seen == [(e < 3, lr) for e, lr in enumerate(lrs)]
    # resumed mid-LS (a fresh callback): the scheduler's initial_lr is the configured lr
    opt.param_groups[0]["lr"] = 0.005
    LinearStart(epochs=3).on_train_epoch_start(fake_trainer(3, opt, scheduler), module)
    assert opt.param_groups[0]["lr"] == 0.01 and scheduler.last_epoch == 0
    assert callback.state_dict() == {"configured_lrs": [[0.01]], "end": 3, "best": math.inf, "stale": 0}


STALLS_AT_3 = [1.4, 1.1, 1.0, 1.2]  # validation losses: the first without a decrease at epoch 3


@pytest.mark.parametrize(("overrides", "val_losses", "ls", "per_rate"), [
    (["experiment=memn2n_babi"], STALLS_AT_3, 20, 25),  # one task: 20 LS epochs, then 100 halved every 25
    (["experiment=memn2n_babi_joint"], STALLS_AT_3, 30, 15),  # the reference code's fixed 30 epochs
    (["experiment=memn2n_babi10k_joint"], STALLS_AT_3, 10, 5),  # a fixed 10
    (["experiment=memn2n_babi10k_joint", "callbacks.linear_start.patience=1", "callbacks.linear_start.epochs=30",
      "trainer.max_epochs=50"], STALLS_AT_3, 4, 5),  # the paper's words: LS ends with the first stalled validation
    (["experiment=memn2n_babi10k_joint", "callbacks.linear_start.patience=1", "callbacks.linear_start.epochs=30",
      "trainer.max_epochs=50"], (), 30, 5),  # a loss that keeps falling: LS up to its cap
])  # fmt: skip
def test_joint_recipes_follow_the_papers_schedule(compose_cfg, overrides, val_losses, ls, per_rate):
    """Sukhbaatar et al. 2015, §4.2: on all tasks at once, 1k (10k) samples train 60 (20) epochs after linear start,
    the rate halved every 15 (5), one task 100 halved every 25; LS at 0.005. The reference code's train.m halves the
    rate when mod(epoch, step) == 0, before training that (1-based) epoch: 0-based epoch e runs at (e + 1) // step
    halvings, the last epoch at four."""
    cfg = compose_cfg(*overrides)
    module = SimpleNamespace(net=make_model())
    opt = instantiate(cfg.optimizer)(module.net.parameters())
    scheduler = instantiate(cfg.scheduler)(opt)
    callback = instantiate(cfg.callbacks.linear_start)
    seen, _ = run_epochs(callback, module, opt, scheduler, cfg.trainer.max_epochs, val_losses)
    main = [0.005 / 2 ** ((e + 1) // per_rate) for e in range(4 * per_rate)]
    assert [flag for flag, _ in seen] == [True] * ls + [False] * len(main)
    assert [lr for _, lr in seen] == pytest.approx([0.005] * ls + main, rel=1e-12)
    assert isinstance(opt, torch.optim.SGD)


def test_linear_start_with_patience_ends_when_the_validation_loss_stalls_and_keeps_the_main_run():
    module = SimpleNamespace(net=make_model())
    opt = torch.optim.SGD(module.net.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    callback = LinearStart(epochs=10, lr=0.005, patience=2)
    losses = [1.4, 1.1, 1.2, 1.05, 1.3, 1.2, 0.1]  # best 1.05 at epoch 3, not beaten at 4 and 5: LS ends after 5
    seen, loop = run_epochs(callback, module, opt, scheduler, 14, losses)
    assert loop.max_epochs == 10  # 14 - the 4 LS epochs left unused: the main run keeps its 4 epochs
    assert seen == [(True, 0.005)] * 6 + [(False, 0.01), (False, 0.01), (False, 0.005), (False, 0.005)]
    assert callback.state_dict() | {"configured_lrs": None} == {"configured_lrs": None, "end": 6, "best": 1.05,
                                                               "stale": 2}
    resumed = LinearStart(epochs=10, patience=2)
    resumed.load_state_dict(callback.state_dict())
    fresh_loop = SimpleNamespace(max_epochs=14)  # a resumed run's trainer, from the config
    resumed.on_train_start(fake_trainer(8, opt, scheduler, fresh_loop), module)
    resumed.on_train_epoch_start(fake_trainer(8, opt, scheduler, fresh_loop), module)
    assert fresh_loop.max_epochs == 10 and not module.net.linear_start
    unlimited, first = SimpleNamespace(max_epochs=-1), LinearStart(epochs=10, patience=1)
    for epoch in range(2):  # no decrease at epoch 1: LS ends, and a run without an epoch limit keeps none
        first.on_validation_end(fake_trainer(epoch, opt, scheduler, unlimited, 1.0), module)
    assert first.end == 2 and unlimited.max_epochs == -1
    with pytest.raises(ValueError, match="patience"):
        LinearStart(patience=0)


def test_linear_start_callback_without_lr_leaves_the_optimizer_alone():
    module = SimpleNamespace(net=make_model())
    opt = torch.optim.SGD(module.net.parameters(), lr=0.01)
    callback = LinearStart(epochs=1, lr=None)
    for epoch, expected in [(0, True), (1, False), (2, False)]:
        callback.on_train_epoch_start(fake_trainer(epoch, opt, None), module)
        assert module.net.linear_start is expected and opt.param_groups[0]["lr"] == 0.01


class _Task(L.LightningModule):
    def __init__(self, net: MemN2N) -> None:
        super().__init__()
        self.net, self.seen = net, []

    def training_step(self, batch, batch_idx):
        self.seen.append((self.current_epoch, self.net.linear_start, self.optimizers().param_groups[0]["lr"]))
        return F.cross_entropy(run(self.net, batch).pred, batch["answer"], reduction="sum")

    def configure_optimizers(self):
        opt = torch.optim.SGD(self.parameters(), lr=0.01)
        return [opt], [torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)]


def fit(tmp_path, task: _Task, callback: LinearStart, max_epochs: int, validate: bool = True) -> L.Trainer:
    data = babi1(8, torch.Generator().manual_seed(1))
    loader = DataLoader([{k: v[i] for k, v in data.items()} for i in range(8)], batch_size=4)
    trainer = L.Trainer(max_epochs=max_epochs, callbacks=[callback], logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path,
                        accelerator="cpu")
    trainer.fit(task, loader, loader if validate else None)
    return trainer


def test_linear_start_callback_in_a_trainer(tmp_path):
    task = _Task(make_model())
    fit(tmp_path, task, LinearStart(epochs=2, lr=0.005), max_epochs=4, validate=False)
    per_epoch = sorted(set(task.seen))
    assert per_epoch == [(0, True, 0.005), (1, True, 0.005), (2, False, 0.01), (3, False, 0.005)]


class _ScriptedValidation(_Task):
    """Logs `val/loss` from a script, one value per epoch."""

    def __init__(self, net: MemN2N, script: list[float], key: str = "val/loss") -> None:
        super().__init__(net)
        self.script, self.key = script, key

    def validation_step(self, batch, batch_idx):
        self.log(self.key, self.script[self.current_epoch])


def test_linear_start_with_patience_in_a_trainer_shortens_the_run(tmp_path, caplog):
    task = _ScriptedValidation(make_model(), [1.0, 1.5, 0.5, 0.4, 0.3, 0.2])
    with caplog.at_level("INFO", logger="attnmem.callbacks.linear_start"):
        trainer = fit(tmp_path, task, LinearStart(epochs=4, lr=0.005, patience=1), max_epochs=6)
    assert sorted(set(task.seen)) == [(0, True, 0.005), (1, True, 0.005), (2, False, 0.01), (3, False, 0.005)]
    assert trainer.current_epoch == 4  # 2 LS epochs + the main run's 2
    ours = [r.getMessage() for r in caplog.records if r.name == "attnmem.callbacks.linear_start"]
    assert ours == ["linear start ends after epoch 1 (val/loss 1.5, best 1, not lower for 1 validations): "
                    "the softmax is back from epoch 2, the run ends after epoch 3"]


def test_linear_start_with_patience_names_a_metric_validation_does_not_log(tmp_path):
    task = _ScriptedValidation(make_model(), [1.0] * 3, key="val/error")
    with pytest.raises(UserError) as err:
        fit(tmp_path, task, LinearStart(epochs=2, patience=1), max_epochs=3)
    one_line(str(err.value), "callbacks.linear_start.monitor=val/loss", "val/error", "patience=null")


def test_learns_most_recent_location_and_needs_temporal_encoding():
    g = torch.Generator().manual_seed(0)
    train, test = babi1(2000, g), babi1(500, g)
    accuracy = {}
    for temporal in (True, False):
        torch.manual_seed(0)
        model = make_model(hops=1, temporal=temporal)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        for _ in range(250):
            idx = torch.randint(2000, (32,))
            loss = F.cross_entropy(run(model, {k: v[idx] for k, v in train.items()}).pred, train["answer"][idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            pred = model.eval()(test["story"], test["query"]).argmax(-1)
        accuracy[temporal] = (pred == test["answer"]).float().mean().item()
    assert accuracy[True] > 0.95  # chance is 0.2
    assert accuracy[False] < 0.85  # without T_A / T_C "most recent" is not identifiable


@pytest.mark.parametrize(
    ("option", "value"),
    [("hops", 0), ("memory_size", 0), ("embed_dim", 0), ("vocab_size", 0), ("encoding", "onehot"),
     ("tying", "none"), ("random_noise", 1.5), ("sentence_len", 0)],
)  # fmt: skip
def test_bad_options_raise_naming_the_option(option, value):
    with pytest.raises(ValueError, match=option):
        make_model(**{option: value})


def test_a_vocabulary_softmax_scores_the_answers_first_then_every_other_word_and_time_word(batch):
    answers = [9, 7, 11, 8, 10]  # the babi1 places' word ids, in a shuffled class order
    model = make_model(answer_words=answers, answer_softmax="vocabulary", time_word=True, embed_dim=4).eval()
    pred = model(batch["story"], batch["query"])  # (B, V + S)
    assert pred.shape == (8, 12 + 6)
    others = [w for w in range(12) if w not in answers]
    torch.testing.assert_close(model.output_words, torch.tensor(answers + others))
    small = make_model(answer_words=answers, time_word=True, embed_dim=4).eval()
    small.load_state_dict(model.state_dict())
    torch.testing.assert_close(pred[:, :5], small(batch["story"], batch["query"]))  # the answers' logits as before
    C, T = model.C[-1].weight.detach(), model.T_C[-1].weight.detach()
    u = torch.linalg.lstsq(C[answers + others], pred[:, :12].T).solution.T  # u^{K+1} from 12 logits, d = 4: (B, d)
    torch.testing.assert_close(pred[:, :12], u @ C[answers + others].T, atol=1e-5, rtol=1e-4)  # one u fits all
    torch.testing.assert_close(pred[:, 12:], u @ T.T, atol=1e-5, rtol=1e-4)  # the time words, unweighted
    plain = make_model(answer_words=answers, answer_softmax="vocabulary")
    assert plain(batch["story"], batch["query"]).shape == (8, 12)  # without the time word, T is no word
    with pytest.raises(ValueError, match="answer_softmax"):
        make_model(answer_softmax="vocabulary")  # W is not C^K without the answers' word ids
    with pytest.raises(ValueError, match="answer_softmax"):
        make_model(answer_softmax="all")


def test_too_long_inputs_raise(batch):
    with pytest.raises(ValueError, match="sentence_len"):
        run(make_model(sentence_len=2), batch)
    with pytest.raises(ValueError, match="memory_size"):
        run(make_model(memory_size=4), batch)
    with pytest.raises(ValueError, match="epochs"):
        LinearStart(epochs=-1)


def test_linear_start_is_saved_with_the_weights():
    # a checkpoint taken during linear start must be evaluated without softmax too
    trained = make_model()
    trained.linear_start = True
    restored = make_model()
    assert not restored.linear_start
    restored.load_state_dict(trained.state_dict())
    assert restored.linear_start


def test_unknown_empty_memories_names_the_option():
    with pytest.raises(ValueError, match="empty_memories must be one of"):
        make_model(empty_memories="ignore")


def reference_forward(model: MemN2N, story: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
    """The reference code's forward (MemoryL.m, train.m) written out: every memory slot and every one of J positions
    materialised, each pad and empty slot the nil word (id 0, looked up like any word); the time word as a word of
    the table [E; T]. Logits (B, A)."""
    b, s, length = story.shape
    slots, words = model.memory_size, model.sentence_len  # the reference code's sz, max_words
    vocab = model.A[0].num_embeddings
    full = torch.zeros(b, slots, words + 1, dtype=torch.long)  # (B, sz, J): nil everywhere first
    full[:, :s, :length] = story
    real = story.ne(0).any(-1)  # (B, S)
    n = real.sum(-1)  # (B,)
    for row in range(b):  # the time word of real slot i: vocab + (its recency), slots left-aligned
        full[row, : n[row], -1] = vocab + torch.arange(int(n[row]) - 1, -1, -1)
    question = torch.zeros(b, words, dtype=torch.long)
    question[:, : query.shape[1]] = query
    position = model.position  # (J, d)

    def table(embed, times):  # (V + sz, d): the reference code's one lookup table of words and time words
        return torch.cat([embed.weight, times.weight])

    u = (model.B.weight[question] * position[:words]).sum(-2)  # (B, d)
    for k in range(model.hops):
        m = (table(model.A[k], model.T_A[k])[full] * position).sum(-2)  # (B, sz, d)
        c = (table(model.C[k], model.T_C[k])[full] * position).sum(-2)
        p = torch.softmax(torch.einsum("bd,bsd->bs", u, m), -1)  # (B, sz): every slot, the empty ones too
        u = u + torch.einsum("bs,bsd->bd", p, c)
    return u @ model.C[-1].weight[model.output_words].T


@pytest.mark.parametrize("packed", [True, False], ids=["cpu", "every-slot"])
def test_nil_gradient_gives_the_reference_codes_gradients_with_every_slot_and_position_materialised(batch, packed):
    torch.manual_seed(0)
    model = make_model(hops=2, time_word=True, random_noise=0, answer_words=[7, 8, 9, 10, 11], nil_gradient=True)
    story, query = batch["story"][:, :4, :2], batch["query"][:, :1]  # 4 of 6 slots, 2 of 3 words: pads to fill
    tables = [*model.A, model.C[-1], *model.T_A, model.T_C[-1]]
    with torch.no_grad():  # the nil row must read zero for the reference code's values to be ours
        assert all(float(e.weight[0].abs().sum()) == 0 for e in (*model.A, *model.C))
    if packed:
        ours = model(story, query)
    else:  # a GPU and vmap encode every slot: no packing
        ours = torch.vmap(lambda s, q: model(s, q))(story[:, None], query[:, None])[:, 0]
    theirs = reference_forward(model, story, query)
    torch.testing.assert_close(ours, theirs)
    grads = []
    for logits in (ours, theirs):
        model.zero_grad()
        torch.nn.functional.cross_entropy(logits, batch["answer"], reduction="sum").backward()
        grads.append([t.weight.grad.clone() for t in tables])
    for mine, reference in zip(*grads):
        torch.testing.assert_close(mine, reference)
    assert all(float(g[0].abs().sum()) > 0 for g in grads[0][:3])  # the nil row takes gradient in each table
    model.after_clipping()
    assert all(float(e.weight.grad[0].abs().sum()) == 0 for e in (*model.A, *model.C))


def test_without_nil_gradient_the_pad_row_takes_none_even_from_a_vocabulary_softmax(batch):
    model = make_model(hops=1, answer_words=[7, 8, 9, 10, 11], answer_softmax="vocabulary")
    torch.nn.functional.cross_entropy(run(model, batch).pred, batch["answer"]).backward()
    assert float(model.C[0].weight.grad[0].abs().sum()) > 0  # the softmax over every word scores the pad word too
    model.after_clipping()  # which the task calls after clipping: word id 0 stays a zero vector
    assert all(float(e.weight.grad[0].abs().sum()) == 0 for e in (*model.A, *model.C))


def test_the_tensor_forward_gives_logits_and_the_hops_weights(batch):
    torch.manual_seed(0)
    model = make_model(hops=2).eval()
    logits = model(batch["story"], batch["query"])
    again, attention = model(batch["story"], batch["query"], return_attention=True)
    assert logits.shape == (8, 5) and torch.equal(logits, again) and attention.shape == (8, 2, 6)
    with pytest.raises(ValueError, match=r"^MemN2N expects story \(B, S, L\) and query \(B, L\) word ids, got story "
                                         r"of shape \(8, 6, 3\) and query of shape \(8,\)$"):
        model(batch["story"], batch["query"][:, 0])


def test_the_score_by_name_class_or_factory_dot_by_default(batch):
    torch.manual_seed(0)
    default = MemN2N(**SIZES)
    assert all(type(s) is Dot for s in default.scores)
    assert all(type(s) is Cosine for s in make_model(score="cosine").scores)
    assert all(type(s) is Bilinear for s in make_model(score=Bilinear).scores)
    with pytest.raises(ValueError, match=r"^MemN2N: unknown score 'cos': one of 'dot'.*$"):
        make_model(score="cos")
