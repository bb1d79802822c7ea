"""Checkpoint saving during training: `latest.pt` every `every_s` seconds and at the end, and
`best.pt` whenever the mean episode reward over the iteration improves. Each carries the policy
config, the training config, the command line and the iteration's statistics."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from compiler_opt.policy.checkpoint import save_checkpoint

if TYPE_CHECKING:
    from compiler_opt.policy.network import GoPolicy

__all__ = ["CheckpointSaver"]

logger = logging.getLogger(__name__)


class CheckpointSaver:
    def __init__(self, out_dir: str | Path, *, every_s: float, train_config: Mapping[str, Any], command: str) -> None:
        self.out_dir = Path(out_dir)
        self.every_s = every_s
        self.train_config = dict(train_config)
        self.command = command
        self.last_save = time.monotonic()
        self.best_score = float("-inf")

    def _save(self, name: str, policy: GoPolicy, extra: Mapping[str, Any]) -> Path:
        path = save_checkpoint(self.out_dir / name, policy, train_config=self.train_config, command=self.command, extra=extra)
        logger.info("saved %s", path)
        return path

    def step(self, policy: GoPolicy, score: float, extra: Mapping[str, Any], *, final: bool = False) -> None:
        if score > self.best_score:
            self.best_score = score
            self._save("best.pt", policy, {**extra, "mean_reward": score})
        if final or time.monotonic() - self.last_save >= self.every_s:
            self._save("latest.pt", policy, extra)
            self.last_save = time.monotonic()
