"""The GO policy: features, network (GraphSAGE, segmented recurrent attention, joint heads),
decoding to simulator decisions, and checkpoints.

    from compiler_opt.policy import GoPolicy, PolicyConfig, policy_inputs, DecisionDecoder
"""

from __future__ import annotations

from compiler_opt.policy.checkpoint import (
    DEFAULT_CHECKPOINT,
    CheckpointError,
    load_checkpoint,
    save_checkpoint,
)
from compiler_opt.policy.config import PolicyConfig, PolicyConfigError
from compiler_opt.policy.decode import ArrayFusionGroups, DecisionDecoder
from compiler_opt.policy.features import PolicyInputs, allowed_devices, device_features, policy_inputs
from compiler_opt.policy.network import Encoded, GoPolicy, Sampled

__all__ = [
    "DEFAULT_CHECKPOINT",
    "ArrayFusionGroups",
    "CheckpointError",
    "DecisionDecoder",
    "Encoded",
    "GoPolicy",
    "PolicyConfig",
    "PolicyConfigError",
    "PolicyInputs",
    "Sampled",
    "allowed_devices",
    "device_features",
    "load_checkpoint",
    "policy_inputs",
    "save_checkpoint",
]
