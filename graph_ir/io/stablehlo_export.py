"""IR -> StableHLO text.

- graphs imported from StableHLO (domain "stablehlo") are printed directly as MLIR
  (`stablehlo_printer`), so dynamic ops and quantized types round trip; the text is parsed again
  (MLIR verifies it) before it is returned;
- graphs of XLA HLO ops go through XLA's own HLO -> StableHLO converter.
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
    from graph_ir.io.stablehlo_import import STABLEHLO_DOMAIN

    domains = {node.domain for node in graph.all_nodes()}
    if domains <= {STABLEHLO_DOMAIN} and graph.model.source_format == "stablehlo" or domains == {STABLEHLO_DOMAIN}:
        return _print_and_check(graph)
    # StableHLO is written from HLO graphs (XLA converts); a graph read from a .mlir file is one
    # when it was loaded with load_stablehlo_as_hlo, as `compiler-opt convert` does.
    require_domains(graph, {HLO_DOMAIN}, "StableHLO")
    try:
        bytecode = hlo_to_stablehlo_bytecode(export_hlo_proto(graph))
    except Exception as err:  # XLA's converter reports its own status errors
        raise ExportError(f"XLA could not convert the module to StableHLO: {str(err).splitlines()[0]}") from None
    with mlir_context():
        return str(ir.Module.parse(bytecode))


def _print_and_check(graph: Graph) -> str:
    from graph_ir.errors import CompilerOptError
    from graph_ir.io.stablehlo_import import import_stablehlo_text
    from graph_ir.io.stablehlo_printer import print_stablehlo_module

    text = print_stablehlo_module(graph)
    try:
        import_stablehlo_text(text, file="<exported StableHLO>")
    except CompilerOptError as err:
        raise ExportError(f"the printed module does not verify: {err}") from None
    return text


def save_stablehlo(graph: Graph, path: str | os.PathLike[str]) -> None:
    text = export_stablehlo_text(graph)
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
