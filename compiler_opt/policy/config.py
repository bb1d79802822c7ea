"""`PolicyConfig`: the network's sizes, stored in every checkpoint so a load rebuilds the same net."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping

from graph_ir.errors import CompilerOptError

__all__ = ["PolicyConfig", "PolicyConfigError"]


class PolicyConfigError(CompilerOptError):
    """A policy configuration with unknown fields or out-of-range sizes."""


@dataclass(frozen=True)
class PolicyConfig:
    hidden: int = 32  # width of node, device and graph embeddings (small: two CPU cores train it)
    kind_dim: int = 16  # op-kind embedding width
    sage_layers: int = 2  # GraphSAGE layers (each: forward-edge + backward-edge max-pool SAGEConv)
    attention_layers: int = 2  # segmented recurrent attention layers over the topological order
    heads: int = 4  # attention heads
    segment: int = 64  # nodes per attention segment (memory: the previous segment, no gradient)
    fusion_levels: int = 4  # fusion priority classes; level 0 starts no merge
    priority_levels: int = 8  # scheduling priority classes
    iterations: int = 2  # non-autoregressive refinement iterations

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int) or value < 1:
                raise PolicyConfigError(f"policy config {f.name} must be a positive integer, got {value!r}", field=f.name)
        if self.hidden % self.heads:
            raise PolicyConfigError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads})", field="heads")
        if self.fusion_levels < 2:
            raise PolicyConfigError("fusion_levels must be at least 2 (level 0 means: start no merge)", field="fusion_levels")

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PolicyConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise PolicyConfigError(f"unknown policy config fields {unknown}", field="config")
        return cls(**{k: int(v) for k, v in data.items()})
