"""The suite's ``xdist_group`` marks take effect under ``--dist loadgroup``.

The Ray tests share one pytest-xdist worker (two local Rays at once would compete for the
same cores), and modules with a costly module fixture run on one worker (it is built once).
pytest-xdist groups a test by appending ``@group`` to its id; with pytest 9.2 that rename
is lost and every test is scheduled alone (pyproject.toml keeps pytest below 9.2).
"""

import pytest

pytestmark = pytest.mark.xdist_group("ray")


def test_a_grouped_test_carries_its_group_under_loadgroup(request):
    if not request.config.getoption("loadgroup", default=False):
        pytest.skip("not run by pytest-xdist with --dist loadgroup")
    assert request.node.nodeid.endswith("@ray"), request.node.nodeid
