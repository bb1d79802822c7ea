"""Training scalars: TensorBoard event files when `torch.utils.tensorboard` imports (it needs the
`tensorboard` package), else a CSV file `scalars.csv` (step, tag, value) in the run folder.
`ScalarLogger.backend` says which one is in use."""

from __future__ import annotations

import csv
import logging
from pathlib import Path
from typing import Any

__all__ = ["ScalarLogger"]

logger = logging.getLogger(__name__)


class ScalarLogger:
    def __init__(self, out_dir: str | Path) -> None:
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._writer: Any = None
        self._csv: Any = None
        try:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(str(self.out_dir / "tensorboard"))
            self.backend = "tensorboard"
        except ImportError:
            self._file = open(self.out_dir / "scalars.csv", "a", newline="")  # noqa: SIM115 - closed in close()
            self._csv = csv.writer(self._file)
            self.backend = "csv"
            logger.info("tensorboard is not installed: scalars go to %s", self.out_dir / "scalars.csv")

    def scalar(self, tag: str, value: float, step: int) -> None:
        if self._writer is not None:
            self._writer.add_scalar(tag, value, step)
        else:
            self._csv.writerow([step, tag, f"{value:.6g}"])
            self._file.flush()  # a few rows per iteration: keep the file readable while training runs

    def flush(self) -> None:
        if self._writer is not None:
            self._writer.flush()
        else:
            self._file.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        else:
            self._file.close()
