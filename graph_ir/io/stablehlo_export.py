"""IR -> StableHLO text, for graphs of XLA HLO ops, through XLA's own HLO -> StableHLO converter.

Graphs imported from StableHLO keep MLIR op names (domain "stablehlo") and have no printer of
their own here; to rewrite a StableHLO file, load it as HLO (`load_stablehlo_as_hlo`, which is
what `compiler-opt convert x.mlir y.hlo` does) and write it back with this module.
"""

from __future__ import annotations

import os

from graph_ir.errors import ExportError
from graph_ir.graph import Graph
from graph_ir.io.atomic import atomic_path

__all__ = ["export_stablehlo_text", "save_stablehlo"]


def export_stablehlo_text(graph: Graph) -> str:
    from jaxlib.mlir import ir

    from graph_ir.io.hlo_export import export_hlo_proto
    from graph_ir.io.hlo_ops import HLO_DOMAIN
    from graph_ir.io.xla_bridge import hlo_to_stablehlo_bytecode, mlir_context

    from graph_ir.io.domains import require_domains

    # StableHLO is written from HLO graphs (XLA converts); a graph read from a .mlir file is one
    # when it was loaded with load_stablehlo_as_hlo, as `compiler-opt convert` does.
    require_domains(graph, {HLO_DOMAIN}, "StableHLO")
    try:
        bytecode = hlo_to_stablehlo_bytecode(export_hlo_proto(graph))
    except Exception as err:  # XLA's converter reports its own status errors
        raise ExportError(f"XLA could not convert the module to StableHLO: {str(err).splitlines()[0]}") from None
    with mlir_context():
        return str(ir.Module.parse(bytecode))


def save_stablehlo(graph: Graph, path: str | os.PathLike[str]) -> None:
    text = export_stablehlo_text(graph)
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
