"""`LearnedCosts`: the learned tile model as a kernel cost source for the simulator.

    costs = LearnedCosts(TilePredictor.load("model.pt"))
    problem = SimulationProblem.from_graph(graph, topology, kernel_costs=costs)

It implements the cost door's `KernelCostSource` protocol (`cost_model.costs`), as `ProfiledCosts`
does, and is registered there as `learned` (`--costs learned`). What it answers: ops that map to a tile kernel (dot/MatMul/Gemm, conv,
reduce; `cost_model.measure.tile.shapes`) on device types whose kind is in `device_kinds`
(default "cpu": the model was trained on this host's CPU). The time of such an op is the model's
prediction for the op's `node.tile` configuration when it has a valid one, else the best
prediction over `candidates` random configurations (the time a tuned kernel would take). Every
other op, every other device type and every fused group of more than one node gets NaN / the
roofline default: the tile model does not describe them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Sequence

import numpy as np

from cost_model.learned.predictor import TilePredictor

if TYPE_CHECKING:
    from cost_model.costs import SimulationProblem
    from graph_ir.core import Node

__all__ = ["LearnedCosts"]

logger = logging.getLogger(__name__)


class LearnedCosts:
    """A `KernelCostSource` backed by a trained tile `TilePredictor`."""

    def __init__(self, predictor: TilePredictor, *, device_kinds: Sequence[str] = ("cpu",), candidates: int = 64, seed: int = 0) -> None:
        self.predictor = predictor
        self.device_kinds = tuple(device_kinds)
        self.candidates = candidates
        self.seed = seed
        self._memo: dict[str, float] = {}

    def node_seconds(self, node: Node) -> float:
        """Predicted seconds of `node` as one kernel, NaN when no tile kernel describes it."""
        from cost_model.measure.tile.collect import kernel_configs
        from cost_model.measure.tile.kernels import build_kernel
        from cost_model.measure.tile.shapes import kernels_from_node
        from cost_model.measure.tile.space import TileConfig, TileSpace

        spec = kernels_from_node(node)
        if spec is None:
            return float("nan")
        tile_text = node.meta.get("tile_config") if isinstance(node.meta.get("tile_config"), str) else None
        key = spec.signature + "|" + (tile_text or "")
        if key not in self._memo:
            space = TileSpace(build_kernel(spec))
            configs = None
            if tile_text is not None:
                try:
                    config = TileConfig.from_text(tile_text)
                    space.validate(config)
                    configs = [config]
                except (ValueError, KeyError) as error:
                    logger.warning("%s: ignoring its tile config (%s)", node.name, error)
            if configs is None:
                configs = kernel_configs(space, self.seed, self.candidates)
            self._memo[key] = float(self.predictor.predict_seconds(space, configs).min())
        return self._memo[key]

    def _columns(self, problem: SimulationProblem) -> np.ndarray:
        return np.array([t.kind in self.device_kinds for t in problem.device_types], dtype=bool)

    def node_times(self, problem: SimulationProblem) -> np.ndarray:
        times = np.full((len(problem.nodes), len(problem.device_types)), np.nan)
        columns = self._columns(problem)
        if not columns.any():
            return times
        single = np.array([self.node_seconds(n) for n in problem.nodes], dtype=np.float64)
        times[:, columns] = single[:, None]
        return times

    def kernel_times(
        self, problem: SimulationProblem, kernel_of_node: np.ndarray, kernel_size: np.ndarray, kernel_type: np.ndarray, default: np.ndarray
    ) -> np.ndarray:
        out = np.array(default, dtype=np.float64, copy=True)
        columns = self._columns(problem)
        for k in np.flatnonzero((kernel_size == 1) & columns[kernel_type]).tolist():
            node = int(np.flatnonzero(kernel_of_node == k)[0])
            seconds = self.node_seconds(problem.nodes[node])
            if np.isfinite(seconds):
                out[k] = seconds
        return out
