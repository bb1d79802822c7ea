"""Tile kernel shapes of the workload suite and of a folder of HLO files (see
`cost_model.measure.tile.shapes`): what `compiler-opt costmodel collect --task tile` measures."""

from __future__ import annotations

import glob
import logging
import os

from cost_model.measure.tile.kernels import KernelSpec
from cost_model.measure.tile.shapes import kernels_from_graph, scale_to_budget, unique_kernels

__all__ = ["suite_kernels"]

logger = logging.getLogger(__name__)


def suite_kernels(*, hlo_dir: str | None = None, max_flops: float = 8e6, min_flops: float = 1e4, nchw_every: int = 3, include_slow: bool = False) -> list[KernelSpec]:
    """Unique kernels of the workload suite (train and inference) and of `hlo_dir`'s HLO files,
    scaled to `max_flops`. Every `nchw_every`-th NHWC conv is added again in NCHW (the suite's
    convs are NHWC, as JAX writes them; ONNX/PyTorch graphs use NCHW)."""
    import graph_ir
    from compiler_opt.workloads import build_workload, list_workloads

    found: list[KernelSpec] = []
    for workload in list_workloads():
        if workload.slow and not include_slow:
            continue
        for mode in workload.modes:
            found += kernels_from_graph(build_workload(workload.name, mode), f"{workload.name}/{mode}")
    if hlo_dir:
        for path in sorted(glob.glob(os.path.join(hlo_dir, "*.hlo"))):
            try:
                graph = graph_ir.load(path)
            except Exception as error:  # an HLO file the importer rejects contributes no kernels
                logger.info("skipped %s: %s", path, error)
                continue
            found += kernels_from_graph(graph, os.path.basename(path))
    scaled = [s for s in (scale_to_budget(s, max_flops, min_flops=min_flops) for s in unique_kernels(found)) if s is not None]
    specs = unique_kernels(scaled)
    convs = [s for s in specs if s.kind == "conv2d_nhwc"]
    specs += [KernelSpec("conv2d_nchw", s.dims, s.source) for s in convs[::nchw_every]] if nchw_every else []
    return unique_kernels(specs)
