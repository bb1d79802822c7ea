"""Policy checkpoints: weights, the policy config, the training config and the command line.

Saved with `torch.save` of plain containers (tensors, str, int, float, lists, dicts) and loaded
with `torch.load(weights_only=True)` only, so a checkpoint file can never run code. Written
atomically (temp file + rename). `DEFAULT_CHECKPOINT` is the small pretrained policy shipped in
the package (see WORKSPACE.md for how it was trained).
"""

from __future__ import annotations

import io
import json
import logging
import pickle
from pathlib import Path
from typing import Any, Mapping

import torch

from compiler_opt.policy.config import PolicyConfig, PolicyConfigError
from compiler_opt.policy.network import GoPolicy
from graph_ir.errors import CompilerOptError
from graph_ir.io.atomic import atomic_path

__all__ = ["CHECKPOINT_FORMAT", "DEFAULT_CHECKPOINT", "CheckpointError", "load_checkpoint", "save_checkpoint"]

logger = logging.getLogger(__name__)

CHECKPOINT_FORMAT = 1
DEFAULT_CHECKPOINT = Path(__file__).resolve().parent / "checkpoints" / "go_small.pt"
# Parameters added after checkpoints were shipped: a file without them loads with their initial
# value (`heads.keep`: the warm-start keep bonus, used by seeded episodes only; `heads.context_*`:
# the placement-context layers, zero-initialised so an older file decides exactly as before).
_ADDED_LATER = frozenset(
    {"heads.keep"}
    | {f"heads.context_score.{i}.{p}" for i in (0, 2) for p in ("weight", "bias")}
    | {"heads.context_token.weight", "heads.context_token.bias"}
)


class CheckpointError(CompilerOptError):
    """A checkpoint that is missing, unreadable, of another format or for another network."""


def save_checkpoint(
    path: str | Path,
    policy: GoPolicy,
    *,
    train_config: Mapping[str, Any] | None = None,
    command: str = "",
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """Write `policy` and its provenance to `path` atomically; returns the path."""
    payload = {
        "format": CHECKPOINT_FORMAT,
        "policy_config": policy.config.to_dict(),
        # JSON text: any nesting of plain values survives weights_only loading unchanged.
        "train_config": json.dumps(dict(train_config or {}), sort_keys=True, default=str),
        "command": command,
        "extra": json.dumps(dict(extra or {}), sort_keys=True, default=str),
        "state_dict": {k: v.detach().clone() for k, v in policy.state_dict().items()},
    }
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    target = Path(path)
    with atomic_path(target) as tmp:
        tmp.write_bytes(buffer.getvalue())
    return target


def load_checkpoint(path: str | Path | None = None) -> tuple[GoPolicy, dict[str, Any]]:
    """(policy in eval mode, metadata: train_config, command, extra, policy_config) from `path`
    (default: the shipped checkpoint)."""
    source = Path(path) if path is not None else DEFAULT_CHECKPOINT
    if not source.is_file():
        raise CheckpointError(f"no checkpoint at {source}", file=str(source))
    try:
        payload = torch.load(source, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:  # torch's own text is a page suggesting weights_only=False: never here
        raise CheckpointError("cannot read checkpoint: not a torch file of tensors and plain values (read with weights_only=True)",
                              file=str(source)) from None
    except Exception as err:  # noqa: BLE001 - torch raises many types for a bad file
        raise CheckpointError(f"cannot read checkpoint: {err}", file=str(source)) from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"not a compiler-opt policy checkpoint (format {CHECKPOINT_FORMAT})", file=str(source), field="format")
    try:
        config = PolicyConfig.from_dict(payload["policy_config"])
        policy = GoPolicy(config)
        missing, unexpected = policy.load_state_dict(_with_new_node_features(payload["state_dict"], policy), strict=False)
        if unexpected or set(missing) - _ADDED_LATER:
            raise RuntimeError(f"missing keys {sorted(set(missing) - _ADDED_LATER)}, unexpected keys {sorted(unexpected)}")
    except (KeyError, PolicyConfigError, RuntimeError) as err:
        raise CheckpointError(f"checkpoint does not match the network: {err}", file=str(source), field="state_dict") from None
    policy.eval()
    meta = {
        "policy_config": config.to_dict(),
        "train_config": json.loads(payload.get("train_config") or "{}"),
        "command": payload.get("command", ""),
        "extra": json.loads(payload.get("extra") or "{}"),
    }
    return policy, meta


def _with_new_node_features(state: dict[str, torch.Tensor], policy: GoPolicy) -> dict[str, torch.Tensor]:
    """`state` whose node input layer reads fewer feature columns than `policy`'s (a checkpoint
    saved before `graph_ir.features` appended columns) widened with zero weights on the new
    ones, so it computes exactly what it computed before; anything else is left as it is."""
    key = "encoder.inp.0.weight"
    old = state.get(key)
    new = policy.state_dict()[key]
    if old is None or old.dim() != 2 or old.shape[0] != new.shape[0] or old.shape[1] >= new.shape[1]:
        return state
    widened = dict(state)
    widened[key] = torch.cat([old, old.new_zeros(old.shape[0], new.shape[1] - old.shape[1])], dim=1)
    return widened
