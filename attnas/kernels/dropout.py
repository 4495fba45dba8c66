"""Kernel ``dropout``: the hashed dropout mask of :mod:`attnas.ops.shared.dropout` in one vectorised pass.

``csrc/dropout.cpp`` writes the mask on all torch threads: element ``i`` (flat, row-major) is
``scale`` when the top 32 bits of ``splitmix64(seed + (i + 1) * 0x9E3779B97F4A7C15)`` are at
least ``threshold``, else 0 -- the same mask, bit for bit, as
:func:`attnas.ops.shared.dropout.mask_reference` (0.26 ms for a ``128 x 64 x 64`` tensor on one core
against 1.9 ms for ``rand_like(x) >= p``). Overrides the hook ``dropout_mask`` on CPU floats.

The compiled call is the custom operator ``torch.ops.attnas.dropout_mask(x, p, seed)``
(:mod:`torch.library`; not defined under ``ATTNAS_NO_KERNELS=1``), so ``torch.compile`` sees one
opaque operation (shape and dtype from its fake implementation: ``x``'s, contiguous) instead of
breaking the graph on a ctypes call. Its output is not differentiable (a mask; ``x`` gives only
its shape, dtype and device).
"""

from __future__ import annotations

import ctypes

import torch

from attnas.kernels._build import KERNEL_DTYPES, Library, disabled_by_environment
from attnas.ops import overrides
from attnas.ops.shared.dropout import mask_reference, threshold_of

LIBRARY = Library("dropout", {
    "attnas_dropout_mask": [ctypes.c_int, ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint64, ctypes.c_uint32,
                            ctypes.c_double, ctypes.c_int],
})

#: The operator's qualified name (``torch.ops.attnas.dropout_mask``).
OP_NAME = "attnas::dropout_mask"


def compiled_mask(x: torch.Tensor, p: float, seed: int) -> torch.Tensor:
    """The mask from the compiled library (other float dtypes: the float32 mask, rounded once, as
    the reference rounds); :func:`mask_reference` when the library is unavailable (same bits)."""
    lib = LIBRARY.load()
    if lib is None:
        return mask_reference(x.shape, seed, p, x.dtype, x.device)
    dtype = x.dtype if x.dtype in KERNEL_DTYPES else torch.float32
    mask = torch.empty(x.shape, dtype=dtype)
    if mask.numel():
        lib.attnas_dropout_mask(KERNEL_DTYPES[dtype], mask.data_ptr(), mask.numel(), seed, threshold_of(p),
                                1.0 / (1.0 - p), torch.get_num_threads())
    return mask.to(x.dtype)


def _define_op() -> None:
    """``attnas::dropout_mask``: :func:`compiled_mask` as a CPU custom operator."""
    op = torch.library.custom_op(OP_NAME, mutates_args=(), device_types="cpu")(compiled_mask)

    @op.register_fake
    def _(x: torch.Tensor, p: float, seed: int) -> torch.Tensor:
        return x.new_empty(x.shape)

    def setup_context(ctx, inputs, output) -> None:
        ctx.mark_non_differentiable(output)

    def backward(ctx, grad):
        return None, None, None

    op.register_autograd(backward, setup_context=setup_context)


@torch.compiler.assume_constant_result
def _available() -> bool:
    """Whether the operator is defined and the compiled library loads (a constant to
    ``torch.compile``, asked once per trace)."""
    return DEFINED and LIBRARY.load() is not None


def dropout_mask(x: torch.Tensor, p: float, seed: int) -> torch.Tensor:
    """Override of the mask on CPU floats: the operator ``attnas::dropout_mask`` inside
    ``torch.compile``, its implementation :func:`compiled_mask` called directly in eager mode
    (the same bits; the operator's dispatch halved the kernel's gain in the eager MLP step)."""
    if x.device.type != "cpu" or not x.is_floating_point() or not _available():
        return NotImplemented
    if torch.compiler.is_compiling():
        return torch.ops.attnas.dropout_mask(x, p, seed)
    return compiled_mask(x, p, seed)


#: Whether ``attnas::dropout_mask`` is defined (not under ``ATTNAS_NO_KERNELS=1`` at import).
DEFINED = not disabled_by_environment()
if DEFINED:
    _define_op()
overrides.register("dropout_mask", "dropout", dropout_mask)
