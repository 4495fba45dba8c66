"""Our canonical codes of NAS-Bench-Graph architectures equal the package's table keys."""

import itertools

import pytest

from attnas.spaces.nas_bench_graph_canonical import LINKS, OPS, canonical_code, canonical_form, code_of, decode

nbg = pytest.importorskip("nas_bench_graph.architecture")

RAW_LINKS = list(itertools.product(range(1), range(2), range(3), range(4)))


def test_code_equals_the_package_hash_on_every_raw_architecture():
    """All 24 raw link patterns x 9^4 operations (less all-skip): 157,464 architectures,
    whose codes are the 26,206 keys of the tables."""
    codes = set()
    for links in RAW_LINKS:
        for ops in itertools.product(OPS, repeat=4):
            if ops == ("skip",) * 4:
                continue
            ours = canonical_code(links, ops)
            assert ours == nbg.Arch(list(links), list(ops)).valid_hash(), (links, ops)
            codes.add(ours)
    assert len(codes) == 26_206


def test_canonical_forms_are_fixed_points_and_decode_back():
    for links, ops in [((0, 1, 2, 3), ("skip", "gcn", "gat", "fc")), ((0, 0, 2, 1), ("gin", "sage", "skip", "arma"))]:
        form = canonical_form(links, ops)
        assert form[0] in LINKS
        assert canonical_form(*form) == form
        assert decode(code_of(*form)) == form
