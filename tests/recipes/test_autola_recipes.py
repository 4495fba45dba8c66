"""The AutoLA recipes: the paper's settings, equal budgets for the baselines, CIFAR-10 from python batches."""

from __future__ import annotations

import json
import pickle
import random

import numpy as np
import pytest

from attnas import pipeline
from attnas.config import list_recipes, load_config
from attnas.core.errors import DataError
from attnas.ops.autola.attention_modules import CBAM, ChannelAttention
from attnas.ops.autola.hoga_cell import HOGA
from attnas.spaces.hoga import HOGASpace
from attnas.spaces.resnet_attention import ResNetAttentionSpace
from attnas.tasks.base import TaskInfo

VARIANTS = ("", "-plain", "-se", "-cbam", "-hog-se", "-hog-cbam", "-random")
DATASETS = ("cifar10", "fashionmnist")


class _Info:
    info = TaskInfo(kind="image", in_dim=3, num_classes=10)


def build(recipe: str):
    cfg = load_config(recipe)
    space_cls = {"hoga": HOGASpace, "resnet-attention": ResNetAttentionSpace}[cfg.space.name]
    space = space_cls(cfg.space.options)
    if cfg.strategy.name == "fixed":
        arch = space.arch(dict(cfg.strategy.options.arch))
    else:
        arch = space.sample(random.Random(0))
    return cfg, space, arch, space.build(arch, _Info())


def test_all_autola_recipes_are_shipped():
    names = set(list_recipes())
    for ds in DATASETS:
        for v in VARIANTS:
            assert f"autola-{ds}{v}" in names
    assert "autola-digits-quick" in names


@pytest.mark.parametrize("ds", DATASETS)
def test_search_follows_the_paper(ds):
    cfg = load_config(f"autola-{ds}")
    s, sp = cfg.strategy.options, cfg.space.options
    assert cfg.strategy.name == "darts"
    assert (sp.backbone, sp.width, sp.groups) == ("resnet20", 16, 4)  # ResNet-20, K = 4 (Sec. 4.2)
    w = s.optim
    assert (s.epochs, w.batch_size, w.lr, w.lr_min, w.momentum, w.weight_decay) == (100, 128, 0.025, 0.001, 0.9, 3e-4)
    assert (s.arch_lr, tuple(s.arch_betas), s.arch_weight_decay, s.alpha_init) == (3e-4, (0.5, 0.999), 1e-3, "space")
    assert cfg.retrain.init == "scratch"
    if ds == "cifar10":
        assert (cfg.retrain.epochs, cfg.retrain.batch_size) == (500, 256)  # Sec. 4.3


@pytest.mark.parametrize("ds", DATASETS)
def test_baselines_share_task_backbone_and_training_budget(ds):
    ref = load_config(f"autola-{ds}")
    for v in VARIANTS[1:]:
        cfg = load_config(f"autola-{ds}{v}")
        assert cfg.task == ref.task, v
        assert cfg.retrain == ref.retrain, v
        assert cfg.seed == ref.seed, v
        assert (cfg.space.options.backbone, cfg.space.options.width) == ("resnet20", 16), v


@pytest.mark.parametrize("ds", DATASETS)
def test_baseline_models_carry_the_named_module(ds):
    _, _, _, plain = build(f"autola-{ds}-plain")
    blocks = plain.net.blocks()
    assert len(blocks) == 9 and not any(isinstance(m, (ChannelAttention, CBAM, HOGA)) for m in plain.modules())
    _, _, _, se = build(f"autola-{ds}-se")
    assert all(type(b.attn) is ChannelAttention for b in se.net.blocks())
    _, _, _, cbam = build(f"autola-{ds}-cbam")
    assert all(isinstance(b.attn, CBAM) for b in cbam.net.blocks())
    for v, op in (("-hog-se", "se"), ("-hog-cbam", "cbam")):
        _, _, arch, model = build(f"autola-{ds}{v}")
        assert set(arch.choices["edges"].values()) == {op}
        assert all(isinstance(b.attn, HOGA) for b in model.net.blocks())
    # the random cell is the one its description says: the hoga space's prior, seed 0
    cfg, space, arch, _ = build(f"autola-{ds}-random")
    assert arch.choices == space.sample(random.Random(0)).choices
    # more attention, more parameters (Table 1 / Table 6 ordering)
    counts = {v: sum(p.numel() for p in build(f"autola-{ds}{v}")[3].parameters()) for v in VARIANTS[1:]}
    assert counts["-plain"] < counts["-se"] < counts["-cbam"] < counts["-hog-se"]


def _write_cifar(folder, n=10, seed=0):
    """Tiny CIFAR-10 python batches (the standard layout: uint8 rows of 3 x 32 x 32, label lists)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        with open(folder / name, "wb") as f:
            pickle.dump({b"data": rng.integers(0, 256, size=(n, 3072), dtype=np.uint8),
                         b"labels": rng.integers(0, 10, size=n).tolist()}, f, protocol=2)


SMALL = ["space.width=4", "task.batch_size=16", "task.eval_batch_size=32", "retrain.epochs=1", "retrain.batch_size=16"]


@pytest.mark.parametrize("recipe, extra", [
    ("autola-cifar10", ["strategy.epochs=1", "strategy.optim.batch_size=16"]),
    ("autola-cifar10-hog-cbam", []),
    ("autola-cifar10-se", []),
])
def test_cifar10_recipes_run_on_python_batches(tmp_path, recipe, extra):
    _write_cifar(tmp_path / "data" / "cifar-10-batches-py")
    run = pipeline.search(recipe, SMALL + extra, out=tmp_path / "run", data_dir=tmp_path / "data", device="cpu")
    metrics = json.loads(run.file("metrics.json").read_text())
    assert 0 <= metrics["test_accuracy"] <= 1 and metrics["params"] > 0
    assert json.loads(run.file("arch.json").read_text())["space"] == load_config(recipe).space.name


def test_cifar10_recipe_without_the_files_names_them(tmp_path):
    with pytest.raises(DataError, match=r"data_batch_1.*cifar-10-batches-py"):
        pipeline.search("autola-cifar10", out=tmp_path / "run", data_dir=tmp_path / "empty")
    assert not (tmp_path / "run" / "config.yaml").exists()


@pytest.mark.parametrize("backbone, blocks", [("resnet32", 15), ("resnet56", 27)])
def test_searched_cell_transfers_to_a_deeper_backbone(tmp_path, backbone, blocks):
    # The paper's Table 1 protocol (search on ResNet-20, train the cell in ResNet-32/56), as
    # docs/results/autola/fashionmnist_cpu.sh runs it: a baseline recipe with the searched arch.json.
    from attnas.spaces.hoga import FIGURE3_EDGES
    from attnas.strategies.fixed import FixedArchitecture

    searched = HOGASpace(load_config("autola-fashionmnist").space.options)
    path = tmp_path / "arch.json"
    path.write_text(searched.cell(FIGURE3_EDGES).to_json())
    cfg = load_config("autola-fashionmnist-hog-se", [f"space.backbone={backbone}", "strategy.arch=null",
                                                     f"strategy.arch_file={path}"])
    space = HOGASpace(cfg.space.options)
    arch = FixedArchitecture._arch(cfg.strategy.options, space)
    cells = [m for m in space.build(arch, _Info()).modules() if isinstance(m, HOGA)]
    assert len(cells) == blocks and all(c.choices == FIGURE3_EDGES for c in cells)
