"""``attnas compare``: the searched attention against random search and hand-designed attention.

Example:
    >>> from attnas.comparison import compare
    >>> result = compare("autoattend-cora-quick", seeds=3, out="runs/cmp")   # doctest: +SKIP
    >>> [v["sentence"] for v in result["verdicts"]]                           # doctest: +SKIP
"""

from attnas.comparison.runner import compare

__all__ = ["compare"]
