"""Any sequence mixer as a model of the `sequence` family: the algorithmic tasks of Graves et al. 2014 (copy,
associative recall, ...) on the backbone the recall family's `MixerLM` uses.

    inputs (B, T, I) → linear → (positions) → layers × [x + mixer(norm(x)) (+ MLP)] → final norm → linear → logits

The model reads the input phase and writes the output phase as the NTM, the DNC and the LSTM do: one bit vector in
and one vector of output logits per step, step t a function of steps <= t (every mixer of `MIXERS` is causal).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from torch import Tensor, nn

from attnmem.blocks.checks import check_sizes
from attnmem.blocks.output import Output
from attnmem.models.mixer_backbone import MixerBackbone

__all__ = ["MixerSequence"]


class MixerSequence(MixerBackbone):
    """A causal sequence model over any sequence mixer: bit vectors in, output logits per step.

    state_size = the sum of the mixers' `state_size` (attention's KV cache counted at max_len).

    Args:
        input_size: the width I of an input vector (from the data).
        output_size: the width of an output vector (from the data).
        mixer: a name of `MIXERS` (attention, selective_ssm, lti_ssm, base_conv, sliding_window, linear_attention,
            delta_rule, hopfield; lstm, ntm, dnc with `layers=1, positions="none"`) or a factory of one layer.
        mixer_options: the mixer's keyword options (`d_state`, `l_max`, `heads`, `window`, ...).
        score: attention's score (the `attention` group in a run); other mixers ignore it.
        d_model: the width D.
        layers: the number of mixer layers.
        positions: `sinusoidal` (fixed, defined at any step up to max_len: the longer test sequences), `learned`
            (trained only up to the training lengths) or `none` (the mixer orders steps itself: recurrent ones).
        max_len: the longest sequence, the longest test set's included (with positions a longer one is a ValueError).
        mlp: a feed-forward sub-block after every mixer.
        d_ff: the MLP's hidden width; None: 4 · d_model.
        dropout: dropout on the projected inputs and every sub-block's output.
        short_conv: k > 0: a causal depthwise convolution of k taps on each mixer's input; 0: none.
    """

    families: ClassVar[tuple[str, ...]] = ("sequence",)

    def __init__(
        self,
        *,
        input_size: int,
        output_size: int,
        mixer: str | Callable[[int], nn.Module] = "attention",
        mixer_options: Mapping[str, Any] | None = None,
        score: str | Callable[..., nn.Module] = "scaled_dot",
        d_model: int = 64,
        layers: int = 2,
        positions: str = "sinusoidal",
        max_len: int = 512,
        mlp: bool = False,
        d_ff: int | None = None,
        dropout: float = 0.0,
        short_conv: int = 0,
    ) -> None:
        check_sizes("MixerSequence", {"input_size": input_size, "output_size": output_size}, prefix="model.")
        super().__init__(
            lambda d: nn.Linear(input_size, d),
            output_size,
            mixer=mixer,
            mixer_options=mixer_options,
            score=score,
            d_model=d_model,
            layers=layers,
            positions=positions,
            max_len=max_len,
            seq_len=None,
            mlp=mlp,
            d_ff=d_ff,
            dropout=dropout,
            short_conv=short_conv,
        )
        self.input_size = input_size

    def forward(self, batch: dict[str, Tensor]) -> Output:
        """Output logits at every step of the batch's inputs.

        Args:
            batch: the sequence family's batch; only `inputs` is read.

        Shapes:
            - batch["inputs"]: (B, T, I)
            - Output.pred: (B, T, output_size)

        Returns:
            `Output` with the logits, step t a function of inputs <= t; no attention maps.
        """
        if not isinstance(batch, dict):
            raise TypeError("MixerSequence takes the sequence family's dict batch {'inputs': (B, T, I)}, not a tensor")
        inputs = batch["inputs"]
        if inputs.dim() != 3 or inputs.shape[-1] != self.input_size:
            raise ValueError(
                f"MixerSequence: inputs must be (B, T, input_size={self.input_size}), got "
                f"{tuple(inputs.shape)}: build the model with the data's input_size"
            )
        return Output(pred=self.mix(self.embed(inputs)))  # (B, T, output_size)
