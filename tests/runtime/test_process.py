"""The training process's settings: glibc keeps freed memory, so each step's tensors do not fault in again."""

import subprocess
import sys

import pytest

# a fresh process (these settings last for the process): the minor page faults of allocating, writing and freeing
# a 16 MiB tensor 20 times, first with glibc mapping every allocation above 128 KiB on its own pages (its
# default threshold, held fixed: left to itself glibc raises it after some frees, so how many fault varies), then
# kept; an unmapped tensor faults its 4,096 pages in again each time
FAULTS = """
import ctypes, resource, torch
from attnmem.runtime.process import M_MMAP_THRESHOLD, keep_freed_memory

def faults():
    torch.ones(4 << 20)  # warm: the first allocation maps its pages in any case
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(20):
        torch.ones(4 << 20)  # (4M,) float32, 16 MiB
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, 128 << 10)
mapped = faults()
took = keep_freed_memory()
faults()  # the heap settles into its new size
print(mapped, took, faults())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_kept_freed_memory_is_not_faulted_in_again():
    done = subprocess.run([sys.executable, "-c", FAULTS], capture_output=True, text=True, timeout=120, check=True)
    mapped, took, kept = done.stdout.split()
    assert took == "True"
    assert int(mapped) >= 20 * 4096  # each allocation mapped, written and unmapped
    assert int(kept) < 4096  # the heap's pages reused: no tensor faults in again (0 here)
