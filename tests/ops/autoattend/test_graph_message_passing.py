"""Eq. 7 message passing: every correlation coefficient against a per-node loop reference."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attnas.ops.autoattend.graph_context import GraphContext
from attnas.ops.autoattend.graph_message_passing import COEFFICIENTS, CorrelationMessagePassing


def reference(op: CorrelationMessagePassing, x: torch.Tensor, ei: torch.Tensor) -> torch.Tensor:
    """Eq. 7 written node by node from Table 3 (with self-loops, softmax for learned coefficients)."""
    n = x.size(0)
    nbrs = {v: [v] for v in range(n)}
    for u, v in ei.t().tolist():
        if u != v:
            nbrs[v].append(u)
    deg = {v: len(nbrs[v]) for v in range(n)}
    wh = op.lin(x).view(n, op.heads, op.head_dim)
    out = torch.zeros(n, op.heads, op.head_dim)
    for v in range(n):
        for i in range(op.heads):
            es = []
            for u in nbrs[v]:
                hu, hv = wh[u, i], wh[v, i]
                c = op.coefficient
                if c == "const":
                    e = torch.tensor(1.0)
                elif c == "gcn":
                    e = torch.tensor(1 / math.sqrt(deg[u] * deg[v]))
                elif c == "gat":
                    e = F.leaky_relu(op.att_l[i] @ hu + op.att_r[i] @ hv, 0.2)
                elif c == "sym_gat":
                    e = F.leaky_relu(op.att_l[i] @ hu + op.att_r[i] @ hv, 0.2) + \
                        F.leaky_relu(op.att_l[i] @ hv + op.att_r[i] @ hu, 0.2)
                elif c == "cos":
                    e = (op.att_l[i] * hu) @ (op.att_r[i] * hv)
                elif c == "linear":
                    e = torch.tanh((op.att_l[i] * hu).sum())
                else:
                    e = op.att_a(torch.tanh(op.att_l[i] * hu + op.att_r[i] * hv)).squeeze()
                es.append(e)
            es = torch.stack(es)
            if op.coefficient not in ("const", "gcn"):
                es = torch.softmax(es, 0)
            out[v, i] = sum(w * wh[u, i] for w, u in zip(es, nbrs[v]))
    merged = out.reshape(n, -1) if op.merge == "concat" else out.sum(1)
    return op.act(merged + op.bias)


@pytest.mark.parametrize("coefficient", COEFFICIENTS)
@pytest.mark.parametrize("merge", ["concat", "sum"])
def test_matches_reference(coefficient, merge):
    torch.manual_seed(0)
    n = 9
    ei = torch.randint(0, n, (2, 20))
    ei = torch.unique(ei[:, ei[0] != ei[1]], dim=1)
    x = torch.randn(n, 8)
    op = CorrelationMessagePassing(8, coefficient, heads=4, merge=merge).eval()
    with torch.no_grad():
        assert torch.allclose(op(x, GraphContext(ei, n)), reference(op, x, ei), atol=1e-5)
