"""ListOps: the evaluator, the generator's rules, determinism and the dataset entry point."""

from __future__ import annotations

import hashlib
import json
import random
import statistics
import subprocess
import sys

import pytest

from attnas import registry
from attnas.data.listops import (
    DIGITS,
    END,
    MAX,
    MED,
    MIN,
    OPERATORS,
    SUM_MOD,
    VOCAB,
    ListOpsConfig,
    draw_shape,
    evaluate_tokens,
    evaluate_tree,
    generate_examples,
    generate_tree,
    load_listops,
    max_tree_length,
    shape_length,
    tokenize,
    tree_length,
    tree_tokens,
)
from attnas.core.errors import ConfigError, DataError

SMALL = ListOpsConfig(min_length=10, max_length=60, train_size=60, val_size=10, test_size=10, seed=3)


@pytest.mark.parametrize(
    "text,value",
    [
        ("[MAX 2 9 [MIN 4 7 ] 0 ]", 9),
        ("[MIN 5 [MAX 1 8 ] 6 ]", 5),
        ("[SM 5 6 7 ]", 8),  # 18 mod 10
        ("[MED 1 2 3 4 ]", 2),  # median 2.5, integer part
        ("[MED 3 [SM 9 9 ] 1 ]", 3),  # SM -> 8; median of 3, 8, 1
        ("[MAX [MED 9 0 0 ] [SM 1 1 ] ]", 2),
        ("( ( ( [MAX 2 ) 9 ) ] )", 9),  # LRA's source format with parentheses
        ("7", 7),
    ],
)
def test_evaluator_on_hand_written_expressions(text, value):
    assert evaluate_tokens(text.replace("(", " ").replace(")", " ").split()) == value
    assert evaluate_tokens([VOCAB[i] for i in tokenize(text)]) == value


def python_value(tree) -> int:
    """Evaluate by rendering the tree as a Python expression over builtins and calling eval()."""

    def render(t) -> str:
        if isinstance(t, int):
            return str(t)
        args = "[" + ", ".join(render(a) for a in t[1]) + "]"
        return {MAX: f"max({args})", MIN: f"min({args})", MED: f"int(median({args}))",
                SUM_MOD: f"(sum({args}) % 10)"}[t[0]]

    return eval(render(tree), {"median": statistics.median, "max": max, "min": min, "sum": sum, "int": int})


def test_random_trees_agree_with_pythons_evaluation():
    rng = random.Random(0)
    checked = 0
    while checked < 200:
        drawn = generate_tree(rng, max_depth=6, max_args=5, max_length=300)
        if drawn is None:
            continue
        tree, length = drawn
        toks = tree_tokens(tree)
        assert length == len(toks) == tree_length(tree)
        assert evaluate_tokens(toks) == evaluate_tree(tree) == python_value(tree)
        checked += 1


@pytest.mark.parametrize("bad,message", [("[MAX 1 2", "unclosed"), ("1 2", "more than one"),
                                         ("[MAX 1 ] ]", "unmatched"), ("[MAX ]", "no arguments"),
                                         ("[FOO 1 ]", "unknown token")])
def test_evaluator_names_malformed_expressions(bad, message):
    with pytest.raises(DataError, match=message):
        evaluate_tokens(bad.split())


def depth_and_arities(tree, depth=1):
    if isinstance(tree, int):
        return depth, []
    depths, arities = [depth], [len(tree[1])]
    for a in tree[1]:
        d, ar = depth_and_arities(a, depth + 1)
        depths.append(d)
        arities += ar
    return max(depths), arities


def test_generated_trees_follow_the_rules():
    rng = random.Random(1)
    seen_ops, seen_arities = set(), set()
    for _ in range(300):
        tree, length = generate_tree(rng, max_depth=4, max_args=5)
        depth, arities = depth_and_arities(tree)
        assert depth <= 4 and all(2 <= a <= 5 for a in arities)
        seen_arities |= set(arities)
        seen_ops |= {t for t in tree_tokens(tree) if t in OPERATORS}
        assert set(tree_tokens(tree)) <= set(OPERATORS) | set(DIGITS) | {END}
    assert seen_ops == set(OPERATORS) and seen_arities == {2, 3, 4, 5}


def test_operator_probability_is_lras():
    """The root is an operator with probability VALUE_P = 0.25."""
    rng = random.Random(2)
    roots = [draw_shape(rng, 10, 10, max_length=50) for _ in range(4000)]
    ops = sum(1 for s in roots if s is None or s[0] > 0)
    assert 0.22 < ops / 4000 < 0.28


def test_giving_up_on_long_trees_only_drops_trees_that_are_too_long():
    """With and without the early stop, the same seed yields the same accepted shapes."""
    for seed in range(30):
        full = draw_shape(random.Random(seed), 10, 10)
        cut = draw_shape(random.Random(seed), 10, 10, max_length=40)
        if shape_length(full) < 40:
            assert cut == full
        else:
            assert cut is None


def test_dataset_bounds_sizes_and_uniqueness():
    data = generate_examples(SMALL)
    assert {k: len(v[0]) for k, v in data.items()} == {"train": 60, "val": 10, "test": 10}
    all_seqs = [tuple(s) for split in data.values() for s in split[0]]
    assert len(set(all_seqs)) == 80
    for seqs, labels in data.values():
        for s, y in zip(seqs, labels):
            assert 10 < len(s) < 60
            assert evaluate_tokens([VOCAB[i] for i in s]) == y


def digest(cfg: ListOpsConfig) -> str:
    return hashlib.sha256(json.dumps(generate_examples(cfg), sort_keys=True).encode()).hexdigest()


def test_same_seed_same_data_and_other_seed_other_data():
    assert digest(SMALL) == digest(SMALL)
    assert digest(SMALL) != digest(ListOpsConfig(**{**SMALL.__dict__, "seed": 4}))


def test_data_do_not_depend_on_the_interpreters_hash_seed():
    code = (
        "from attnas.data.listops import ListOpsConfig, generate_examples; import json, hashlib;"
        "cfg = ListOpsConfig(min_length=10, max_length=60, train_size=60, val_size=10, test_size=10, seed=3);"
        "print(hashlib.sha256(json.dumps(generate_examples(cfg), sort_keys=True).encode()).hexdigest())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONHASHSEED": "12345", "PYTHONPATH": "."})
    assert out.stdout.strip() == digest(SMALL)


def test_impossible_or_exhausted_bounds_are_reported():
    with pytest.raises(ConfigError, match="max_length: must exceed"):
        ListOpsConfig(min_length=10, max_length=11)
    with pytest.raises(ConfigError, match="no ListOps tree"):
        ListOpsConfig(min_length=max_tree_length(2, 3), max_length=1000, max_depth=2, max_args=3)
    # only the 4 x 10 x 10 trees "[OP d d ]" have 4 tokens: 400 distinct examples
    few = ListOpsConfig(min_length=3, max_length=5, train_size=400, val_size=5, test_size=5)
    with pytest.raises(DataError, match="distinct examples"):
        generate_examples(few, max_stale=2000)


def test_registered_loader_returns_token_sequences():
    data = registry.create("dataset", "listops", SMALL)
    assert data.vocab == VOCAB and data.vocab[data.pad_id] == "<pad>"
    assert data.num_classes == 10 and data.max_len == 59
    assert load_listops(SMALL).splits == data.splits


def test_tokenize_rejects_unknown_tokens():
    with pytest.raises(DataError, match="unknown token 'X'"):
        tokenize("[MAX 1 X ]")
