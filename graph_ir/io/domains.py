"""Which op domains each exporter can write, and the clear error when a graph has others.

Every importer keeps the source's op names under its own domain ("hlo", "stablehlo", "tf",
"aten"); exporting a graph to another format needs those ops mapped, which only a few paths do
(see the conversion table in WORKSPACE.md). Writing a foreign op silently into, say, an ONNX
custom domain would make a file that no runtime can execute.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from graph_ir.errors import ExportError

if TYPE_CHECKING:
    from graph_ir.graph import Graph

__all__ = ["SOURCE_DOMAINS", "require_domains", "reject_domains"]

SOURCE_DOMAINS = {
    "hlo": "XLA HLO",
    "stablehlo": "StableHLO",
    "tf": "TensorFlow",
    "aten": "PyTorch (aten)",
    "torch.fx": "PyTorch (fx)",
}


def _domains(graph: Graph) -> set[str]:
    found = {node.domain for node in graph.all_nodes()}
    for function in graph.functions.values():
        found.update(node.domain for node in function.graph.all_nodes())
    return found


def _fail(bad: Iterable[str], target: str) -> None:
    names = ", ".join(f"{SOURCE_DOMAINS.get(d, d or 'ai.onnx')} ('{d}')" for d in sorted(bad))
    raise ExportError(
        f"cannot write {target}: the graph has {names} ops, which have no mapping to {target} "
        "(the conversion table in WORKSPACE.md lists the paths that exist)"
    )


def require_domains(graph: Graph, allowed: set[str], target: str) -> None:
    """Raise ExportError unless every op's domain is in `allowed`."""
    bad = _domains(graph) - allowed
    if bad:
        _fail(bad, target)


def reject_domains(graph: Graph, target: str) -> None:
    """Raise ExportError when any op comes from another framework's domain (ONNX export)."""
    bad = _domains(graph) & set(SOURCE_DOMAINS)
    if bad:
        _fail(bad, target)
