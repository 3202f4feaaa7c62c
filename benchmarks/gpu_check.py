"""GPU check (≤ 5 minutes): each model's default experiment trained in float32 and in bf16-mixed on one GPU.

For every conf/model/*.yaml on its natural data (the config `python train.py model=X trainer=gpu` builds):
training steps/s in float32 and under bf16 autocast (what Lightning's bf16-mixed does), the peak GPU memory
of each, and whether the bf16 loss stayed finite. For the Transformers also attention through the fused
SDPA fast path (`attention=scaled_dot` in training) against the `attend` path (the same scores, weights
materialised). Then `replicas=R` (R = 1, 10, 64 by default; `--replicas` with no value skips it): MemN2N and the
NTM, replica-steps/s of R replicas in one batched step and its multiple of R = 1's (`benchmarks/replicas.py`'s
cases and timing; the goal: R = 64 at >= 20x R = 1).
`python benchmarks/gpu_check.py [--steps 30] [--json out.json]`; without a GPU it says so and exits 0.
Figures: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import replicas as replicas_bench  # benchmarks/replicas.py, beside this file
import torch
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from omegaconf import open_dict

from attnmem.attention import ScaledDot
from attnmem.core import packaged
from attnmem.runtime import run

CONF = packaged.conf_dir()  # the packaged configs (src/attnmem/conf)
BUDGET_SECONDS = 270  # stop starting new models after this: the whole check stays under 5 minutes
REPLICA_BUDGET_SECONDS = 180  # the same for the replicas section, which comes after


class ScaledDotViaAttend(ScaledDot):
    """ScaledDot's scores, but not `ScaledDot` itself: `attend` takes its general path (weights materialised)."""


def build(model: str, precision: str, out_dir: Path, *overrides: str) -> tuple[Any, Any]:
    """The datamodule (set up) and family module of `python train.py model=<model> trainer=gpu`."""
    cfg = compose(
        "train",
        overrides=[
            f"model={model}",
            "trainer=gpu",
            f"trainer.precision={precision}",
            "~logger",
            "~callbacks",
            *overrides,
        ],
        return_hydra_config=True,
    )
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(out_dir)
        cfg.hydra.job.num = 0
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    datamodule, module, _ = run.setup(cfg)
    return datamodule, module.cuda()


def to_gpu(batch: Any) -> Any:
    """A batch (dict, list or tensor) on the GPU."""
    if isinstance(batch, torch.Tensor):
        return batch.cuda(non_blocking=True)
    if isinstance(batch, dict):
        return {k: to_gpu(v) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_gpu(v) for v in batch)
    return batch


def throughput(module: Any, batches: list[Any], steps: int, bf16: bool) -> dict[str, float]:
    """Training steps/s over `steps` steps (after 3 warm-up steps), peak memory in MiB, last loss."""
    optimizer = module.configure_optimizers()
    optimizer = optimizer["optimizer"] if isinstance(optimizer, dict) else optimizer
    trainable = optimizer is not None and any(p.requires_grad for p in module.parameters())
    module.train()
    torch.cuda.reset_peak_memory_stats()
    loss = None
    for i in range(steps + 3):
        if i == 3:
            torch.cuda.synchronize()
            start = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            loss = module.training_step(batches[i % len(batches)], i)
        if trainable and loss is not None:
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    return {
        "steps_per_s": steps / seconds,
        "peak_mib": torch.cuda.max_memory_allocated() / 2**20,
        "loss": float(loss.detach()) if loss is not None else math.nan,
        "trains": trainable,
    }


def check_model(model: str, steps: int, out_dir: Path, *overrides: str) -> dict[str, Any]:
    """float32 and bf16-mixed figures of one model yaml (plus any overrides)."""
    result: dict[str, Any] = {}
    for precision, bf16 in (("32-true", False), ("bf16-mixed", True)):
        torch.manual_seed(0)
        datamodule, module = build(model, precision, out_dir, *overrides)
        loader = iter(datamodule.train_dataloader())
        batches = [to_gpu(next(loader)) for _ in range(min(8, len(datamodule.train_dataloader())))]
        result[precision] = throughput(module, batches, steps, bf16)
        del module, batches
        torch.cuda.empty_cache()
    return result


