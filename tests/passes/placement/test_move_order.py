"""dp-ls's move orders (passes/placement/local_search.py): `slack` tries the least-slack groups
first, under the latency objective, and is refused by name when misspelt."""

from __future__ import annotations

import numpy as np
import pytest

from cost_model.simulator.slack import node_slack
from passes.placement import PlacementContext, PlacementError, place, place_outcome
from passes.placement.local_search import _Search, local_search
from placement_testlib import Builder, topology


def uneven_branches() -> "Graph":  # noqa: F821
    """A long chain and a short one from one input: the short one has slack."""
    b = Builder(2500)
    x = b.input("x")
    long, short = x, x
    for i in range(6):
        long = b.op("Tanh", [long], f"long{i}")
    for i in range(2):
        short = b.op("Tanh", [short], f"short{i}")
    return b.output(long, short)


def test_slack_order_tries_the_least_slack_groups_first() -> None:
    ctx = PlacementContext.from_graph(uneven_branches(), topology(2), objective="latency")
    start = np.zeros(ctx.num_nodes, dtype=np.int64)
    search = _Search(ctx, start, seed=0, order="slack")
    slack = node_slack(search.result)
    tried = [change[0][0] for change in search.candidates()]
    assert len(tried) == ctx.num_nodes  # each single-node group once (two devices: one move each)
    group_slack = np.array([slack[ctx.groups[g]].min() for g in tried])
    assert np.all(np.diff(group_slack) >= 0)
    assert group_slack[0] == 0.0 and group_slack[-1] > 0.0  # the short chain waits on nothing
    # Random order (the default) is a permutation that ignores slack.
    orders = {tuple(change[0][0] for change in _Search(ctx, start, seed=s).candidates()) for s in range(5)}
    assert len(orders) > 1


def test_slack_order_is_a_dp_ls_option_and_finds_a_placement_no_worse_than_its_start() -> None:
    graph = uneven_branches()
    outcome = place_outcome(graph, "dp-ls", topology(2), objective="latency", budget=60, move_order="slack")
    ctx = PlacementContext.from_graph(graph, topology(2), objective="latency")
    assert ctx.evaluate(outcome.device) <= ctx.evaluate(np.zeros(ctx.num_nodes, dtype=np.int64)) + 1e-12
    with pytest.raises(PlacementError, match="move_order must be one of random, slack"):
        place(graph, "dp-ls", topology(2), move_order="critical")
    with pytest.raises(ValueError, match="move order"):
        local_search(ctx, np.zeros(ctx.num_nodes, dtype=np.int64), order="critical")
