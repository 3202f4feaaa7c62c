"""`MixerSequence`: every mixer's shapes and causality on bit vectors, the backbone shared with `MixerLM`, options,
bad inputs in one line, a tiny copy learnt."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnmem.models.mixer_backbone import MixerBackbone
from attnmem.models.mixer_lm import MixerLM
from attnmem.models.mixer_sequence import MixerSequence

torch.set_num_threads(1)

OPTIONS = {
    "attention": {"heads": 2},
    "selective_ssm": {"d_state": 4, "chunk_size": 4},
    "lti_ssm": {"d_state": 4},
    "base_conv": {"l_max": 16},
    "linear_attention": {},
    "delta_rule": {},
    "sliding_window": {"window": 4},
}


def _model(mixer: str = "attention", **options: object) -> MixerSequence:
    torch.manual_seed(0)
    sizes: dict[str, object] = {"d_model": 8, "layers": 2, "max_len": 16} | options
    return MixerSequence(input_size=5, output_size=3, mixer=mixer, mixer_options=OPTIONS[mixer], **sizes)  # type: ignore[arg-type]


@pytest.mark.parametrize("mixer", sorted(OPTIONS))
def test_shapes_and_causality_for_every_mixer(mixer: str) -> None:
    net = _model(mixer, short_conv=2).double().eval()
    inputs = torch.rand(2, 9, 5, dtype=torch.float64)
    out = net({"inputs": inputs})
    assert out.pred.shape == (2, 9, 3) and out.attention == []
    changed = inputs.clone()
    changed[:, 6:] = 1.0
    after = net({"inputs": changed}).pred
    assert torch.allclose(after[:, :6], out.pred[:, :6], atol=1e-10) and not torch.allclose(
        after[:, 6:], out.pred[:, 6:]
    )
    assert net.state_size > 0


def test_the_stack_is_mixer_lms():
    # one backbone: the same layers under the same parameter names, only the input layer differs
    seq = _model("selective_ssm", positions="none")
    lm = MixerLM(
        vocab_size=3,
        mixer="selective_ssm",
        mixer_options=OPTIONS["selective_ssm"],
        d_model=8,
        layers=2,
        max_len=16,
        positions="none",
    )
    assert isinstance(seq, MixerBackbone) and isinstance(lm, MixerBackbone)
    assert {k for k in seq.state_dict() if not k.startswith("embed.")} == {
        k for k in lm.state_dict() if not k.startswith("embed.")
    }
    assert seq.state_size == lm.state_size and MixerSequence.families == ("sequence",)


def test_copies_its_input_three_steps_back():
    net = _model("attention", d_model=16)
    torch.manual_seed(1)
    inputs = (torch.rand(16, 10, 5) > 0.5).float()
    targets = F.pad(inputs[:, :-3, :3], (0, 0, 3, 0))  # step t outputs the first three bits of step t - 3
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    losses = []
    for _ in range(60):
        loss = F.binary_cross_entropy_with_logits(net({"inputs": inputs}).pred, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    assert ((net({"inputs": inputs}).pred > 0) == (targets > 0.5)).float().mean() > 0.9


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: MixerSequence(input_size=0, output_size=3), r"input_size must be >= 1, got 0 \(model.input_size"),
        (lambda: _model(positions="rotary"), r"MixerSequence: positions must be one of"),
        (lambda: _model(mixer="attention", layers=0), r"MixerSequence: layers must be >= 1"),
        (lambda: MixerSequence(input_size=2, output_size=2, mixer="mamba"), r"MixerSequence: mixer must be one of"),
    ],
)
def test_bad_options_are_one_line_naming_the_option(build, message):
    with pytest.raises(ValueError, match=message) as err:
        build()
    assert "\n" not in str(err.value)


def test_bad_inputs_are_one_line():
    net = _model()
    with pytest.raises(ValueError, match=r"inputs must be \(B, T, input_size=5\), got \(2, 4, 6\)"):
        net({"inputs": torch.zeros(2, 4, 6)})
    with pytest.raises(TypeError, match="dict batch"):
        net(torch.zeros(2, 4, 5))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="longer than max_len=16"):
        net({"inputs": torch.zeros(1, 17, 5)})
