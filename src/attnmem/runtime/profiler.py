"""The trainer's profiler when none is asked for: Lightning's pass-through one, without its per-hook cost."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

from lightning.pytorch.profilers import PassThroughProfiler

_NOTHING = nullcontext()


class NoProfiler(PassThroughProfiler):
    """Profiles nothing, as Lightning's default does, but with one shared empty context for every action.

    Lightning enters `profiler.profile(name)` around each of the ~40 hooks and callbacks it calls per
    training step; its default builds a generator-based context each time (about 0.1 ms a step of
    MemN2N on bAbI). `trainer.profiler=simple` (or advanced, pytorch) still profiles as Lightning does.
    """

    # Lightning's base is a @contextmanager generator, so its declared return is the generator's context class;
    # callers only enter what it returns
    def profile(self, action_name: str) -> AbstractContextManager[None]:  # type: ignore[override]
        """An empty context: nothing is timed."""
        return _NOTHING
