"""Issue 23's fast correctness check: every model of Chatzianastasis et al. (2021) overfits a few ENAS graphs.

D-VAE, DVAE-EMB, GCN and GCN-EMB are each trained on the first 20 ENAS training
architectures (small model, full-batch Adam) and must then reconstruct all of them: the
stochastic decoding of each posterior mean (D-VAE's reconstruction accuracy, Chatzianastasis et al., 2021,
Table 1) returns the input graph in every one of 10 draws per graph. The larger setting
(100 graphs) is ``docs/results/opemb/overfit.py``. Skipped without the ENAS file.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from attnas.graphvae.vae import PAPER_MODELS


@pytest.fixture(scope="module")
def enas20():
    root = Path(os.environ.get("ATTNAS_DATA", "/nonexistent"))
    if not (root / "enas" / "final_structures6.txt").exists():
        pytest.skip("ENAS data not available (set ATTNAS_DATA)")
    from attnas.data.enas import load_enas6

    return load_enas6(root).train.subset(range(20))


@pytest.mark.parametrize("model", list(PAPER_MODELS))
def test_model_overfits_twenty_enas_graphs_to_perfect_reconstruction(enas20, model):
    from docs.results.opemb.overfit import overfit

    out = overfit(enas20, model, hidden=48, latent=56, lr=1e-2, batch_size=20, max_epochs=600, check_every=25,
                  decodes=10, seed=0, log=lambda line: None)
    assert out["greedy_accuracy"] == 1.0, out
    assert out["recon_accuracy"] == 1.0, out
    assert out["loss"] < 0.1, out
