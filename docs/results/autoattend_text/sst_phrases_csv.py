"""Write a user-style CSV of labelled SST phrases (the "own CSV" setting of the text search).

Draws ``--rows`` labelled phrases (default 6,000) at random, with ``--seed``, from the
deduplicated labelled phrases of the SST training trees (Socher et al., EMNLP 2013; the
``task.phrases`` training set, five classes 0-4) and writes them as ``text,label`` rows,
as a user would hand the text search their own file. ``attnas`` then holds out 10 % for
validation and 10 % for test, stratified by label (``task.csv.val_fraction`` /
``test_fraction``).

Usage (from the repository root)::

    ATTNAS_DATA=../shared/data python docs/results/autoattend_text/sst_phrases_csv.py runs/sst-phrases-6000.csv
"""

from __future__ import annotations

import argparse
import csv
import random

from attnas.data.root import resolve_data_root
from attnas.data.sst import load_sst5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="the CSV file to write")
    parser.add_argument("--rows", type=int, default=6000, help="phrases to draw")
    parser.add_argument("--seed", type=int, default=0, help="seed of the draw")
    args = parser.parse_args()
    train = load_sst5(resolve_data_root(None), phrases=True)["train"]
    if not 0 < args.rows <= len(train):
        parser.error(f"--rows must be in 1..{len(train)}, got {args.rows}")
    picked = random.Random(args.seed).sample(range(len(train)), args.rows)
    with open(args.out, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        for i in picked:
            writer.writerow([" ".join(train.tokens[i]), train.labels[i]])
    print(f"{args.out}: {args.rows} phrases")


if __name__ == "__main__":
    main()
