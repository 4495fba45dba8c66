"""``car-darts``: full-attention search with context auto-regression, then DARTS fine-tuning.

Zhou et al., *Full-attention based Neural Architecture Search using Context
Auto-regression* (2021), Sec. III.B-D, Fig. 4 and Sec. IV.B. Two bilevel phases on
the DARTS relaxation of the stage-wise space (Eq. 1, ``alpha`` initialised to zero):

1. **Search phase: context auto-regression** (Sec. III.C, Fig. 3; tag ``pretext``).
   Several random, possibly overlapping rectangles covering up to a quarter of each image
   are hidden (:func:`~attnas.tasks._context_autoregression.context_masks`); the relaxed
   network's ``features`` (the macro-architecture without its classifier) encode the
   masked image and an up-sampling decoder
   (:class:`~attnas.models.car_decoder.ContextAutoregressionModel`) predicts it; the loss
   is the L1 error on the hidden pixels. Weights (encoder + decoder) by SGD (lr 0.025,
   cosine, momentum 0.9, weight decay 3e-4) on one half of the training data, ``alpha`` by
   Adam (lr ``pretext_arch_lr`` = 3e-4, weight decay 1e-3) on the other (Sec. IV.B.1).
2. **Fine-tuning phase** (Sec. III.D; tag ``darts``): first-order DARTS on the
   classification task, ``alpha`` starting from the search phase's, Adam lr ``arch_lr``
   (1e-4 in Sec. IV.B.2). The network weights go on from the search phase (the paper
   "stores the architecture parameters" and does not say whether weights are kept;
   ``reset_weights: true`` rebuilds them from the seed instead). The classifier is new.

The final architecture is the argmax of ``alpha`` per layer (:meth:`StagewiseSpace.derive`),
retrained from scratch by the pipeline.

This is :class:`~attnas.strategies.darts.Darts` with its ``pretext`` hook filled in: the
loop, checkpoints (weights, ``alpha``, both optimisers, schedule, batch order, RNG — the
masks are drawn from torch's global generator, whose state is checkpointed) and resume come
from :meth:`Darts.run_phase`. A search killed in either phase resumes to the same
``arch.json``.

Ablations of Table VII:

* ``car: false`` -- no context auto-regression: the fine-tuning phase alone, with ``alpha``
  randomly initialised (``alpha_init: normal``; "the architecture parameters are
  initialized randomly", Sec. IV.G.2);
* without the stage-wise space: the space option ``shared_stages: true`` (stages 1, 3, 5
  share one structure and 2, 4 another); it works with this strategy unchanged.

Events: ``{"phase": "pretext", "epoch", "loss" (masked L1 on the weight half),
"arch_loss" (on the architecture half), "val_l1" (masked L1 on ``eval_split`` with fixed
masks), "arch", "alpha"}`` per search epoch, then the ``darts`` events of :class:`Darts`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import torch
from torch import nn

from attnas.config import PositiveFloat, PositiveInt, Range, with_defaults
from attnas.core.errors import UnsupportedError
from attnas.models.car_decoder import ContextAutoregressionModel
from attnas.models.stagewise_network import image_tensor
from attnas.registry import register_strategy
from attnas.runs.rng import seed_everything
from attnas.strategies.darts import BilevelPhase, Darts, DartsConfig, bilevel_splits
from attnas.strategies.darts_config import DartsOptimConfig
from attnas.tasks._context_autoregression import context_masks, mask_images, masked_l1_loss

__all__ = ["CarDarts", "CarDartsConfig", "CarDartsOptimConfig", "masked_reconstruction_loss"]


#: The weight optimiser of both phases of ``car-darts``: :class:`~attnas.strategies.darts_config.DartsOptimConfig`
#: annealed to 0 (Zhou et al., 2021, Sec. IV.B).
CarDartsOptimConfig = with_defaults(
    DartsOptimConfig, "CarDartsOptimConfig",
    "The weight optimiser of ``car-darts`` (:class:`~attnas.strategies.darts_config.DartsOptimConfig` "
    "with ``lr_min`` 0).",
    lr_min=0.0)


@dataclass(frozen=True)
class CarDartsConfig(DartsConfig):
    """Options of ``car-darts`` (defaults: Zhou et al., 2021, Sec. IV.B).

    The inherited :class:`~attnas.strategies.darts.DartsConfig` options set the fine-tuning
    phase (``epochs`` 50, ``arch_lr`` 1e-4) and the weight optimiser of both phases
    (``optim``, :class:`CarDartsOptimConfig`: SGD lr 0.025, cosine to ``lr_min`` 0, momentum
    0.9, weight decay 3e-4); ``alpha_init`` is ``zeros`` (Sec. IV.B.1).

    Attributes:
        car: Run the context auto-regression search phase (``false``: the Table VII
            ablation "without CAR"; pair it with ``alpha_init: normal``).
        pretext_epochs: Epochs of the search phase (20 in the paper, on 100 ImageNet
            classes at 32x32; here on the task's own training images).
        pretext_arch_lr: Adam learning rate of ``alpha`` in the search phase.
        mask_fraction: Largest share of an image the masks cover (1/4).
        mask_boxes: Largest number of rectangles per image.
        reset_weights: Start the fine-tuning phase from freshly initialised weights
            (only ``alpha`` carries over) instead of the search phase's weights.
    """

    epochs: PositiveInt = 50
    optim: CarDartsOptimConfig = field(default_factory=CarDartsOptimConfig)
    arch_lr: PositiveFloat = 1e-4
    alpha_init: Literal["space", "normal", "zeros"] = "zeros"
    car: bool = True
    pretext_epochs: PositiveInt = 20
    pretext_arch_lr: PositiveFloat = 3e-4
    mask_fraction: Annotated[float, Range(0, 1, low_open=True)] = 0.25
    mask_boxes: PositiveInt = 4
    reset_weights: bool = False


def masked_reconstruction_loss(model: ContextAutoregressionModel, images: torch.Tensor, *,
                               generator: torch.Generator | None = None, max_fraction: float = 0.25,
                               max_boxes: int = 4) -> torch.Tensor:
    """The context auto-regression loss of one batch (Zhou et al., 2021, Sec. III.C).

    Args:
        model: Encoder-decoder (masked image -> image).
        images: ``[B, C, H, W]``.
        generator: Source of the masks (``None``: torch's global generator).
        max_fraction: Largest share of an image the masks cover.
        max_boxes: Largest number of rectangles per image.

    Returns:
        The mean L1 error on the hidden pixels (a scalar).
    """
    B, _, H, W = images.shape
    mask = context_masks(B, H, W, generator=generator, max_fraction=max_fraction, max_boxes=max_boxes,
                         device=images.device if generator is None else None).to(images.device)
    return masked_l1_loss(model(mask_images(images, mask)), images, mask)


def _check_car(model: nn.Module, space_name: str, info: Any) -> None:
    if not hasattr(model, "features"):
        raise UnsupportedError(f"car-darts: the relaxed network of space '{space_name}' has no "
                               f"features(x) to use as the context auto-regression encoder")
    if getattr(info, "kind", "image") != "image":
        raise UnsupportedError(f"car-darts: context auto-regression needs an image task, got '{info.kind}'")


@register_strategy("car-darts")
class CarDarts(Darts):
    """Context auto-regression search of alpha, then first-order DARTS on the task (Zhou et al., 2021)."""

    name = "car-darts"
    Config = CarDartsConfig
    requires = ("relaxed",)

    @classmethod
    def search_epochs(cls, options: CarDartsConfig) -> int:
        """The search phase's ``pretext_epochs`` (when ``car`` is on) plus the fine-tuning ``epochs``."""
        return options.epochs + (options.pretext_epochs if options.car else 0)

    @classmethod
    def check_relaxed(cls, options: CarDartsConfig, space: Any, task: Any, model: nn.Module) -> None:
        """Also refuse, when ``car`` is on, a task that is not an image task and a relaxed
        network without ``features(x)`` (the encoder of the context auto-regression).

        Raises:
            UnsupportedError: Naming what is missing.
        """
        super().check_relaxed(options, space, task, model)
        if options.car:
            _check_car(model, space.name, task.info)

    def pretext(self, model: nn.Module) -> dict:
        """The search phase: context auto-regression on the relaxed network (Sec. III.C)."""
        o = self.options
        if not o.car:
            return {}
        info = self.task.info
        _check_car(model, self.space.name, info)
        encdec = ContextAutoregressionModel(model, int(info.in_dim)).to(self.device)

        def loss(batch: Any) -> torch.Tensor:
            return masked_reconstruction_loss(encdec, image_tensor(batch), max_fraction=o.mask_fraction,
                                              max_boxes=o.mask_boxes)

        @torch.no_grad()
        def evaluate() -> dict:
            if not o.eval_split:
                return {}
            encdec.eval()
            gen = torch.Generator().manual_seed(self.seed + 17)  # the same masks every epoch
            total = n = 0.0
            try:
                for batch in self.task.batches(o.eval_split, shuffle=False):
                    images = image_tensor(batch)
                    total += masked_reconstruction_loss(encdec, images, generator=gen, max_fraction=o.mask_fraction,
                                                        max_boxes=o.mask_boxes).item() * len(images)
                    n += len(images)
            finally:
                encdec.train()
            return {"val_l1": total / max(n, 1)}

        describe = self.classification_phase(model).describe
        phase = BilevelPhase(tag="pretext", module=encdec, weights=encdec.weight_parameters(),
                             alpha=list(model.arch_parameters()), loss=loss,
                             splits=bilevel_splits(self.task, o.splits), epochs=o.pretext_epochs,
                             arch_lr=o.pretext_arch_lr, evaluate=evaluate, describe=describe)
        summary = self.run_phase(phase)
        if o.reset_weights:
            alpha = [p.detach().clone() for p in model.arch_parameters()]
            seed_everything(self.seed)
            fresh = self.space.relaxed(self.task).to(self.device)
            with torch.no_grad():
                model.load_state_dict(fresh.state_dict())
                for p, a in zip(model.arch_parameters(), alpha):
                    p.copy_(a)
        # Darts.search adds pretext_seconds to search_seconds; car_seconds keeps the split visible
        out = {"pretext_loss": summary.get("loss"), "pretext_seconds": summary["seconds"],
               "car_seconds": round(summary["seconds"], 2), "pretext_epochs": o.pretext_epochs}
        if "val_l1" in summary:
            out["pretext_val_l1"] = summary["val_l1"]
        return out
