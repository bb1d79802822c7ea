"""`compiler-opt inspect`: a summary of a model file (structure, ops, I/O, FLOPs, parameters)."""

from __future__ import annotations

import logging
import os
from collections import Counter
from typing import TYPE_CHECKING, Any

from compiler_opt.cli._render import Table, human_bytes, human_count

if TYPE_CHECKING:
    from graph_ir import Graph, Value

__all__ = ["summarize_graph", "summarize_model", "summary_tables"]

logger = logging.getLogger(__name__)


def _value_info(value: Value) -> dict[str, Any]:
    shape = value.shape
    return {
        "name": value.name,
        "dtype": None if value.dtype is None else str(value.dtype),
        "shape": None if shape is None else list(shape),
        "type": None if value.type is None else str(value.type),
    }


def _qualified_op(domain: str, op_type: str) -> str:
    return f"{domain}::{op_type}" if domain not in ("", "ai.onnx") else op_type


def summarize_graph(graph: Graph) -> dict[str, Any]:
    """Everything `inspect --json` reports about a graph, as plain JSON-able data."""
    from cost_model.flops import graph_flops
    from graph_ir.summary import feed_values, parameter_stats

    ops: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    nodes = 0
    edges = 0
    for node in graph.all_nodes():
        nodes += 1
        ops[_qualified_op(node.domain, node.op_type)] += 1
        kinds[str(node.kind)] += 1
        # An edge is one use of a node's output by another node (graph inputs and constants are not nodes).
        edges += sum(1 for value in node.inputs if value is not None and value.producer is not None)
    graphs = [graph, *graph.subgraphs()]
    initializers = [value for g in graphs for value in g.initializers.values()]
    weights = parameter_stats(graph)  # initializers and constant nodes (frozen GraphDefs keep weights in Const)
    parameter_bytes, parameters = weights.parameter_bytes, weights.parameters
    model = graph.model
    constants = graph.initializers  # older ONNX files also list initializers as graph inputs
    return {
        "graph": graph.name,
        "nodes": nodes,
        "top_level_nodes": len(graph),
        "subgraphs": len(graphs) - 1,
        "functions": len(graph.functions),
        "edges": edges,
        "ops": dict(ops.most_common()),
        "op_kinds": dict(kinds.most_common()),
        "inputs": [_value_info(v) for v in feed_values(graph) if v.name not in constants],  # TF Placeholders too
        "outputs": [_value_info(v) for v in graph.outputs],
        "flops": graph_flops(graph),
        "parameters": parameters,
        "parameter_bytes": parameter_bytes,
        "initializers": len(initializers),
        "constant_nodes": weights.constant_nodes,
        "opset_imports": dict(sorted(graph.opset_imports.items())),
        "producer": None if model is None else " ".join(p for p in (model.producer_name, model.producer_version) if p),
    }


def summarize_model(path: str, *, infer_shapes: bool | None = None, module: int | None = None) -> dict[str, Any]:
    """Load a model file and summarize it; `format`, `file` and `file_bytes` lead the dict.

    `infer_shapes` runs the `shape-infer` pass first, so FLOPs and byte counts also cover
    values whose shapes the file does not record; None (the default) runs it exactly when some
    node result is untyped (older ONNX files record no intermediate shapes: FLOPs would read 0).
    """
    from graph_ir.io import load_with_format

    graph, format_name = load_with_format(path, module)
    if infer_shapes is None:
        infer_shapes = any(v.type is None for node in graph.all_nodes() for v in node.outputs)
    if infer_shapes:
        import passes
        from graph_ir.errors import CompilerOptError

        try:
            graph = passes.run_pipeline(graph, "shape-infer").graph
        except CompilerOptError as err:
            raise err.with_context(file=path)
    summary = {"file": path, "format": format_name, "file_bytes": os.path.getsize(path)}
    summary.update(summarize_graph(graph))
    logger.info("inspected %s: %d nodes", path, summary["nodes"])
    return summary


def _format_type(info: dict[str, Any]) -> tuple[str, str]:
    shape = info["shape"]
    shape_text = "?" if shape is None else "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"
    return info["dtype"] or "?", shape_text


def summary_tables(summary: dict[str, Any]) -> list[Table]:
    """The human-readable view of `summarize_model`'s result."""
    overview = Table("Model", ["property", "value"])
    nodes = f"{summary['nodes']} ({summary['top_level_nodes']} top level, {summary['subgraphs']} subgraphs)"
    rows = [
        ["file", summary["file"]],
        ["format", summary["format"]],
        ["producer", summary["producer"] or "-"],
        ["nodes", nodes],
        ["edges", str(summary["edges"])],
        ["FLOPs", f"{human_count(summary['flops'])} ({summary['flops']})"],
        ["parameters", f"{human_count(summary['parameters'])} in {summary['initializers']} initializers"
         + (f" and {summary['constant_nodes']} constant nodes" if summary.get("constant_nodes") else "")],
        ["parameter bytes", human_bytes(summary["parameter_bytes"])],
    ]
    if summary["functions"]:
        rows.append(["functions", str(summary["functions"])])
    if summary["opset_imports"]:
        opsets = ", ".join(f"{domain or 'ai.onnx'}={version}" for domain, version in summary["opset_imports"].items())
        rows.append(["opset imports", opsets])
    overview.rows = rows

    io_table = Table("Inputs and outputs", ["", "name", "dtype", "shape"])
    for role, key in (("input", "inputs"), ("output", "outputs")):
        for info in summary[key]:
            io_table.rows.append([role, info["name"], *_format_type(info)])

    ops = Table("Ops", ["op_type", "count"], numeric=frozenset({1}))
    ops.rows = [[op, str(count)] for op, count in summary["ops"].items()]
    kinds = Table("Op kinds", ["kind", "count"], numeric=frozenset({1}))
    kinds.rows = [[kind, str(count)] for kind, count in summary["op_kinds"].items()]
    return [overview, io_table, ops, kinds]
