"""`FamilyModule`, the base class of the family modules: what a family must write, and the hooks Lightning reads."""

from __future__ import annotations

import pytest
from lightning.pytorch.utilities.signature_utils import is_param_in_hook_signature
from torch import Tensor

from attnmem.tasks.family import FamilyModule


def test_a_family_without_shared_step_cannot_be_built():
    class NoStep(FamilyModule):
        def epoch_metrics(self, split: str) -> dict[str, Tensor]:
            return {}

    with pytest.raises(TypeError, match="abstract method.*shared_step"):
        NoStep()


@pytest.mark.parametrize("hook", ["training_step", "validation_step", "test_step"])
def test_the_step_hooks_have_the_signatures_lightning_reads(hook):
    bound = getattr(FamilyModule, hook).__get__(object())
    assert is_param_in_hook_signature(bound, "batch_idx", min_args=2)  # Lightning passes batch_idx
    # with several test sets Lightning passes dataloader_idx, which the evaluation steps take (0 by default)
    assert is_param_in_hook_signature(bound, "dataloader_idx", explicit=True) is (hook != "training_step")
