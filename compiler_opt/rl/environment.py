"""One training environment: a graph on a topology, compiled once, scored by the simulator.

An episode is one joint decision for the whole graph (device, fusion group, priority per node).
`GraphEnvironment.score(actions)` decodes it to `Decisions` (no IR rewriting) and runs one
`simulate()` on the `SimulationProblem` built at construction. The reward is
`-sqrt(step_time / reference_step_time)` where the reference is a classical placement
(`reference`, default the human-expert layer-wise split) with the framework's default fusion
(below) and default priorities. A placement that runs out of memory in the
simulator pays `oom_penalty * (1 + overflow)` on top (overflow: the worst device's peak / capacity
- 1, capped at 4); decisions the simulator rejects score `-invalid_penalty`. The cost source is
whatever the problem was built with: the reward code never asks which.

"Default fusion" is the framework's (`passes.fusion.defaults`: XLA's GPU rules for HLO/StableHLO,
the cuDNN-runtime epilogues for TF/ONNX/torch), decided once on the unplaced graph and kept within
each device (`colocated_groups`): exactly how `compiler-opt bench` and RESULTS.md (d) score a
classical placement, so GO's ratios and (d)'s are the same measure. A graph with no known default
falls back to the `fuse` pass's greedy fusion under the placement. GO's own fusion levels are read
relative to that default (`DecisionDecoder.relative_groups`): keep, dissolve, or merge further.

The reference is computed on first use: the `fuse` pass's search on a 10k-node graph takes tens
of seconds, and zero-shot inference (which ranks episodes by step time) never needs it.
"""

from __future__ import annotations

import functools
import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from compiler_opt.policy.decode import SEARCH_LIMIT, DecisionDecoder
from compiler_opt.policy.features import PolicyInputs, policy_inputs
from cost_model.decisions import DecisionError, Decisions
from cost_model.costs import SimulationProblem, simulate

if TYPE_CHECKING:
    from cost_model.devices.topology import Topology
    from graph_ir.graph import Graph

__all__ = ["EpisodeScore", "GraphEnvironment"]

logger = logging.getLogger(__name__)

_MAX_OVERFLOW = 4.0


@dataclass(frozen=True)
class EpisodeScore:
    reward: float  # NaN when scored without a reward (zero-shot ranking)
    step_time_s: float  # inf when invalid
    oom: bool
    invalid: bool

    @property
    def rank_key(self) -> tuple[bool, bool, float]:
        """Valid before invalid, fitting before OOM, then faster first."""
        return (self.invalid, self.oom, self.step_time_s)


