"""``graph-vae`` (Chatzianastasis et al.'s ENAS experiment as a run) on a tiny synthetic ENAS file."""

from __future__ import annotations

import json

import pytest
import torch
from enas_table import RECIPE, write_enas

from attnas import pipeline
from attnas.core.errors import ConfigError


@pytest.fixture
def one_thread(restore_torch_threads):
    torch.set_num_threads(1)


def test_run_reports_tables_properties_tsne_and_labelled_bo(tmp_path, one_thread):
    write_enas(tmp_path / "data", 60)
    run = pipeline.search(RECIPE, out=tmp_path / "run", data_dir=tmp_path / "data")
    metrics = json.loads(run.file("metrics.json").read_text())
    for key in ("recon_accuracy", "validity", "uniqueness", "validity_space", "bo_valid_fraction"):
        assert 0.0 <= metrics[key] <= 1.0, key
    assert metrics["rmse"] > 0 and -1.0 <= metrics["pearson_r"] <= 1.0
    assert metrics["vae_model"] == "GCN-EMB" and metrics["vae_epochs"] == 2
    table2 = [e for e in run.events("evaluation") if e.get("stage") == "table2"]
    assert [e["repeat"] for e in table2] == [1, 2]
    assert metrics["rmse"] == pytest.approx(sum(e["rmse"] for e in table2) / 2)
    assert {"average_path_length_r", "clustering_coefficient_r"} <= set(metrics)
    assert run.file("tsne.png").stat().st_size > 0
    bo = json.loads(run.file("bo.json").read_text())
    assert len(bo["proposals"]) == metrics["bo_proposals"] == 2 * 3
    assert {p["source"] for p in bo["proposals"]} <= {"dataset", "unscored", "invalid"}  # never a surrogate
    for p in bo["proposals"]:
        assert (p["value"] is None) == (p["source"] == "unscored")
    unscored = sum(p["source"] == "unscored" for p in bo["proposals"])
    assert metrics["bo_unscored"] == bo["counts"]["unscored"] == unscored
    assert metrics["bo_scored"] + metrics["bo_unscored"] + metrics["bo_invalid"] == 6
    rounds = [e for e in run.events("bo") if "round" in e]
    assert [e["round"] for e in rounds] == [1, 2] and sum(e["unscored"] for e in rounds) == unscored
    arch = json.loads(run.file("arch.json").read_text())
    assert arch["meta"]["strategy"] == "graph-vae" and "source" in arch["meta"]
    if bo["best"] is not None:  # the run's architecture is the best valid proposal, with its source
        assert arch["meta"]["source"] == bo["best"]["source"]


def test_bo_in_table_decoding_scores_proposals_by_lookup(tmp_path, one_thread):
    # 2-layer ENAS has 72 architectures; 300 random rows hold nearly all of them, so with
    # bo_decode=in-table almost every valid decoding can be looked up
    write_enas(tmp_path / "data", 300, layers=2)
    strategy = dict(RECIPE["strategy"], epochs=1, gp_repeats=1, properties=False, tsne_points=0, bo_decode="in-table",
                    table1={"recon_graphs": 2, "encode_times": 1, "decode_times": 1, "prior_points": 2,
                            "prior_decodes": 1})
    recipe = dict(RECIPE, space={"name": "enas", "layers": 2}, strategy=strategy)
    run = pipeline.search(recipe, out=tmp_path / "run", data_dir=tmp_path / "data")
    bo = json.loads(run.file("bo.json").read_text())
    metrics = json.loads(run.file("metrics.json").read_text())
    assert metrics["bo_unscored"] == bo["counts"]["unscored"]
    scored = [p for p in bo["proposals"] if p["source"] == "dataset"]
    assert scored and metrics["bo_scored"] == len(scored)
    assert metrics["bo_best_accuracy"] == max(p["value"] for p in scored)


def test_needs_a_table_of_scored_architectures(tmp_path, tiny_recipe_data):
    recipe = dict(tiny_recipe_data, strategy={"name": "graph-vae"})
    with pytest.raises(ConfigError, match="architecture-performance"):
        pipeline.search(recipe, out=tmp_path / "x")


def test_bf16_precision_option_trains_and_bad_precision_is_refused(tmp_path, one_thread):
    from attnas.graphvae.train import VAEOptimConfig
    from attnas.strategies.graph_vae import GraphVAEStrategyConfig

    assert GraphVAEStrategyConfig().train_settings(0).precision == "fp32"  # the paper's, by default
    assert GraphVAEStrategyConfig(train=VAEOptimConfig(precision="bf16")).train_settings(0).precision == "bf16"
    write_enas(tmp_path / "data", 40)
    strategy = dict(RECIPE["strategy"], model="dvae", precision="bf16", epochs=1, gp_repeats=1, properties=False,
                    tsne_points=0, bo=None)
    run = pipeline.search(dict(RECIPE, strategy=strategy), out=tmp_path / "run", data_dir=tmp_path / "data")
    metrics = json.loads(run.file("metrics.json").read_text())
    assert metrics["vae_final_loss"] == metrics["vae_final_loss"] and -1.0 <= metrics["pearson_r"] <= 1.0
    bad = dict(RECIPE, strategy=dict(strategy, precision="fp16"))
    with pytest.raises(ConfigError, match="precision"):
        pipeline.search(bad, out=tmp_path / "bad", data_dir=tmp_path / "data")


def test_protocol_recipe_has_the_papers_settings_and_checkpoints_every_epoch():
    from attnas.config import load_config

    s = load_config("opemb-enas-protocol").strategy.options
    assert (s.model, s.hidden, s.latent, s.train.lr, s.train.batch_size, s.beta, s.train.epochs) == ("dvae", 501, 56, 1e-4, 32, 0.005, 300)
    assert s.checkpoint_every == 1 and s.epoch_recon_graphs > 0 and s.gp_repeats == 10
    assert load_config("opemb-enas-protocol", ["strategy.model=dvae-emb"]).strategy.options.model == "dvae-emb"


def test_every_epoch_records_reconstruction_and_a_killed_run_resumes_to_the_same_curve(tmp_path):
    """Only the killed run is a child: the reference and the resume (``attnas.pipeline.resume``,
    what ``attnas search --resume`` runs) run here, on one thread as the child."""
    import signal

    from attnas_subprocess import resume_here, run_attnas, search_here

    write_enas(tmp_path / "data", 40)
    strategy = dict(RECIPE["strategy"], model="dvae", epochs=3, checkpoint_every=1, epoch_recon_graphs=3,
                    epoch_recon_decodes=2, beta=0.01, gp_repeats=1, properties=False, tsne_points=0, bo=None)
    (tmp_path / "ref").mkdir()
    recipe, ref_run = search_here(tmp_path / "ref", dict(RECIPE, strategy=strategy), threads=1,
                                  data_dir=tmp_path / "data")

    def curve(run):
        events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
        return [{k: e[k] for k in ("epoch", "loss", "recon", "kld", "recon_accuracy", "recon_greedy")}
                for e in events if e.get("phase") == "vae" and "epoch" in e]

    ref = curve(ref_run)
    assert [e["epoch"] for e in ref] == [1, 2, 3]
    assert all(0.0 <= e["recon_accuracy"] <= 1.0 and 0.0 <= e["recon_greedy"] <= 1.0 for e in ref)
    data = ["--data-dir", str(tmp_path / "data")]
    killed = run_attnas("search", str(recipe), "--out", str(tmp_path / "run"), *data, fault="vae:2", check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    resume_here(tmp_path / "run", threads=1, data_dir=tmp_path / "data")
    assert curve(tmp_path / "run") == ref
