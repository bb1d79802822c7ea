"""The basic passes: dead code elimination, CSE, constant folding, shape inference, topo sort."""

from __future__ import annotations

from passes.basic.constant_folding import ConstantFolding
from passes.basic.cse import CommonSubexpressionElimination
from passes.basic.dce import DeadCodeElimination
from passes.basic.shape_inference import ShapeInference
from passes.basic.topo_sort import TopologicalSort

__all__ = [
    "CommonSubexpressionElimination",
    "ConstantFolding",
    "DeadCodeElimination",
    "ShapeInference",
    "TopologicalSort",
]
