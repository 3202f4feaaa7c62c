"""Evaluate a finished run from a checkout: `python eval.py run_dir=<run>`, the same as `attnmem-eval`."""

from attnmem.eval import run

if __name__ == "__main__":
    run()
