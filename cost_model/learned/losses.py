"""Losses over the configurations of one kernel: `pred` (C,) predicted log runtimes, `runtime`
(C,) measured runtimes (seconds, > 0).

- `mse_log`: mean squared error between `pred` and log(runtime) (absolute: the fusion task and
  any consumer that needs times);
- `mse_relative`: the same after subtracting each side's mean over the kernel's configurations,
  i.e. MSE on the per-kernel normalised target log(runtime / geometric mean): the model is not
  asked for a kernel's absolute time, only for how its configurations differ (a ranking ablation);
- `pairwise_hinge` / `pairwise_logistic`: over all pairs (i, j) with runtime_i < runtime_j,
  max(0, margin - (pred_j - pred_i)) and log(1 + exp(-(pred_j - pred_i))), averaged over pairs
  (the rank losses of the TPU cost model paper);
- `listmle`: the negative Plackett-Luce log-likelihood of the true order (fastest first) under
  scores -pred (Xia et al., 2008), divided by C.
"""

from __future__ import annotations

import torch

__all__ = ["LOSSES", "listmle", "loss_fn", "mse_log", "mse_relative", "pairwise_hinge", "pairwise_logistic"]


def mse_log(pred: torch.Tensor, runtime: torch.Tensor) -> torch.Tensor:
    return torch.mean((pred - torch.log(runtime)) ** 2)


def mse_relative(pred: torch.Tensor, runtime: torch.Tensor) -> torch.Tensor:
    target = torch.log(runtime)
    return torch.mean(((pred - pred.mean()) - (target - target.mean())) ** 2)


def _pair_differences(pred: torch.Tensor, runtime: torch.Tensor) -> torch.Tensor:
    # d[i, j] = pred_j - pred_i for the pairs where i is truly faster than j.
    faster = runtime[:, None] < runtime[None, :]
    return (pred[None, :] - pred[:, None])[faster]


def pairwise_hinge(pred: torch.Tensor, runtime: torch.Tensor, margin: float = 0.1) -> torch.Tensor:
    diff = _pair_differences(pred, runtime)
    if diff.numel() == 0:
        return pred.sum() * 0.0
    return torch.clamp(margin - diff, min=0.0).mean()


def pairwise_logistic(pred: torch.Tensor, runtime: torch.Tensor) -> torch.Tensor:
    diff = _pair_differences(pred, runtime)
    if diff.numel() == 0:
        return pred.sum() * 0.0
    return torch.nn.functional.softplus(-diff).mean()


def listmle(pred: torch.Tensor, runtime: torch.Tensor) -> torch.Tensor:
    scores = -pred[torch.argsort(runtime)]  # true order, fastest first; higher score = faster
    # sum_i [ log sum_{k >= i} exp(s_k) - s_i ]
    tail_logsumexp = torch.logcumsumexp(scores.flip(0), dim=0).flip(0)
    return (tail_logsumexp - scores).sum() / pred.numel()


LOSSES = {"mse": mse_log, "mse_rel": mse_relative, "hinge": pairwise_hinge, "logistic": pairwise_logistic, "listmle": listmle}


def loss_fn(name: str, mse_weight: float = 0.0):  # type: ignore[no-untyped-def]
    """The named loss, plus `mse_weight` x mse_log for the rank losses (keeps predictions in seconds)."""
    if name not in LOSSES:
        raise ValueError(f"unknown loss {name!r} (known: {', '.join(LOSSES)})")
    base = LOSSES[name]
    if name == "mse" or mse_weight <= 0:  # mse_rel keeps the absolute term: it anchors predictions in seconds
        return base

    def combined(pred: torch.Tensor, runtime: torch.Tensor) -> torch.Tensor:
        return base(pred, runtime) + mse_weight * mse_log(pred, runtime)

    return combined
