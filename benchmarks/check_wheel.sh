#!/usr/bin/env bash
# The wheel as a user meets it: build it, install it into fresh venvs (torch first, as `make` does), count what
# each install adds, and run the layers without extras and the command line with [train] from outside the checkout.
#   bash benchmarks/check_wheel.sh   # env: PYTHON (python3), TORCH_SPEC (torch==2.13.0), WORK (a folder in $TMPDIR)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
WORK=${WORK:-${TMPDIR:-/tmp}/attnmem_check_wheel}
rm -rf "$WORK" && mkdir -p "$WORK/dist" "$WORK/run"

seconds() { local t0=$1; echo "$(date +%s.%N) - $t0" | bc | xargs printf "%.1f"; }
fresh_venv() {  # a venv with torch alone; its package list in $1/before.txt
  "$PYTHON" -m venv "$1"
  "$1/bin/pip" install -q $TORCH_SPEC
  "$1/bin/pip" freeze --all | sort > "$1/before.txt"
}
added() {  # how many packages the last install added (pip, setuptools and torch's own left out)
  "$1/bin/pip" freeze --all | sort > "$1/after.txt"
  comm -13 <(cut -d= -f1 "$1/before.txt" | sed 's/ @.*//' | sort) <(cut -d= -f1 "$1/after.txt" | sed 's/ @.*//' | sort) > "$1/added.txt"
  wc -l < "$1/added.txt" | tr -d ' '
}

t0=$(date +%s.%N)
"$PYTHON" -m pip wheel -q --no-deps -w "$WORK/dist" . >/dev/null
WHEEL=$(ls "$WORK"/dist/attnmem-*.whl)
echo "wheel: $(basename "$WHEEL") ($(seconds "$t0") s); yaml files in it: $("$PYTHON" -m zipfile -l "$WHEEL" | grep -c '\.yaml')," \
  "py.typed: $("$PYTHON" -m zipfile -l "$WHEEL" | grep -c 'attnmem/py.typed')"

# 1. no extras: the layers alone
CORE="$WORK/core"; fresh_venv "$CORE"
t0=$(date +%s.%N); "$CORE/bin/pip" install -q "$WHEEL"
echo "no extras: $(added "$CORE") packages added ($(tr '\n' ' ' < "$CORE/added.txt")) in $(seconds "$t0") s"
(cd "$WORK/run" && "$CORE/bin/python" -c "
import sys
from attnmem.nn import NTM, DNC, MemN2N, HopfieldPooling
heavy = sorted({m.split('.')[0] for m in sys.modules} & {'lightning', 'pytorch_lightning', 'hydra', 'omegaconf', 'wandb'})
assert not heavy, heavy
print('no extras: from attnmem.nn import NTM, DNC, MemN2N, HopfieldPooling: ok; lightning/hydra/wandb imported:', heavy)
")

# 2. [train]: the command line, from a folder outside the checkout
TRAIN="$WORK/train"; fresh_venv "$TRAIN"
t0=$(date +%s.%N); "$TRAIN/bin/pip" install -q "$WHEEL[train]"
echo "[train]: $(added "$TRAIN") packages added in $(seconds "$t0") s"
cd "$WORK/run"
timed() {  # run a command, print its time and exit status
  local t0; t0=$(date +%s.%N)
  if "$@" > "$WORK/last.log" 2>&1; then echo "ok    $(seconds "$t0") s  $*"
  else echo "FAIL  $(seconds "$t0") s  $*"; tail -20 "$WORK/last.log"; exit 1; fi
}
timed "$TRAIN/bin/attnmem-train" model=ntm debug=fdr
timed "$TRAIN/bin/attnmem-train" experiment=ntm_copy trainer.max_steps=50
timed "$TRAIN/bin/python" -m attnmem.tools.sweep memn2n_hops --dry-run
timed "$TRAIN/bin/attnmem-compat"
# an extra that is not installed: one line naming it, exit 1
if "$TRAIN/bin/attnmem-train" logger=wandb debug=fdr > "$WORK/last.log" 2>&1; then echo "FAIL  logger=wandb ran without W&B"; exit 1; fi
echo "ok    logger=wandb without the wandb extra: $(tail -1 "$WORK/last.log")"
echo "run directories written in $WORK/run:"
find outputs -name metrics.json | sed 's|/metrics.json||' | sort
