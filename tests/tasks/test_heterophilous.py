"""The heterophilous task: split per seed, shared graph cache, ROC-AUC on two classes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnas.config import load_config
from attnas.core.errors import ConfigError
from attnas.runs.build import build_task
from attnas.tasks.heterophilous import HeterophilousConfig, HeterophilousTask
from heterophilous_files import write


def config(**task):
    return load_config({"name": "t", "seed": task.pop("seed", 0),
                        "task": {"name": "heterophilous", "dataset": "tiny", **task},
                        "space": {"name": "hetero-baseline"}, "strategy": {"name": "fixed", "arch": {"model": "mlp"}},
                        "retrain": {"epochs": 2, "seeds": 3, "init": "scratch"}})


def test_search_seed_then_retrain_seed_choose_the_split(tmp_path):
    write(tmp_path)
    task = build_task(config(seed=13), tmp_path, torch.device("cpu"))
    masks = task.dataset.graph.split_masks
    val = next(task.batches("val"))
    assert task.split_index == 3 and torch.equal(val.mask, masks["val"][3])
    task.select_split(7)
    train, val2 = next(task.batches("train")), next(task.batches("val"))
    assert torch.equal(train.mask, masks["train"][7]) and torch.equal(val2.mask, masks["val"][7])
    assert train.cache is val.cache  # the graph's derived structures are kept across splits


def test_a_fixed_split_ignores_seeds_and_must_exist(tmp_path):
    write(tmp_path)
    task = build_task(config(seed=5, split=2), tmp_path, torch.device("cpu"))
    task.select_split(4)
    assert task.split_index == 2
    with pytest.raises(ConfigError, match=r"has 10 splits \(0..9\), got 12"):
        HeterophilousTask(HeterophilousConfig(dataset="tiny", split=12), tmp_path)


def test_retraining_seed_k_trains_on_split_k(tmp_path, monkeypatch):
    from attnas import pipeline
    from attnas.training.retraining import retrain

    write(tmp_path)
    pipeline.search_or_resume(tmp_path / "run", config(seed=1).to_dict(), data_dir=tmp_path)
    used = []
    real = HeterophilousTask.select_split
    monkeypatch.setattr(HeterophilousTask, "select_split",
                        lambda self, k, retraining=False: (used.append(k), real(self, k, retraining)))
    retrain(tmp_path / "run", data_dir=tmp_path)
    assert used == [1, 0, 1, 2]  # the build (the run's seed), then seeds 0, 1, 2


def test_two_classes_are_scored_by_roc_auc(tmp_path):
    write(tmp_path, node_labels=np.arange(20) % 2)
    task = HeterophilousTask(HeterophilousConfig(dataset="tiny"), tmp_path)
    assert task.metric == "roc_auc"
    y = task.dataset.graph.y
    perfect = lambda b: torch.nn.functional.one_hot(b.y, 2).float()  # noqa: E731
    assert task.evaluate(perfect, "test") == 1.0
    assert task.evaluate(lambda b: -perfect(b), "test") == 0.0
    assert y.unique().tolist() == [0, 1]


def test_csbm_task_is_scored_by_accuracy_on_its_ten_splits():
    from attnas.tasks.heterophilous import CSBMConfig, CSBMTask

    task = CSBMTask(CSBMConfig(n=100, p=10, phi=-0.5, graph_seed=2))
    assert task.metric == "accuracy" and task.num_splits == 10
    task.select_split(12)
    assert torch.equal(next(task.batches("test")).mask, task.dataset.graph.split_masks["test"][2])
    with pytest.raises(ConfigError, match="cannot switch datasets"):
        task.with_dataset("texas")


def test_fine_tuning_from_the_supernet_across_splits_is_refused_before_anything_is_written(tmp_path):
    from attnas.runs.build import check_retraining
    from attnas.comparison import compare

    write(tmp_path)
    per_seed = build_task(config(seed=1), tmp_path, torch.device("cpu"))
    with pytest.raises(ConfigError, match="retrain.init: supernet would fine-tune"):
        check_retraining("supernet", per_seed)
    check_retraining("scratch", per_seed)
    check_retraining("supernet", build_task(config(split=2), tmp_path, torch.device("cpu")))  # one split: fine
    out = tmp_path / "cmp"
    with pytest.raises(ConfigError, match="retrain.init: supernet"):
        compare("autoattend-hetero-quick", ["retrain.init=supernet", "task.dataset=tiny"], baselines=["mlp"],
                out=out, data_dir=tmp_path, search_seeds=1)
    assert not out.exists()


def test_search_seed_mode_keeps_the_run_s_split_for_every_retraining_seed(tmp_path):
    write(tmp_path)
    task = build_task(config(seed=13, split="search-seed"), tmp_path, torch.device("cpu"))
    masks = task.dataset.graph.split_masks
    assert task.split_index == 3 and not task.splits_per_seed
    for k in (0, 5):
        task.select_split(k, retraining=True)
        assert task.split_index == 3 and torch.equal(next(task.batches("test")).mask, masks["test"][3])
    per_seed = build_task(config(seed=13), tmp_path, torch.device("cpu"))
    per_seed.select_split(5, retraining=True)
    assert per_seed.split_index == 5 and per_seed.splits_per_seed
