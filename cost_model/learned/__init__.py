"""The learned kernel cost model: TpuGraphs-schema datasets, the GraphSAGE model, its losses,
training and metrics, baselines, and `LearnedCosts` (a kernel cost source for the simulator).

Modules import torch / torch_geometric where they need them; importing this package does not.

    compiler-opt costmodel train out/tile -o tile.pt --loss listmle --split program
    predictor = TilePredictor.load("tile.pt")   # cost_model.learned.predictor
"""

from __future__ import annotations

from cost_model.learned.tpugraphs import DatasetError, KernelRecord, load_dir, load_npz, save_npz

__all__ = ["DatasetError", "KernelRecord", "load_dir", "load_npz", "save_npz"]
