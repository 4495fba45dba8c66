"""The candidate mechanisms of a mechanism search in ``report.md``: drop scores beside costs.

:func:`mechanism_section` reads ``metrics.json``: the first trial's ``drop_score_<block>``
(a block is a mechanism, or ``mechanism/i`` for one head of a heterogeneous search) and
``mechanism_costs`` (:meth:`MechanismSearch.mechanism_costs
<attnas.strategies.mechanism_search.MechanismSearch.mechanism_costs>`); a run without
``mechanism_costs`` gets no section.
"""

from __future__ import annotations

from typing import Any

from attnas.costs.config import latency_clause

DROP_PREFIX = "drop_score_"


def _shape(signature: Any) -> str:
    """The input size in words: every tensor's shape, e.g. ``x [32, 60], y [32]``."""
    if isinstance(signature, dict):
        return ", ".join(f"{k} {_shape(v)}" for k, v in signature.items())
    if isinstance(signature, list) and signature and isinstance(signature[-1], str):
        return "[" + ", ".join(map(str, signature[:-1])) + "]"
    if isinstance(signature, list):
        return "(" + ", ".join(_shape(v) for v in signature) + ")"
    return str(signature)


def mechanism_section(metrics: dict) -> list[str]:
    """Markdown lines: one row per scored block with its drop score and its mechanism's
    costs (``[]`` when ``metrics`` has no ``mechanism_costs``)."""
    costs = metrics.get("mechanism_costs")
    if not isinstance(costs, dict) or not costs:
        return []
    names = list(dict.fromkeys(k for c in costs.values() for k in c))
    kept = set((metrics.get("selection") or {}).get("kept", ()))
    scores = {k[len(DROP_PREFIX):]: v for k, v in metrics.items() if k.startswith(DROP_PREFIX)}
    rows = [(block, scores[block], block.split("/")[0]) for block in sorted(scores, key=lambda b: -scores[b])]
    scored = {mech for _, _, mech in rows}
    rows += [(mech, None, mech) for mech in costs if mech not in scored]
    timed = latency_clause(metrics.get("costs_latency"), "latency_ms" in names)
    lines = ["## Mechanisms", "",
             "The first trial's masked-drop score of each block (higher: the supernet leans on it more) beside "
             "the costs of its mechanism's homogeneous network, measured on the input "
             f"{_shape(metrics.get('mechanism_costs_input'))}{timed}.", "",
             "| block | drop score | " + " | ".join(names) + " |", "|---" * (len(names) + 2) + "|"]
    for block, score, mech in rows:
        values = " | ".join(f"{costs.get(mech, {}).get(n, float('nan')):g}" for n in names)
        mark = " **(kept)**" if block in kept else ""
        lines.append(f"| {block}{mark} | {'' if score is None else f'{score:.4f}'} | {values} |")
    return lines + [""]
