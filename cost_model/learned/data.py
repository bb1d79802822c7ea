"""Kernel records as tensors, and the two splits (random kernels; whole programs held out)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from cost_model.learned.tpugraphs import DatasetError, KernelRecord

__all__ = ["KernelTensors", "residual_inputs", "split_records", "to_tensors"]


@dataclass
class KernelTensors:
    record: KernelRecord
    node_feat: torch.Tensor
    node_opcode: torch.Tensor
    edge_index: torch.Tensor  # (2, E) producer -> consumer
    config_feat: torch.Tensor  # (C, Fc) or (C, M, Fn)
    node_config_ids: torch.Tensor | None
    runtime: torch.Tensor  # (C,) seconds (float64 kept for metrics)
    graph_feat: torch.Tensor | None = None  # (C, G) residual form: log of the fusion terms
    offset: torch.Tensor | None = None  # (C,) residual form: log roofline_s

    def configs(self, index: torch.Tensor | None = None) -> torch.Tensor:
        return self.config_feat if index is None else self.config_feat[index]


def residual_inputs(terms: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """(graph_feat, offset) of the residual form from `fusion_terms` rows (C, len(TERM_NAMES); read: `SHIPPED_TERMS`):
    log1p of the counts, of MB / GFLOP x 1000 and of measured seconds x 1e6 (a count of 0 stays near the others, where
    log(0 + eps) would put it far out), log roofline_s; the offset is log roofline_s."""
    from cost_model.learned.fusion_terms import SHIPPED_TERMS, TERM_NAMES

    # the shipped form's terms only: the sixteenth session's buffer size terms (off by default) leave the width of older checkpoints as it was
    terms = np.asarray(terms, dtype=np.float64)[:, [TERM_NAMES.index(name) for name in SHIPPED_TERMS]]
    roofline = SHIPPED_TERMS.index("roofline_s")
    scaled = np.array([1e3 if name.endswith(("_mb", "_gflops")) else 1e6 if name.startswith("measured_") else 1.0 for name in SHIPPED_TERMS])
    feat = np.log1p(terms * scaled)
    feat[:, roofline] = np.log(terms[:, roofline])
    return torch.from_numpy(feat).float(), torch.from_numpy(np.log(terms[:, roofline]))


def to_tensors(record: KernelRecord, *, residual: bool = False) -> KernelTensors:
    runtime = np.asarray(record.config_runtime, dtype=np.float64)
    if (runtime <= 0).any() or not np.isfinite(runtime).all():
        raise DatasetError("config_runtime must be positive and finite", file=record.path)
    if record.layout_form:
        configs = torch.from_numpy(record.node_config_feat).float()
        ids = torch.from_numpy(record.node_config_ids).long()
    else:
        configs = torch.from_numpy(record.config_feat).float()
        ids = None
    edges = torch.from_numpy(record.edge_index[:, ::-1].T.copy()).long() if record.edge_index.size else torch.zeros((2, 0), dtype=torch.long)
    graph_feat = offset = None
    if residual:
        from cost_model.learned.fusion_terms import record_terms

        graph_feat, offset = residual_inputs(record_terms(record))
    return KernelTensors(record, torch.from_numpy(record.node_feat).float(), torch.from_numpy(record.node_opcode).long(), edges,
                         configs, ids, torch.from_numpy(runtime), graph_feat, offset)


def split_records(records: Sequence[KernelRecord], split: str, *, test_fraction: float = 0.2, seed: int = 0) -> tuple[list[int], list[int]]:
    """(train, test) indices. `random`: kernels at random; `program`: whole programs held out
    (programs drawn at random until the test side holds `test_fraction` of the kernels)."""
    rng = np.random.default_rng(seed)
    n = len(records)
    if n < 2:
        raise DatasetError(f"a split needs at least 2 kernels, got {n}")
    if split == "random":
        order = rng.permutation(n).tolist()
        cut = max(1, int(round(test_fraction * n)))
        return sorted(order[cut:]), sorted(order[:cut])
    if split == "program":
        programs = sorted({r.program for r in records})
        if len(programs) < 2:
            raise DatasetError("the program split needs kernels of at least 2 programs")
        test_programs: set[str] = set()
        for program in rng.permutation(programs).tolist():
            if sum(r.program in test_programs for r in records) >= test_fraction * n:
                break
            test_programs.add(program)
        test = [i for i, r in enumerate(records) if r.program in test_programs]
        train = [i for i, r in enumerate(records) if r.program not in test_programs]
        if not train:
            raise DatasetError("the program split left no training kernels")
        return train, test
    raise ValueError(f"unknown split {split!r} (random, program)")
