"""Missing named datasets fetched through torch_geometric's own classes, with no network.

torch_geometric's ``download`` methods are replaced: a fake that writes tiny raw files where
the real one would (the class then processes them as usual), one that fails as an offline
machine does, or one that fails the test when called.
"""

from __future__ import annotations

import shutil
import urllib.error
from pathlib import Path

import numpy as np
import pytest
from torch_geometric.datasets import PPI, HeterophilousGraphDataset, Planetoid

from attnas.core.errors import DataError
from attnas.data.heterophilous import load_heterophilous
from attnas.data.planetoid import load_planetoid
from attnas.data.ppi import PPI_FILES, load_ppi
from code_marker import CodeRanMarker
from heterophilous_files import arrays
from planetoid_files import SUFFIXES, write_planetoid_raw

CORA_FILES = sorted(f"ind.cora.{s}" for s in SUFFIXES)


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


@pytest.fixture
def online(monkeypatch):
    """Downloads allowed (the test set-up forbids them); every test here replaces the download itself."""
    monkeypatch.delenv("ATTNAS_OFFLINE", raising=False)


def _never(self):
    pytest.fail(f"{type(self).__name__} tried to download")


def test_missing_cora_is_fetched_and_processed_by_torch_geometric_s_planetoid(tmp_path, monkeypatch, online):
    calls = []

    def fake_download(self):
        calls.append(("download", self.raw_dir))
        write_planetoid_raw(Path(self.raw_dir), "cora")

    process = Planetoid.process

    def spy_process(self):
        calls.append(("process", self.raw_dir))
        process(self)

    monkeypatch.setattr(Planetoid, "download", fake_download)
    monkeypatch.setattr(Planetoid, "process", spy_process)
    root = tmp_path / "data"
    ds = load_planetoid(root, "cora")
    assert [c[0] for c in calls] == ["download", "process"]
    assert calls[0][1] == calls[1][1] and Path(calls[0][1]).is_relative_to(root)
    assert ds.graph.num_nodes == 530 and ds.num_classes == 3 and int(ds.graph.train_mask.sum()) == 6
    # the raw files are left where a user would put them; the staging folder is gone
    assert _tree(root) == ["Planetoid", "Planetoid/Cora", "Planetoid/Cora/raw",
                           *(f"Planetoid/Cora/raw/{f}" for f in CORA_FILES)]
    monkeypatch.setattr(Planetoid, "download", _never)
    assert load_planetoid(root, "cora").graph.num_nodes == 530  # read from the data root: no second download


def test_offline_machine_gets_one_line_naming_dataset_folder_and_what_to_do(tmp_path, monkeypatch, online):
    def no_network(self):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(Planetoid, "download", no_network)
    root = tmp_path / "data"
    with pytest.raises(DataError) as err:
        load_planetoid(root, "cora")
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("Cora: missing ind.cora.x, ind.cora.tx")
    assert str(root / "Planetoid" / "Cora" / "raw") in msg
    assert "downloading them through torch_geometric.datasets.Planetoid failed (URLError:" in msg
    assert "put the files there (see docs/own_data.md) or set --data-dir or $ATTNAS_DATA" in msg
    assert _tree(tmp_path) == []  # the data root and the staging folder are removed again


