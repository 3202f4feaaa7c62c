"""The training process's settings: glibc keeps freed memory, so each step's tensors do not fault in again."""

import subprocess
import sys

import pytest

# a fresh process (these settings last for the process): the minor page faults of freeing and allocating a
# 16 MiB tensor 20 times, with glibc's defaults and then kept (4,096 pages each time it is unmapped or trimmed)
FAULTS = """
import resource, torch
from attnmem.runtime.process import keep_freed_memory

def faults():
    torch.ones(4 << 20)  # warm: the first allocation maps its pages in any case
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(20):
        torch.ones(4 << 20)  # (4M,) float32, 16 MiB: allocated, written, freed
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

default = faults()
print(default, keep_freed_memory(), faults())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_kept_freed_memory_is_not_faulted_in_again():
    done = subprocess.run([sys.executable, "-c", FAULTS], capture_output=True, text=True, timeout=120, check=True)
    default, took, kept = done.stdout.split()
    assert took == "True"
    assert int(default) >= 4 * 4096  # at least 4 of the 20 faulted their pages in again (7 here)
    assert int(kept) < 4096  # the heap's pages reused (the first growth by at most one tensor)
