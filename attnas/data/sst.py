"""Stanford Sentiment Treebank (Socher et al., EMNLP 2013) from its PTB trees.

Files: ``<root>/sst/{train,dev,test}.txt``, one binarised PTB tree per line, every node
``(label subtree...)`` or ``(label token)`` with a sentiment label 0..4; the root's label
is the sentence's (see ``SOURCES.md``). AutoAttend searches on SST (Sec. 5.1.1, Table 1).

- ``sst5``: the sentences with their 5-way root labels (8,544 / 1,101 / 2,210).
- ``sst2``: the sentences whose root label is not 2, with 0-1 negative and 3-4 positive
  (6,920 / 872 / 1,821).
- ``phrases=True`` (the usual SST training set, used by TextNAS and AutoAttend) trains on
  every labelled node of the *training* trees (phrases and the full sentences), each
  distinct (token sequence, label) pair once, in first-seen order; for ``sst2`` neutral
  phrases are dropped and the rest mapped as above. Validation and test keep full
  sentences. AutoAttend's reference code keeps duplicate phrases; we deduplicate, as is
  customary (pass ``dedupe_phrases=False`` for the reference behaviour).

Tokens are kept as they appear in the trees (PTB escapes such as ``-LRB-``);
:func:`normalize_ptb_token` lowercases them and undoes the escapes for vocabulary and
GloVe lookup.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

from attnas.core.errors import DataError
from attnas.core.text_files import read_text
from attnas.data.root import require_files, resolve_data_root
from attnas.data.text_dataset import TextDataset, TextSplit
from attnas.registry import register_dataset

FILES = {"train": "train.txt", "val": "dev.txt", "test": "test.txt"}
SST5_LABELS = ("very negative", "negative", "neutral", "positive", "very positive")
SST2_LABELS = ("negative", "positive")

PTB_ESCAPES = {"-lrb-": "(", "-rrb-": ")", "-lsb-": "[", "-rsb-": "]", "-lcb-": "{", "-rcb-": "}"}
_TREE_TOKEN = re.compile(r"\(|\)|[^\s()]+")


def normalize_ptb_token(token: str) -> str:
    """Lowercase a PTB token and undo its escapes (``-LRB-`` -> ``(``, ``\\/`` -> ``/``, ``\\*`` -> ``*``)."""
    t = token.lower()
    t = PTB_ESCAPES.get(t, t)
    return t.replace("\\/", "/").replace("\\*", "*") if "\\" in t else t


def parse_tree(line: str, where: str = "") -> tuple[list[str], list[tuple[int, int, int]]]:
    """Parse one PTB tree.

    Args:
        line: ``(3 (2 The) (4 (3 good) (2 film)))``.
        where: ``file:line`` for error messages.

    Returns:
        ``(tokens, nodes)``: the leaves in order, and every node as
        ``(label, start, end)`` (its span of leaves), in post-order (the root last).

    Raises:
        DataError: On unbalanced brackets, a missing or non-integer label, or no tokens.
    """
    toks = _TREE_TOKEN.findall(line)
    leaves: list[str] = []
    nodes: list[tuple[int, int, int]] = []
    stack: list[tuple[int, int]] = []
    i, n = 0, len(toks)
    while i < n:
        t = toks[i]
        if t == "(":
            if i + 1 >= n or not toks[i + 1].isdigit():
                got = toks[i + 1] if i + 1 < n else "end of line"
                raise DataError(f"{where}: expected a numeric label after '(', got {got!r}")
            stack.append((int(toks[i + 1]), len(leaves)))
            i += 2
        elif t == ")":
            if not stack:
                raise DataError(f"{where}: unbalanced ')'")
            label, start = stack.pop()
            nodes.append((label, start, len(leaves)))
            i += 1
            if not stack and i < n:
                raise DataError(f"{where}: text after the end of the tree")
        else:
            if not stack:
                raise DataError(f"{where}: token {t!r} outside the tree")
            leaves.append(t)
            i += 1
    if stack or not nodes:
        raise DataError(f"{where}: unbalanced '(' (the tree is not closed)")
    if not leaves:
        raise DataError(f"{where}: the tree has no tokens")
    return leaves, nodes


Tree = tuple[tuple[str, ...], tuple[tuple[int, int, int], ...]]


@functools.lru_cache(maxsize=8)
def _read_trees(path: str, _stamp: tuple[int, int]) -> tuple[Tree, ...]:
    out = []
    for lineno, line in enumerate(read_text(path, path, DataError).splitlines(), 1):
        if not line.strip():
            continue
        leaves, nodes = parse_tree(line, f"{path}:{lineno}")
        for label, _, _ in nodes:
            if not 0 <= label <= 4:
                raise DataError(f"{path}:{lineno}: sentiment label {label} is outside 0..4")
        out.append((tuple(leaves), tuple(nodes)))
    if not out:
        raise DataError(f"{path}: no trees found")
    return tuple(out)


def read_trees(path: Path) -> tuple[Tree, ...]:
    """All trees of a file as ``(tokens, nodes)`` pairs (see :func:`parse_tree`); cached per file version."""
    st = os.stat(path)
    return _read_trees(str(path), (st.st_mtime_ns, st.st_size))


def _map_label(label: int, binary: bool) -> int | None:
    if not binary:
        return label
    return None if label == 2 else int(label >= 3)


def _sentences(trees, binary: bool) -> TextSplit:
    tokens, labels = [], []
    for leaves, nodes in trees:
        y = _map_label(nodes[-1][0], binary)
        if y is not None:
            tokens.append(list(leaves))
            labels.append(y)
    return TextSplit(tokens, labels)


def _phrases(trees, binary: bool, dedupe: bool) -> TextSplit:
    tokens, labels, seen = [], [], set()
    for leaves, nodes in trees:
        for label, start, end in nodes:
            y = _map_label(label, binary)
            if y is None:
                continue
            phrase = leaves[start:end]
            if dedupe:
                key = (phrase, y)
                if key in seen:
                    continue
                seen.add(key)
            tokens.append(list(phrase))
            labels.append(y)
    return TextSplit(tokens, labels)


def load_sst(root: str | os.PathLike | None = None, *, binary: bool = False, phrases: bool = False,
             dedupe_phrases: bool = True) -> TextDataset:
    """Read SST-5 (or SST-2 with ``binary=True``) from ``<root>/sst``.

    Args:
        root: Data root (default: :func:`~attnas.data.root.resolve_data_root`).
        binary: SST-2: drop neutral (2) sentences, map 0-1 to 0 and 3-4 to 1.
        phrases: Train on every labelled phrase of the training trees.
        dedupe_phrases: Keep each (phrase, label) pair once.

    Returns:
        The dataset with ``train`` / ``val`` (``dev.txt``) / ``test`` splits.

    Raises:
        DataError: Naming the missing files, or the file and line of a malformed tree.
    """
    name = "sst2" if binary else "sst5"
    folder = resolve_data_root(root) / "sst"
    paths = dict(zip(FILES, require_files(folder, FILES.values(), name)))
    trees = {split: read_trees(p) for split, p in paths.items()}
    splits = {split: _sentences(t, binary) for split, t in trees.items()}
    if phrases:
        splits["train"] = _phrases(trees["train"], binary, dedupe_phrases)
    return TextDataset(
        name=name,
        splits=splits,
        label_names=SST2_LABELS if binary else SST5_LABELS,
        normalize=normalize_ptb_token,
        meta={"folder": str(folder), "phrases": phrases, "dedupe_phrases": dedupe_phrases},
    )


@register_dataset("sst5", modality="text", options=("phrases",))
def load_sst5(root: str | os.PathLike | None = None, *, phrases: bool = False,
              dedupe_phrases: bool = True) -> TextDataset:
    """SST-5: five-way sentence sentiment from the PTB trees (8,544 / 1,101 / 2,210)."""
    return load_sst(root, binary=False, phrases=phrases, dedupe_phrases=dedupe_phrases)


@register_dataset("sst2", modality="text", options=("phrases",))
def load_sst2(root: str | os.PathLike | None = None, *, phrases: bool = False,
              dedupe_phrases: bool = True) -> TextDataset:
    """SST-2: binary sentence sentiment, neutral dropped (6,920 / 872 / 1,821)."""
    return load_sst(root, binary=True, phrases=phrases, dedupe_phrases=dedupe_phrases)
