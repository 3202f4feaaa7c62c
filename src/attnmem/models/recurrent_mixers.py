"""The classic recurrent models as `MixerLM` mixers: the LSTM, the NTM and the DNC on the recall family.

Each maps `(B, T, D)` to `(B, T, D)` causally, one step at a time, and gives `state_size`, the numbers one sequence
carries from a step to the next. With `layers: 1, positions: none` the `MixerLM` around one of them is the whole
sequence model: tokens → embedding → the core → head. The NTM and the DNC are used through their constructors and
forwards only (`attnmem.nn.NTM`, `attnmem.nn.DNC`), with input and output width D.
"""

from __future__ import annotations

import inspect
from typing import Any, cast

from torch import Tensor, nn

from attnmem.blocks.checks import check_sizes
from attnmem.core.float32 import recurrent
from attnmem.models.dnc import DNC
from attnmem.models.ntm import NTM

__all__ = ["DNCMixer", "LSTMMixer", "NTMMixer"]


def _with_defaults(model: type[nn.Module], options: dict[str, Any]) -> dict[str, Any]:
    """`options` over the defaults of `model`'s constructor: the sizes a state is counted from."""
    defaults = {name: p.default for name, p in inspect.signature(model).parameters.items()
                if p.default is not inspect.Parameter.empty}
    return {**defaults, **options}


class LSTMMixer(nn.Module):
    """An LSTM (Hochreiter & Schmidhuber 1997; `torch.nn.LSTM`) as a mixer: y_t = W h_t, h_t its top layer.

    state_size = 2 · hidden_size · num_layers: h and c of every layer.

    Args:
        d_model: the width D of the input and output.
        hidden_size: the width of h and c; None: d_model.
        num_layers: stacked LSTM layers.
    """

    def __init__(self, d_model: int, *, hidden_size: int | None = None, num_layers: int = 1) -> None:
        super().__init__()
        hidden_size = d_model if hidden_size is None else hidden_size
        check_sizes("LSTMMixer", {"hidden_size": hidden_size, "num_layers": num_layers},
                    prefix="model.mixer_options.")
        self.lstm = nn.LSTM(d_model, hidden_size, num_layers, batch_first=True)
        self.out_proj = nn.Linear(hidden_size, d_model)
        self.state_size = 2 * hidden_size * num_layers

    def forward(self, x: Tensor) -> Tensor:
        """The top layer's h at every step, projected to D.

        Args:
            x: the input sequence.

        Shapes:
            - x: (B, T, D)
            - y: (B, T, D)

        Returns:
            y, with y_t a function of x_{<=t} only.
        """
        h, _ = recurrent(self.lstm, x)  # (B, T, hidden_size), float32 under autocast
        return cast(Tensor, self.out_proj(h.to(x.dtype)))  # (B, T, D)


class NTMMixer(nn.Module):
    """The Neural Turing Machine (Graves et al. 2014) as a mixer: `NTM(input_size=D, output_size=D)`.

    state_size = N · M + R · M + (R + W) · N + 2C (0 with the feed-forward controller, whose h is not carried): the
    memory (N × M), the read vectors, the heads' weightings and the LSTM controller's h and c.

    Args:
        d_model: the width D of the input and output.
        **options: `NTM`'s options (controller, controller_size, memory_locations, memory_width, read_heads,
            write_heads, shift_range, memory_init, score).
    """

    def __init__(self, d_model: int, **options: Any) -> None:
        super().__init__()
        self.ntm = NTM(input_size=d_model, output_size=d_model, **options)
        o = _with_defaults(NTM, options)
        n, m, r, w = o["memory_locations"], o["memory_width"], o["read_heads"], o["write_heads"]
        controller = 2 * o["controller_size"] if o["controller"] == "lstm" else 0  # a feed-forward one keeps none
        self.state_size = n * m + r * m + (r + w) * n + controller

    def forward(self, x: Tensor) -> Tensor:
        """The NTM's output at every step, from its initial state.

        Args:
            x: the input sequence.

        Shapes:
            - x: (B, T, D)
            - y: (B, T, D)

        Returns:
            y, with y_t a function of x_{<=t} only.
        """
        y, _ = self.ntm(x)  # (B, T, D)
        return cast(Tensor, y)


class DNCMixer(nn.Module):
    """The Differentiable Neural Computer (Graves et al. 2016) as a mixer: `DNC(input_size=D, output_size=D)`.

    state_size = N · W + N² + (3 + R) · N + R · W + 2C: the memory (N × W), the temporal link matrix (N × N), the
    usage, the precedence and the write weighting (N each), the R read weightings, the R read vectors and the
    controller's h and c.

    Args:
        d_model: the width D of the input and output.
        **options: `DNC`'s options (controller_size, memory_locations, memory_width, read_heads, masking,
            deallocation, link_sharpness, interface_clip, score).
    """

    def __init__(self, d_model: int, **options: Any) -> None:
        super().__init__()
        self.dnc = DNC(input_size=d_model, output_size=d_model, **options)
        o = _with_defaults(DNC, options)
        n, w, r = o["memory_locations"], o["memory_width"], o["read_heads"]
        self.state_size = n * w + n * n + (3 + r) * n + r * w + 2 * o["controller_size"]

    def forward(self, x: Tensor) -> Tensor:
        """The DNC's output at every step, from an empty memory.

        Args:
            x: the input sequence.

        Shapes:
            - x: (B, T, D)
            - y: (B, T, D)

        Returns:
            y, with y_t a function of x_{<=t} only.
        """
        return cast(Tensor, self.dnc(x))  # (B, T, D)
