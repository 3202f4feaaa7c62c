"""core/compat.py: every private name attnmem uses is still in the installed torch / Lightning / Hydra / OmegaConf
(a failure names the symbol and the version), and each fallback gives what the private name gives."""

from __future__ import annotations

import inspect
import re
import types
from functools import partial
from typing import Any

import hydra
import lightning
import lightning as L
import omegaconf
import pytest
import torch
from conftest import ROOT
from hydra.utils import get_class
from lightning.pytorch.trainer.states import RunningStage
from omegaconf import DictConfig, OmegaConf
from torch import nn
from torch.utils.data import DataLoader

from attnmem.core import compat
from attnmem.core.autograd import Function
from attnmem.core.errors import UserError

VERSIONS = {"torch": torch.__version__, "lightning": lightning.__version__, "hydra": hydra.__version__,
            "omegaconf": omegaconf.__version__}

# (package, module, name): the private names compat.py reaches through `upstream`
PRIVATE = [
    ("torch", "torch._C", "_are_functorch_transforms_active"),
    ("torch", "torch._functorch.utils", "unwrap_dead_wrappers"),
    ("torch", "torch._C._functorch", "is_batchedtensor"),
    ("lightning", "lightning.pytorch.trainer.connectors.data_connector", "_process_dataloader"),
    ("hydra", "hydra._internal.callbacks", "Callbacks"),
]


def gone(package: str, symbol: str) -> str:
    """The failure message of a private name the installed package no longer has."""
    return f"{package} {VERSIONS[package]} no longer has {symbol}: see core/compat.py (its fallback, or a new path)"


def without(monkeypatch: pytest.MonkeyPatch, module: str, name: str) -> None:
    """Make `compat.upstream(module, name)` find nothing, as with an installed version that lacks it."""
    real = compat.upstream
    monkeypatch.setattr(compat, "upstream", lambda m, n: None if (m, n) == (module, name) else real(m, n))


@pytest.mark.parametrize("package", ["torch", "lightning", "hydra-core", "omegaconf"])
def test_pyproject_bounds_each_package_compat_reaches_into_and_admits_the_installed_one(package: str) -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    listed = [Requirement(d) for d in project["dependencies"] + project["optional-dependencies"]["train"]]
    (found,) = [r for r in listed if r.name == package]
    assert any(s.operator == "<" for s in found.specifier), f"pyproject.toml: {found} has no upper bound"
    installed = VERSIONS[package.removesuffix("-core")].split("+")[0]
    assert found.specifier.contains(installed), f"{package} {installed} is outside pyproject.toml's {found}"


@pytest.mark.parametrize(("package", "module", "name"), PRIVATE, ids=[f"{m}.{n}" for _, m, n in PRIVATE])
def test_the_private_name_is_still_upstream(package: str, module: str, name: str) -> None:
    assert compat.upstream(module, name) is not None, gone(package, f"{module}.{name}")


def test_upstream_is_none_for_a_missing_name_or_module() -> None:
    assert compat.upstream("torch", "no_such_name") is None
    assert compat.upstream("attnmem.no_such_module", "x") is None
    assert compat.upstream("torch", "tensor") is torch.tensor


# --- torch ---------------------------------------------------------------------------------------------------

