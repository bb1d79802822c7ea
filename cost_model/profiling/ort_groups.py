"""Run an ONNX graph as a fusion configuration: every group one onnxruntime session.

The ONNX counterpart of `calibration.GroupExecutor` (XLA, HLO graphs): each group of the
configuration (`kernel_groups(decisions)`, in schedule order) is cut out (`cut_group`), exported
and loaded as its own `InferenceSession` (cached by members), and a plan runs them in order,
passing values between sessions on the host. Graph inputs get seeded random data. Sessions keep
onnxruntime's graph optimizations on, so a group runs the way onnxruntime would fuse those nodes
inside one model, and the split between groups is what the configuration changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from cost_model.profiling.ort_backend import _random_feeds, old_opset_hint
from cost_model.profiling.subgraph import GroupCut, ProfilingError, cut_group

if TYPE_CHECKING:
    from cost_model.decisions import Decisions
    from graph_ir.core import Node, Value
    from graph_ir.graph import Graph

__all__ = ["OrtGroupExecutor", "OrtPlan"]


@dataclass
class OrtPlan:
    """One configuration, ready to run: sessions in schedule order and the value routing."""

    steps: list[tuple[Any, GroupCut, list[str]]]  # session, cut, its input names
    initial: dict[Value, np.ndarray]
    outputs: list[Value]

    def run(self) -> list[np.ndarray]:
        env: dict[Value, np.ndarray] = dict(self.initial)
        for session, cut, names in self.steps:
            try:
                results = session.run(None, {name: env[value] for name, value in zip(names, cut.inputs)})
            except Exception as err:  # onnxruntime's own types; name the group (random data can be a bad shape or index)
                members = ", ".join(n.name for n in cut.members[:4]) + (", ..." if len(cut.members) > 4 else "")
                raise ProfilingError(f"onnxruntime cannot run group [{members}] on seeded random inputs: {err}") from err
            env.update(zip(cut.outputs, results))
        return [env[v] for v in self.outputs]


class OrtGroupExecutor:
    """Builds onnxruntime sessions for the groups of an ONNX graph (cached) and plans from them."""

    def __init__(self, graph: Graph, nodes: Sequence[Node], *, seed: int = 0, intra_op_threads: int = 1) -> None:
        self.graph = graph
        self.nodes = list(nodes)
        self.intra_op_threads = intra_op_threads  # 1: timings on a shared machine
        self.sessions: dict[tuple[int, ...], tuple[Any, GroupCut, list[str]]] = {}
        feeds = _random_feeds(graph.inputs, seed)
        self.input_arrays = {value: feeds[value.name] for value in graph.inputs}
        self._whole: Any = None  # the whole graph as one session (run_whole)
        self.on_compile: Callable[[], object] | None = None  # called after each group's session is built (a progress bar)

    def session(self, members: Sequence[int]) -> tuple[Any, GroupCut, list[str]]:
        key = tuple(members)
        found = self.sessions.get(key)
        if found is None:
            from graph_ir.io.onnx_export import export_onnx

            cut = cut_group(self.graph, [self.nodes[i] for i in members])
            try:
                session = self._session(export_onnx(cut.graph))
            except Exception as err:  # onnxruntime raises its own exception types; name the group
                names = ", ".join(n.name for n in cut.members[:4])
                raise ProfilingError(f"onnxruntime cannot load group [{names}{', ...' if len(cut.members) > 4 else ''}]: {err}{old_opset_hint(str(err))}") from err
            found = self.sessions[key] = (session, cut, [v.name for v in cut.graph.inputs])
            if self.on_compile is not None:
                self.on_compile()
        return found

    def uncompiled(self, decisions: Decisions) -> set[tuple[int, ...]]:
        """The groups `plan(decisions)` would still have to build a session for (keys of `sessions`)."""
        from cost_model.profiling.calibration import kernel_groups

        return {tuple(m) for m in kernel_groups(decisions)[0]} - self.sessions.keys()

    def run_whole(self) -> list[np.ndarray]:
        """The graph as one onnxruntime session on the plans' inputs: the reference a
        configuration's outputs are checked against."""
        from graph_ir.io.onnx_export import export_onnx

        if self._whole is None:  # loaded once; the check runs it twice
            self._whole = self._session(export_onnx(self.graph))
        return self._whole.run(None, {value.name: array for value, array in self.input_arrays.items()})

    def _session(self, model: Any) -> Any:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = self.intra_op_threads
        options.log_severity_level = 3
        return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])

    def plan(self, decisions: Decisions) -> OrtPlan:
        from cost_model.profiling.calibration import kernel_groups

        groups, _ = kernel_groups(decisions)
        known = set(self.graph.inputs)
        steps = []
        for members in groups:
            session, cut, names = self.session(members)
            for value in cut.inputs:
                if value not in known:
                    raise ProfilingError(f"%{value.name} is read before it is produced: the schedule is not topological")
            known.update(cut.outputs)
            steps.append((session, cut, names))
        missing = [v.name for v in self.graph.outputs if v not in known]
        if missing:
            raise ProfilingError(f"graph outputs {missing} are produced by no group")
        return OrtPlan(steps, self.input_arrays, list(self.graph.outputs))
