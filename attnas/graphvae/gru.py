"""The GRU cell of D-VAE's vertex update, from its products, and from a zero hidden state.

The vertex update of D-VAE (Zhang et al. 2019, Sec. 3.1; Chatzianastasis et al., 2021, Eqs. 7 / 11) is a
GRU cell. ``nn.GRUCell`` (Cho et al. 2014) computes ``r = sigma(W_ir x + b_ir + W_hr h + b_hr)``,
``z = sigma(W_iz x + b_iz + W_hz h + b_hz)``, ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``
and ``h' = (1 - z) * n + z * h``. With ``h = 0`` every ``W_h* h`` product vanishes, so
``h' = (1 - z) * tanh(W_in x + b_in + r * b_hn)``. In D-VAE a vertex without (or before
any) predecessor starts from ``h = 0``; its state then depends on its type alone, so it
can be computed once per vertex type and gathered.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn



def gru_from_zero(cell: nn.GRUCell, x: Tensor) -> Tensor:
    """``cell(x, 0)`` computed without multiplying the (zero) hidden state.

    Args:
        cell: The GRU cell.
        x: Inputs.

    Shapes:
        - **x**: ``(R, input_size)``
        - **output**: ``(R, hidden_size)``
    """
    gi = F.linear(x, cell.weight_ih, cell.bias_ih)
    i_r, i_z, i_n = gi.chunk(3, -1)
    if cell.bias_hh is not None:
        b_r, b_z, b_n = cell.bias_hh.chunk(3)
    else:
        b_r = b_z = b_n = torch.zeros((), dtype=x.dtype, device=x.device)
    r = torch.sigmoid(i_r + b_r)
    z = torch.sigmoid(i_z + b_z)
    n = torch.tanh(i_n + r * b_n)
    return (1 - z) * n


def gru_cell(gi: Tensor, gh: Tensor, h: Tensor) -> Tensor:
    """A GRU cell step from its two precomputed products, as ``nn.GRUCell`` computes it.

    ``gi = W_ih x + b_ih`` and ``gh = W_hh h + b_hh`` (gates in PyTorch's order r, z, n)::

        r = sigma(gi_r + gh_r);  z = sigma(gi_z + gh_z);  n = tanh(gi_n + r * gh_n)
        h' = (1 - z) * n + z * h

    Splitting the products out lets a caller compute ``W_ih x`` for every vertex at once
    (the inputs are known in advance) and ``W_hh h`` with
    :func:`~attnas.graphvae.step_products.step_linear`.

    Args:
        gi: Input product.
        gh: Hidden-state product.
        h: Hidden state.

    Shapes:
        - **gi**, **gh**: ``(R, 3H)``
        - **h**: ``(R, H)``
        - **output**: ``(R, H)``
    """
    i_r, i_z, i_n = gi.chunk(3, -1)
    h_r, h_z, h_n = gh.chunk(3, -1)
    r = torch.sigmoid(i_r + h_r)
    z = torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    return n + z * (h - n)