def test_offline_switch_attempts_no_download(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNAS_OFFLINE", "1")
    monkeypatch.setattr(Planetoid, "download", _never)
    with pytest.raises(DataError, match=r"missing ind.cora.x, .* downloads are off \(--offline or \$ATTNAS_OFFLINE\), so nothing is downloaded\)$"):
        load_planetoid(tmp_path, "cora")
    assert _tree(tmp_path) == []


def test_a_crafted_download_is_refused_before_torch_geometric_unpickles_it(tmp_path, monkeypatch, online):
    import pickle

    marker = tmp_path / "code-ran"

    def crafted_download(self):
        write_planetoid_raw(Path(self.raw_dir), "cora")
        Path(self.raw_dir, "ind.cora.x").write_bytes(pickle.dumps(CodeRanMarker(marker), protocol=2))

    monkeypatch.setattr(Planetoid, "download", crafted_download)
    with pytest.raises(DataError, match=r"Planetoid failed \(DataError: Cora/raw/ind.cora.x is not a Planetoid file"):
        load_planetoid(tmp_path / "data", "cora")
    assert not marker.exists() and not (tmp_path / "data").exists()


def test_a_download_missing_a_file_is_reported_and_leaves_nothing(tmp_path, monkeypatch, online):
    def short_download(self):
        write_planetoid_raw(Path(self.raw_dir), "cora")
        Path(self.raw_dir, "ind.cora.graph").unlink()

    monkeypatch.setattr(Planetoid, "download", short_download)
    monkeypatch.setattr(Planetoid, "process", lambda self: pytest.fail("processed an incomplete download"))
    with pytest.raises(DataError, match=r"raw, and the download through torch_geometric.datasets.Planetoid did "
                                        r"not provide ind.cora.graph; put the files there"):
        load_planetoid(tmp_path / "data", "cora")
    assert _tree(tmp_path) == []


def test_a_download_interrupted_by_ctrl_c_leaves_no_staging_folder(tmp_path, monkeypatch, online):
    def interrupted_download(self):
        write_planetoid_raw(Path(self.raw_dir), "cora")
        raise KeyboardInterrupt

    monkeypatch.setattr(Planetoid, "download", interrupted_download)
    with pytest.raises(KeyboardInterrupt):
        load_planetoid(tmp_path / "data", "cora")
    assert _tree(tmp_path) == []


def test_files_already_there_are_kept_and_only_the_missing_ones_moved_in(tmp_path, monkeypatch, online):
    raw = tmp_path / "Planetoid" / "Cora" / "raw"
    write_planetoid_raw(raw, "cora")
    (raw / "ind.cora.allx").unlink()
    before = {p.name: p.read_bytes() for p in raw.iterdir()}
    monkeypatch.setattr(Planetoid, "download", lambda self: write_planetoid_raw(Path(self.raw_dir), "cora"))
    assert load_planetoid(tmp_path, "cora").graph.num_nodes == 530
    assert sorted(p.name for p in raw.iterdir()) == CORA_FILES
    assert all((raw / name).read_bytes() == data for name, data in before.items())
    assert _tree(tmp_path / "Planetoid" / "Cora") == ["raw", *(f"raw/{f}" for f in CORA_FILES)]


def test_a_heterophilous_graph_torch_geometric_knows_is_fetched_through_its_class(tmp_path, monkeypatch, online):
    def fake_download(self):
        np.savez(Path(self.raw_dir) / f"{self.name}.npz", **arrays())

    monkeypatch.setattr(HeterophilousGraphDataset, "download", fake_download)
    ds = load_heterophilous(tmp_path, "minesweeper")
    assert ds.graph.num_nodes == 20 and ds.graph.split_masks["train"].shape == (10, 20)
    assert _tree(tmp_path) == ["heterophilous", "heterophilous/minesweeper.npz"]


def test_heterophilous_files_torch_geometric_does_not_ship_are_not_downloaded(tmp_path, monkeypatch, online):
    monkeypatch.setattr(HeterophilousGraphDataset, "download", _never)
    with pytest.raises(DataError, match=r"texas: missing texas.npz in .*; nothing is downloaded\)$"):
        load_heterophilous(tmp_path, "texas")


def test_missing_ppi_is_fetched_through_torch_geometric_s_ppi(tmp_path, monkeypatch, write_ppi, online):
    source = write_ppi(tmp_path / "published")

    def fake_download(self):
        for name in PPI_FILES:
            shutil.copy(source / name, self.raw_dir)

    monkeypatch.setattr(PPI, "download", fake_download)
    ds = load_ppi(tmp_path / "data")
    assert [len(ds.graphs[s]) for s in ("train", "val", "test")] == [3, 1, 1]
    assert _tree(tmp_path / "data") == ["PPI", "PPI/raw", *sorted(f"PPI/raw/{f}" for f in PPI_FILES)]