class _Double(Function):
    """y = 2 x, with a hand-written backward."""

    @staticmethod
    def forward(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
        pass

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad * 2


def test_the_c_apply_of_autograd_functions_is_still_upstream() -> None:
    assert callable(getattr(super(torch.autograd.Function, _Double), "apply", None)), gone(
        "torch", "torch._C._FunctionBase.apply (super(torch.autograd.Function, cls).apply)")


@pytest.mark.parametrize("name", ["_are_functorch_transforms_active", "unwrap_dead_wrappers"])
def test_apply_without_the_shortcut_takes_torchs_path_with_the_same_values(monkeypatch: pytest.MonkeyPatch,
                                                                            name: str) -> None:
    x = torch.randn(3, requires_grad=True)
    fast = _Double.apply(x)
    (fast_grad,) = torch.autograd.grad(fast.sum(), x)
    without(monkeypatch, "torch._C" if name.startswith("_") else "torch._functorch.utils", name)
    bound = []
    real = inspect.signature
    monkeypatch.setattr(inspect, "signature", lambda f, *a, **k: bound.append(f) or real(f, *a, **k))
    slow = _Double.apply(x)
    (slow_grad,) = torch.autograd.grad(slow.sum(), x)
    assert bound, "the fallback is torch's own apply, which binds the arguments"
    assert torch.equal(fast, slow) and torch.equal(fast_grad, slow_grad)


def test_maybe_batched_tells_a_vmap_tensor_and_without_torchs_test_says_it_may_be(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    torch.func.vmap(lambda t: seen.append(compat.maybe_batched(t)) or t)(torch.ones(2, 3))
    assert seen == [True] and not compat.maybe_batched(torch.ones(2))
    without(monkeypatch, "torch._C._functorch", "is_batchedtensor")
    assert compat.maybe_batched(torch.ones(2))


def test_memn2n_without_the_batched_test_gives_the_same_logits(monkeypatch: pytest.MonkeyPatch) -> None:
    from attnmem.models.memn2n import MemN2N

    torch.manual_seed(0)
    net = MemN2N(vocab_size=12, num_answers=5, memory_size=4, sentence_len=3, embed_dim=6, hops=2).eval()  # no RN
    story = torch.tensor([[[1, 2, 0], [0, 0, 0], [3, 4, 5], [0, 0, 0]], [[6, 0, 0], [7, 8, 0], [0, 0, 0], [0, 0, 0]]])
    query = torch.tensor([[1, 3, 0], [6, 7, 8]])
    packed = net(story, query)  # on a CPU: the real sentences only
    without(monkeypatch, "torch._C._functorch", "is_batchedtensor")
    torch.testing.assert_close(net(story, query), packed)  # every slot encoded


def test_set_last_lr_sets_what_get_last_lr_reports_and_leaves_a_scheduler_without_it_alone() -> None:
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    assert hasattr(scheduler, "_last_lr"), gone("torch", "torch.optim.lr_scheduler.LRScheduler._last_lr")
    compat.set_last_lr(scheduler, [0.5])
    assert scheduler.get_last_lr() == [0.5]
    other = types.SimpleNamespace()
    compat.set_last_lr(other, [0.5])  # the fallback: nothing to set
    assert vars(other) == {}


# --- Lightning -----------------------------------------------------------------------------------------------

class _Tiny(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(2, 1)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return self.layer(batch).sum()

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.01)


class _Counts(L.Callback):
    """At each training epoch's end: Lightning's private step counter, and compat's fallback for it."""

    def __init__(self) -> None:
        self.private: list[int] = []
        self.fallback: list[int] = []

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        loop = trainer.fit_loop.epoch_loop
        self.private.append(compat.batches_that_stepped(trainer))
        stepped, loop._batches_that_stepped = loop._batches_that_stepped, None  # as if Lightning had no such counter
        try:
            self.fallback.append(compat.batches_that_stepped(trainer))
        finally:
            loop._batches_that_stepped = stepped


def _trainer(**kwargs: Any) -> L.Trainer:
    return L.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                     enable_progress_bar=False, enable_model_summary=False, **kwargs)


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> tuple[L.Trainer, _Counts, dict[str, Any]]:
    counts = _Counts()
    trainer = _trainer(max_epochs=2, callbacks=[counts])
    trainer.fit(_Tiny(), DataLoader(torch.randn(6, 2), batch_size=2))
    path = tmp_path_factory.mktemp("ckpt") / "last.ckpt"
    trainer.save_checkpoint(path)
    return trainer, counts, torch.load(path, weights_only=False)


def test_lightnings_step_counter_is_still_upstream_and_the_batch_count_gives_the_same(fitted: Any) -> None:
    trainer, counts, _ = fitted
    symbol = "lightning.pytorch.loops.training_epoch_loop._TrainingEpochLoop._batches_that_stepped"
    assert isinstance(getattr(trainer.fit_loop.epoch_loop, "_batches_that_stepped", None), int), gone("lightning",
                                                                                                     symbol)
    assert counts.private == [3, 6] and counts.fallback == counts.private


def test_a_checkpoint_still_records_the_step_counter_and_without_it_its_global_step(fitted: Any) -> None:
    _, _, state = fitted
    loop = state["loops"]["fit_loop"]["epoch_loop.state_dict"]
    assert "_batches_that_stepped" in loop, gone("lightning", "the checkpoint key epoch_loop.state_dict"
                                                              "._batches_that_stepped")
    assert compat.checkpoint_step(state) == 6
    del loop["_batches_that_stepped"]
    assert compat.checkpoint_step(state) == state["global_step"] == 6


def _loader() -> DataLoader:
    return DataLoader(list(range(8)), batch_size=2, shuffle=True, num_workers=1)


def test_process_dataloader_without_lightnings_gives_the_same_loader(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PL_SEED_WORKERS", "1")
    trainer = _trainer()
    lightnings = compat.process_dataloader(trainer, _loader(), RunningStage.TRAINING)
    without(monkeypatch, "lightning.pytorch.trainer.connectors.data_connector", "_process_dataloader")
    ours = compat.process_dataloader(trainer, _loader(), RunningStage.TRAINING)
    assert type(ours) is type(lightnings) and type(ours.sampler) is type(lightnings.sampler)
    assert isinstance(ours.worker_init_fn, partial) and isinstance(lightnings.worker_init_fn, partial)
    assert ours.worker_init_fn.func is lightnings.worker_init_fn.func
    assert ours.worker_init_fn.keywords == lightnings.worker_init_fn.keywords == {"rank": 0}


def test_process_dataloader_without_lightnings_refuses_a_parallel_strategy_in_one_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    without(monkeypatch, "lightning.pytorch.trainer.connectors.data_connector", "_process_dataloader")
    with pytest.raises(UserError, match=r"^replicas=R under a parallel strategy .* lightning \S+ lacks: pip install "
                                        r"'attnmem\[train\]'"):
        compat.process_dataloader(types.SimpleNamespace(world_size=2), _loader(), RunningStage.TRAINING)


# the classes that subclass Lightning's, and what they subclass (the keys of compat.SUBCLASSED)
SUBCLASSES = {
    "attnmem.callbacks.checkpoint.AtomicModelCheckpoint": "lightning.pytorch.callbacks.ModelCheckpoint",
    "attnmem.callbacks.early_stopping.EarlyStopping": "lightning.pytorch.callbacks.EarlyStopping",
    "attnmem.callbacks.csv_logger.CSVLogger": "lightning.pytorch.loggers.CSVLogger",
    "attnmem.callbacks.csv_logger._Writer": "lightning.pytorch.loggers.csv_logs.ExperimentWriter",
}


def _upstream_instance(path: str, tmp_path: Any) -> Any:
    cls = get_class(path)
    if cls.__name__ == "EarlyStopping":
        return cls(monitor="val/loss")
    return cls(str(tmp_path)) if "log" in path else cls()


@pytest.mark.parametrize("upstream", sorted(compat.SUBCLASSED))
def test_the_private_names_our_subclasses_use_are_still_upstream(upstream: str, tmp_path: Any) -> None:
    instance = _upstream_instance(upstream, tmp_path)
    for name in compat.SUBCLASSED[upstream]:
        assert hasattr(instance, name), gone("lightning", f"{upstream}.{name}")


@pytest.mark.parametrize("ours", sorted(SUBCLASSES))
def test_our_subclasses_use_no_private_name_of_lightning_that_compat_does_not_list(ours: str, tmp_path: Any) -> None:
    source = inspect.getsource(get_class(ours))
    used = set(re.findall(r"(?:self|super\(\))\.(_[a-z]\w*)", source)) | set(re.findall(r"def (_[a-z]\w*)", source))
    instance = _upstream_instance(SUBCLASSES[ours], tmp_path)
    private = {name for name in used if hasattr(instance, name)}
    assert private == set(compat.SUBCLASSED[SUBCLASSES[ours]]), (
        f"{ours} uses Lightning's private {sorted(private)}: list them in core/compat.py's SUBCLASSED")


# --- Hydra and OmegaConf -------------------------------------------------------------------------------------

class Recorder:
    """A Hydra callback that records its calls."""

    calls: list[tuple[str, str]] = []

    def __init__(self, name: str) -> None:
        self.name = name

    def on_job_start(self, config: Any, **kwargs: Any) -> None:
        Recorder.calls.append(("start", self.name))

    def on_job_end(self, config: Any, job_return: Any, **kwargs: Any) -> None:
        Recorder.calls.append(("end", self.name))


def _notified() -> list[tuple[str, str]]:
    target = f"{__name__}.Recorder"
    cfg = OmegaConf.create({"hydra": {"callbacks": {"a": {"_target_": target, "name": "a"},
                                                    "b": {"_target_": target, "name": "b"}}}})
    Recorder.calls = []
    callbacks = compat.hydra_callbacks(cfg)
    callbacks.on_job_start(config=cfg, task_function=print)
    callbacks.on_job_end(config=cfg, job_return=None)
    return Recorder.calls


def test_hydra_callbacks_without_hydras_class_are_called_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    hydras = _notified()
    without(monkeypatch, "hydra._internal.callbacks", "Callbacks")
    assert type(compat.hydra_callbacks(OmegaConf.create({}))).__name__ == "_Callbacks"
    assert _notified() == hydras == [("start", "a"), ("start", "b"), ("end", "b"), ("end", "a")]


def test_a_config_nodes_full_key_is_still_upstream_and_without_it_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = OmegaConf.create({"model": {"layer": {"hops": 3}}})
    assert callable(getattr(DictConfig, "_get_full_key", None)), gone("omegaconf", "omegaconf.Node._get_full_key")
    assert compat.full_key(cfg.model.layer) == "model.layer" and compat.full_key(cfg) == ""
    monkeypatch.setattr(DictConfig, "_get_full_key", None)
    assert compat.full_key(cfg.model.layer) == ""