class GraphEnvironment:
    def __init__(
        self,
        name: str,
        graph: Graph,
        topology: Topology,
        *,
        reference: str = "human-expert",
        oom_penalty: float = 1.0,
        invalid_penalty: float = 4.0,
        problem: SimulationProblem | None = None,
        placement_only: bool = False,
        exact_cycles: bool = True,
    ) -> None:
        self.name = name
        self.graph = graph
        self.topology = topology
        self.problem = problem if problem is not None else SimulationProblem.from_graph(graph, topology)
        self.inputs: PolicyInputs = policy_inputs(self.problem)
        # exact_cycles: the decoder's fusion merges checked exactly (policy/decode.py), not refused
        # when the cycle search passes 4096 nodes (False: the search as before RESULTS.md h19, where
        # the exact check made the cold zero-shot 2.6% faster held out, 11% on gnmt-8 at 4xV100)
        self.exact_cycles = exact_cycles
        self.decoder = DecisionDecoder(self.problem, search_limit=None if exact_cycles else SEARCH_LIMIT)
        # Placement-only ablation: the policy's fusion and priority actions are ignored; the
        # default greedy fusion and priorities are used, as for the classical methods.
        self.placement_only = placement_only
        self.oom_penalty = oom_penalty
        self.invalid_penalty = invalid_penalty
        self.capacity = np.array([d.memory_bytes for d in topology.devices], dtype=np.float64)
        self.reference_name = reference

    # What an environment computes once for its problem and a variant of it can share.
    _SHARED = ("default_groups", "bottom_level", "reference_decisions", "reference_step_s")

    def as_placement_only(self) -> GraphEnvironment:
        """The placement-only ablation of this environment: the same problem, reference and
        default fusion, sharing what this one has computed already (the reference placement
        alone takes ~5 CPU s on 29k-node GNMT: computed again inside a budget it would crowd out
        the ablation's warm start)."""
        other = GraphEnvironment(
            self.name, self.graph, self.topology, reference=self.reference_name, oom_penalty=self.oom_penalty,
            invalid_penalty=self.invalid_penalty, problem=self.problem, placement_only=True, exact_cycles=self.exact_cycles,
        )
        for key in self._SHARED:
            if key in self.__dict__:
                other.__dict__[key] = self.__dict__[key]
        return other

    @functools.cached_property
    def default_groups(self) -> np.ndarray | None:
        """The framework's default fusion over the problem's nodes (None: no default known)."""
        from passes.fusion.defaults import default_group_array

        name, groups = default_group_array(self.graph, max_nodes=self.decoder.max_nodes)
        if groups is not None and len(groups) != self.problem.num_nodes:
            logger.warning("%s: default fusion covers %d of %d nodes; using the fuse pass", self.label, len(groups), self.problem.num_nodes)
            return None
        logger.debug("%s: default fusion %s", self.label, name)
        return groups

    def default_fusion(self, device: np.ndarray) -> np.ndarray:
        """The default fusion under placement `device`: the framework's groups kept within each device."""
        from passes.fusion.defaults import colocated_groups

        if self.default_groups is None:
            return self.decoder.default_fusion(device)
        return colocated_groups(self.default_groups, device)

    @functools.cached_property
    def bottom_level(self) -> np.ndarray:
        """Each node's longest path to a sink with placement-free costs (the HEFT upward rank)."""
        from passes.placement.context import PlacementContext

        return PlacementContext(self.problem).bottom_level

    @functools.cached_property
    def reference_decisions(self) -> Decisions:
        return self.classical(self.reference_name)

    @functools.cached_property
    def reference_step_s(self) -> float:
        step = max(simulate(self.problem, self.reference_decisions).step_time_s, 1e-12)
        logger.info("%s: %d nodes, reference %s %.4g s", self.label, self.problem.num_nodes, self.reference_name, step)
        return step

    @property
    def label(self) -> str:
        return f"{self.name}@{self.topology.name}"

    def classical(self, method: str) -> Decisions:
        """A classical placement with the default fusion and priorities, found on this
        environment's own problem (its devices and kernel cost source; building the problem again
        from the graph cost ~1 CPU s a method on 29k nodes, and used roofline costs whatever the
        environment's source)."""
        from passes.placement import method_pass

        chosen = method_pass(method)
        # a device the topology lacks ("/device:GPU:*" in a GraphDef) counts as unplaced: GO decides them all
        base = Decisions.from_graph(self.graph, self.problem.topology, nodes=self.problem.nodes, unknown_devices="default")
        device = chosen.run(chosen.context_on(self.problem, base=base)).decisions.device
        return Decisions(device, self.default_fusion(device), np.zeros(self.problem.num_nodes))

    def decisions(self, actions: np.ndarray) -> Decisions:
        if self.placement_only:
            device = np.asarray(actions)[:, 0].astype(np.int32)
            return Decisions(device, self.default_fusion(device), np.zeros(self.problem.num_nodes))
        return self.decoder.decisions(actions, self.default_groups)

    def score_decisions(self, decisions: Decisions, *, with_reward: bool = True) -> EpisodeScore:
        try:
            result = simulate(self.problem, decisions)
        except DecisionError as err:
            logger.debug("%s: invalid decisions: %s", self.label, err)
            return EpisodeScore(-self.invalid_penalty, math.inf, False, True)
        step = result.step_time_s
        overflow = float(np.max(result.peak_memory_bytes / self.capacity - 1.0))
        oom = overflow > 0
        if not with_reward:
            return EpisodeScore(math.nan, step, oom, False)
        reward = -math.sqrt(step / self.reference_step_s)
        if oom:
            reward -= self.oom_penalty * (1.0 + min(overflow, _MAX_OVERFLOW))
        return EpisodeScore(reward, step, oom, False)

    def score(self, actions: np.ndarray, *, with_reward: bool = True) -> EpisodeScore:
        """Score one episode's final actions, int (N, 3)."""
        return self.score_decisions(self.decisions(actions), with_reward=with_reward)
