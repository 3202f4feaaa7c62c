"""Training steps/s of the default model at 1 vs 2 torch intra-op threads, side by side.

This is the measurement behind the `threads=1` default: the same plain training loop over the same
batches, runs interleaved (1, 2, 1, 2, ...), best of each kept. `--embed-dim` shows a wider model.
"""

from __future__ import annotations

import argparse
import time
from tempfile import TemporaryDirectory

import lightning as L
import torch
import torch.nn.functional as F
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import open_dict

from attnmem.core import packaged
from attnmem.runtime.run import build_model

CONF = packaged.conf_dir()  # the packaged configs (src/attnmem/conf)


def steps_per_second(cfg, threads: int, steps: int) -> float:
    """Steps/s of `steps` plain training steps with `threads` intra-op threads."""
    torch.set_num_threads(threads)
    L.seed_everything(cfg.seed, verbose=False)
    dm = instantiate(cfg.data)
    dm.prepare_data()
    dm.setup("fit")
    net = build_model(cfg.model, cfg.attention, dm.dims)
    optimizer = instantiate(cfg.optimizer)(params=net.parameters())
    batches = list(dm.train_dataloader())
    start = time.perf_counter()
    for i in range(steps):
        batch = batches[i % len(batches)]
        loss = F.cross_entropy(net(batch).pred, batch["answer"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return steps / (time.perf_counter() - start)


def main() -> None:
    """Print steps/s at 1 and 2 threads and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--embed-dim", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    best = {1: 0.0, 2: 0.0}
    overrides = [f"model.embed_dim={args.embed_dim}", f"data.batch_size={args.batch_size}"]
    with TemporaryDirectory() as tmp, initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("train", overrides=overrides, return_hydra_config=True)
        with open_dict(cfg):
            cfg.hydra.runtime.output_dir = tmp
        HydraConfig.instance().set_config(cfg)
        for _ in range(args.rounds):
            for threads in best:
                best[threads] = max(best[threads], steps_per_second(cfg, threads, args.steps))
    print(f"MemN2N d={args.embed_dim}, batch {args.batch_size}, {args.steps} steps, best of {args.rounds} interleaved")
    for threads, sps in best.items():
        print(f"  threads={threads}: {sps:8.1f} steps/s")
    print(f"  ratio 2 threads / 1 thread = {best[2] / best[1]:.2f}")


if __name__ == "__main__":
    main()