def main() -> int:
    """Run every model; print a table; optionally write the figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--replicas", type=int, nargs="*", default=[1, 10, 64], help="R values (none: skip)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("gpu_check: no CUDA GPU is visible (torch.cuda.is_available() is False); nothing to measure")
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 means float32 here
    device = f"{torch.cuda.get_device_name()} (torch {torch.__version__}, CUDA {torch.version.cuda})"
    print(f"gpu_check on {device}, {args.steps} steps per figure, bf16 supported: {torch.cuda.is_bf16_supported()}")
    begin, results = time.perf_counter(), {}
    models = sorted(p.stem for p in (CONF / "model").glob("*.yaml"))
    runs = [(m, m, ()) for m in models]
    runs += [
        (f"{m} attend path", m, (f"attention._target_={__name__}.ScaledDotViaAttend",))
        for m in models
        if m.startswith("transformer")
    ]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"), tempfile.TemporaryDirectory() as tmp:
        for name, model, overrides in runs:
            if time.perf_counter() - begin > BUDGET_SECONDS:
                results[name] = {"skipped": "time budget"}
                continue
            try:
                results[name] = check_model(model, args.steps, Path(tmp) / name.replace(" ", "_"), *overrides)
            except Exception as err:  # one model failing must not hide the others' figures
                results[name] = {"error": f"{type(err).__name__}: {err}"}
            print_row(name, results[name])
        if args.replicas:
            results["replicas"] = replica_figures(args.replicas, 5 * args.steps, Path(tmp) / "replicas")
    print(f"total {time.perf_counter() - begin:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"device": device, "steps": args.steps, "results": results}, indent=2))
    return 0


def replica_figures(counts: list[int], steps: int, out_dir: Path, device: str = "cuda") -> dict[str, Any]:
    """Replica-steps/s of MemN2N and the NTM for each R in `counts` on `device`, and their multiple of R = 1's."""
    begin, figures = time.perf_counter(), {}
    for case in ("memn2n", "ntm"):
        overrides, base = replicas_bench.CASES[case][0], None
        for r in counts:
            name = f"{case} R={r}"
            if time.perf_counter() - begin > REPLICA_BUDGET_SECONDS:
                figures[name] = {"skipped": "time budget"}
                continue
            try:
                built = replicas_bench.build(out_dir / f"{case}{r}", overrides, r)
                replicas_bench.steps_per_second(*built, 10, torch.device(device))  # warm-up: kernels, allocator
                replica_steps = r * replicas_bench.steps_per_second(*built, steps, torch.device(device))
            except Exception as err:  # e.g. out of memory at the largest R: the smaller ones still count
                figures[name] = {"error": f"{type(err).__name__}: {err}"}
            else:
                base = replica_steps if r == 1 else base
                figures[name] = {"replica_steps_per_s": replica_steps, "x_r1": replica_steps / base if base else None}
            print(f"{name:34s} {figures[name]}")
            torch.cuda.empty_cache()
    return figures


def print_row(name: str, result: dict[str, Any]) -> None:
    """One line per model: steps/s and peak MiB in float32 and bf16, their ratio, bf16's last loss."""
    if "32-true" not in result:
        print(f"{name:34s} {result}")
        return
    full, mixed = result["32-true"], result["bf16-mixed"]
    print(
        f"{name:34s} fp32 {full['steps_per_s']:8.1f} steps/s {full['peak_mib']:8.1f} MiB | "
        f"bf16 {mixed['steps_per_s']:8.1f} steps/s {mixed['peak_mib']:8.1f} MiB | "
        f"x{mixed['steps_per_s'] / full['steps_per_s']:.2f} | bf16 loss {mixed['loss']:.4g}"
    )


if __name__ == "__main__":
    sys.exit(main())
