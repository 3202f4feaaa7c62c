"""Train a model from a checkout: `python train.py [model=memn2n] [key=value ...]`, the same as `attnmem-train`."""

from attnmem.train import run

if __name__ == "__main__":
    run()
