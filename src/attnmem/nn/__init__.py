"""The layers and models of attnmem for your own PyTorch code: plain `nn.Module`s, tensors in, tensors out.

`from attnmem.nn import NTM, DNC, MemN2N, Hopfield, HopfieldPooling` imports torch and nothing of the training
stack (Lightning, Hydra, W&B). Masks follow PyTorch: `attn_mask` is True where a query may attend (as
`F.scaled_dot_product_attention`), `key_padding_mask` True where a key is padding (as `nn.MultiheadAttention`).
"""

from __future__ import annotations

from attnmem.attention import Additive, Bilinear, Cosine, Dot, LeakyConcat, MultiHead, ScaledDot, Trilinear, attend
from attnmem.blocks.hopfield import Hopfield, HopfieldLayer, HopfieldPooling
from attnmem.blocks.hopfield_convert import from_hflayers_state_dict
from attnmem.models.dnc import DNC
from attnmem.models.memn2n import MemN2N
from attnmem.models.ntm import NTM, NTMState

__all__ = [
    "DNC",
    "NTM",
    "Additive",
    "Bilinear",
    "Cosine",
    "Dot",
    "Hopfield",
    "HopfieldLayer",
    "HopfieldPooling",
    "LeakyConcat",
    "MemN2N",
    "MultiHead",
    "NTMState",
    "ScaledDot",
    "Trilinear",
    "attend",
    "from_hflayers_state_dict",
]


def __dir__() -> list[str]:
    """The public names only."""
    return sorted(__all__)
