"""table-latent-bo: expected improvement over a graph VAE's latents of a table's architectures."""

import dataclasses
import random

import numpy as np
import pytest
import torch
from scipy.stats import norm

pytest.importorskip("nas_bench_graph")
pytest.importorskip("sklearn")

from attnas.core.errors import ConfigError  # noqa: E402
from attnas.graphvae.vae import GraphVAE, paper_model  # noqa: E402
from attnas.runs.checkpoint_files import save_checkpoint_file  # noqa: E402
from attnas.spaces.nas_bench_graph import NasBenchGraphConfig, NasBenchGraphSpace  # noqa: E402
from attnas.strategies.table_latent_bo import (TableLatentBO, TableLatentBOConfig,  # noqa: E402
                                               acquisition_candidates, expected_improvement, latent_bo,
                                               space_latents)
from attnas.strategies.table_search import random_search  # noqa: E402
from attnas.tasks.nas_bench_graph import NasBenchGraphTask, NasBenchGraphTaskConfig  # noqa: E402


@pytest.fixture(scope="module")
def proteins():
    space = NasBenchGraphSpace(NasBenchGraphConfig(operations="proteins"))
    return space, NasBenchGraphTask(NasBenchGraphTaskConfig("proteins"))


@pytest.fixture(scope="module")
def vae_file(tmp_path_factory, proteins):
    """An untrained small DVAE-EMB of the proteins space (the mechanics do not need training)."""
    space, _ = proteins
    torch.manual_seed(0)
    model = GraphVAE(paper_model("DVAE-EMB", hidden=8, latent=4), len(space.dag_vocabulary()), 6)
    path = tmp_path_factory.mktemp("vae") / "vae.pt"
    save_checkpoint_file(path, {"model_args": model.arguments(), "model": model.state_dict(),
                                "vocab": space.dag_vocabulary(), "history": []})
    return str(path)


def test_expected_improvement_is_the_closed_form():
    mean, std, best = np.array([0.5, 0.7, 0.9]), np.array([0.1, 0.2, 0.05]), 0.7
    u = (mean - best) / std
    assert np.allclose(expected_improvement(mean, std, best), (mean - best) * norm.cdf(u) + std * norm.pdf(u))
    assert expected_improvement(np.array([0.7]), np.array([0.0]), 0.7)[0] == pytest.approx(0.0)


def test_latents_cover_the_space_and_are_standardised(vae_file, proteins):
    latents = space_latents(vae_file)
    assert latents.shape == (2_021, 4)
    assert np.allclose(latents.mean(axis=0), 0, atol=1e-6) and np.allclose(latents.std(axis=0), 1, atol=1e-6)


def test_bo_spends_its_budget_from_random_searchs_first_draws(vae_file, proteins):
    space, task = proteins
    latents = space_latents(vae_file)
    q = task.validation_view(space.index.codes, space.index.neighbours)
    latent_bo(q, 30, random.Random(4), latents, initial=8, batch=6, pool=300)
    rs = task.validation_view(space.index.codes, space.index.neighbours)
    random_search(rs, 8, random.Random(4))
    assert q.spent == 30 == len(set(q.trace)) and q.trace[:8] == rs.trace
    again = task.validation_view(space.index.codes, space.index.neighbours)
    TableLatentBO.run_loop(again, TableLatentBOConfig(budget=30, vae_file=vae_file, initial=8, batch=6, pool=300), 4)
    assert again.trace == q.trace


def test_bo_picks_the_highest_expected_improvement(vae_file, proteins):
    """With the whole table as the pool, after the random start the first batch holds the
    candidates the GP ranks first, which are better on validation than random on average."""
    space, task = proteins
    latents = space_latents(vae_file)
    gains = []
    for seed in range(6):
        q = task.validation_view(space.index.codes, space.index.neighbours)
        latent_bo(q, 40, random.Random(seed), latents, initial=20, batch=20, pool=0)
        gains.append(np.mean(q.scores[20:]) - np.mean(q.scores[:20]))
    assert np.mean(gains) > 0


def test_candidates_around_the_best_are_their_unqueried_neighbours(proteins):
    space, task = proteins
    q = task.validation_view(space.index.codes, space.index.neighbours)
    random_search(q, 12, random.Random(1))
    unseen = np.ones(q.n, dtype=bool)
    unseen[q.trace] = False
    best_two = [q.trace[k] for k in np.argsort(-np.asarray(q.scores), kind="stable")[:2]]
    expected = sorted({j for i in best_two for j in space.index.neighbours(i)} - set(q.trace))
    assert acquisition_candidates(q, unseen, random.Random(0), 300, 2, 5).tolist() == expected
    # too few neighbours left for a batch: the random pool instead
    pool = acquisition_candidates(q, unseen, random.Random(0), 300, 2, len(expected) + 1)
    assert len(pool) == 300 and unseen[pool].all() and list(pool) == sorted(pool)


def test_bo_around_the_best_queries_neighbours_of_queried_architectures(vae_file, proteins):
    space, task = proteins
    latents = space_latents(vae_file)
    q = task.validation_view(space.index.codes, space.index.neighbours)
    TableLatentBO.run_loop(q, TableLatentBOConfig(budget=30, vae_file=vae_file, initial=8, batch=4,
                                                  around_best=3), 2)
    assert q.spent == 30 == len(set(q.trace))
    rs = task.validation_view(space.index.codes, space.index.neighbours)
    random_search(rs, 8, random.Random(2))
    assert q.trace[:8] == rs.trace
    for k in range(8, 30):
        assert any(q.trace[k] in space.index.neighbours(i) for i in q.trace[:k])
    with pytest.raises(ConfigError, match="around_best"):
        TableLatentBOConfig(budget=10, vae_file=vae_file, around_best=-1)


def test_bo_around_the_best_does_not_change_when_the_test_column_does(vae_file, proteins):
    """Validation only: proteins' test column shuffled, the same queries."""
    space, _ = proteins
    shuffled = NasBenchGraphTask(NasBenchGraphTaskConfig("proteins"))
    shuffled._table = dataclasses.replace(shuffled._table,
                                          test=np.random.default_rng(0).permutation(shuffled._table.test))
    options = TableLatentBOConfig(budget=25, vae_file=vae_file, initial=5, batch=5, around_best=2, kernel="matern")
    traces = []
    for task in (proteins[1], shuffled):
        q = task.validation_view(space.index.codes, space.index.neighbours)
        TableLatentBO.run_loop(q, options, 1)
        traces.append(q.trace)
    assert traces[0] == traces[1] and len(traces[0]) == 25


def test_bad_vae_files_are_refused(tmp_path, vae_file, proteins):
    with pytest.raises(ConfigError, match="vae_file"):
        TableLatentBOConfig(budget=10)
    with pytest.raises(ConfigError, match="cannot read"):
        space_latents(str(tmp_path / "missing.pt"))
    space = NasBenchGraphSpace()
    cora = NasBenchGraphTask(NasBenchGraphTaskConfig("cora"))
    q = cora.validation_view(space.index.codes, space.index.neighbours)
    with pytest.raises(ConfigError, match="nbg-proteins"):
        TableLatentBO.run_loop(q, TableLatentBOConfig(budget=10, vae_file=vae_file), 0)
