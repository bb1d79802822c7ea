"""`upgrade-opset`: move an ONNX graph to a newer ai.onnx opset with onnx's version converter.

Why: onnxruntime dropped its kernels for the oldest operator versions (BatchNormalization-6,
Gemm-6, Mul-6, PRelu-6, AveragePool-1...), so a model importing opset 1-6 cannot be run, measured
or checked there. onnx's `version_converter` rewrites each node to the same computation in the
newer opset (attributes such as `broadcast` and `consumed_inputs` become what the new version
means by them); that is the library made for the job, so this pass only exports, converts and
imports again. It never downgrades: a graph already at or past `version` is left alone.

One gap of the converter is closed here: PRelu before opset 7 applied a slope of shape [C] per
channel (axis 1), opset 7 broadcasts it numpy-style from the last axis, and the converter keeps the
[C] slope (onnxruntime then fails, or broadcasts it wrongly when the last dimension happens to be
C). Such slopes get an Unsqueeze to [C, 1, ...] before the conversion.

The graph is rebuilt, so nodes are new objects; run it first in a pipeline (before decisions
such as fusion groups or devices are written, which the converter does not carry).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from passes.infra.base import Pass, PassError, PassResult, option
from passes.infra.registry import register_pass

if TYPE_CHECKING:
    from graph_ir.graph import Graph

__all__ = ["UpgradeOpset", "DEFAULT_OPSET"]

DEFAULT_OPSET = 13  # supported by every onnxruntime of the last years; the converter's adapters reach it from opset 1


@register_pass
@dataclass(frozen=True)
class UpgradeOpset(Pass):
    """Convert an ONNX graph below `version` of the ai.onnx opset up to it (onnx.version_converter)."""

    name = "upgrade-opset"
    version: int = option(DEFAULT_OPSET, "the ai.onnx opset to reach (graphs at or past it are left alone)")

    def call(self, graph: Graph) -> PassResult:
        from graph_ir.errors import CompilerOptError
        from graph_ir.io.onnx_export import export_onnx
        from graph_ir.io.onnx_import import import_onnx

        current = graph.opset_imports.get("", graph.opset_imports.get("ai.onnx"))
        if current is None or current >= self.version:
            return PassResult(graph, False)  # not an ONNX graph, or new enough
        import onnx
        from onnx import version_converter

        try:
            model = export_onnx(graph)
        except CompilerOptError as err:
            raise PassError(f"upgrade-opset: the graph cannot be exported to ONNX: {err}", pass_name=self.name) from err
        if current < 7:
            _per_channel_prelu_slopes(graph, model)
        try:
            converted = version_converter.convert_version(model, self.version)
            # The converter keeps the old IR version; below IR 4 every initializer must also be a
            # graph input, which the new initializers it makes (Pad's pads) are not.
            converted.ir_version = max(converted.ir_version, onnx.helper.find_min_ir_version_for(list(converted.opset_import)))
            onnx.checker.check_model(converted)
        except Exception as err:  # the converter raises RuntimeError / ValidationError with the op it could not adapt
            raise PassError(f"upgrade-opset: onnx cannot convert opset {current} to {self.version}: {err}", pass_name=self.name) from err
        upgraded = import_onnx(converted)
        upgraded.meta.update({k: v for k, v in graph.meta.items() if k not in upgraded.meta})
        upgraded.meta["upgraded_opset"] = {"from": current, "to": self.version}
        return PassResult(upgraded, True)


def _per_channel_prelu_slopes(graph: Graph, model: object) -> None:
    """Before opset 7, PRelu's [C] slope ran per channel: unsqueeze it to [C, 1, ...] (top-level
    graph; shapes from the IR) so the numpy broadcasting of opset 7 on means the same."""
    import onnx

    shapes = {v.name: v.shape for node in graph.nodes for v in [*node.inputs, *node.outputs] if v is not None and v.shape is not None}
    shapes |= {v.name: v.shape for v in graph.inputs if v.shape is not None}
    body = model.graph  # type: ignore[attr-defined]
    nodes = list(body.node)
    del body.node[:]
    for index, node in enumerate(nodes):
        if node.op_type == "PRelu" and node.domain in ("", "ai.onnx") and len(node.input) == 2:
            x, slope = shapes.get(node.input[0]), shapes.get(node.input[1])
            if x is not None and slope is not None and len(x) > 2 and len(slope) == 1 and slope[0] != 1:
                name = f"{node.input[1]}__per_channel_{index}"
                body.node.append(onnx.helper.make_node("Unsqueeze", [node.input[1]], [name], axes=list(range(1, len(x) - 1)),
                                                        name=f"{node.name or 'PRelu'}__slope_per_channel"))
                node.input[1] = name
        body.node.append(node)
