"""A learned additive fusion cost model: the roofline simulator's step time corrected by what each
executable call costs on this host.

    seconds = sum_j w_j x term_j        (terms: `fusion_terms.TERM_NAMES`, per configuration)

The default terms are `fusion_terms.SHIPPED_TERMS` (all but the sixteenth session's buffer size
terms, `BUFFER_SIZE_TERMS`, and the twenty-first session's `CALL_GROWTH_TERMS`: pass `terms=`, or
`extra_terms` to `train_additive_and_save`, to fit them; RESULTS (i)).

The weights are fitted by least squares on the relative error (every row divided by its label,
target 1: the fit minimises sum (pred / runtime - 1)^2, what MAPE measures) on column-scaled
terms, non-negative by default (scipy's NNLS: every call, buffer and byte costs time, so a
candidate unlike the training ones cannot look faster by having more of something; unconstrained
least squares with a small ridge, `nonnegative=False`, scores the same on the eighth session's
labels but gives the collinear roofline and kernel terms opposite signs). `signed_terms` (twelfth
session, part 2) frees the sign of a few named terms inside the non-negative fit: the shipped
form, `CONV_OFFSET`, frees `conv_nodes`, the per-conv correction to the measured conv seconds. A
conv timed alone is a whole executable call (its launch, its arguments, its output buffer), and
the per-call / per-buffer terms already price those in the graph; with the count free the fit
takes 0.84-0.88 x a conv's seconds alone less 9.5-10.3 us per conv (about what the other weights price a
lone call at), where with every weight >= 0 it could only scale the seconds down (~0.5 x) and
missed the graphs whose convs are long (RESULTS (i), twelfth session, part 2). The count is the
same for every configuration of a graph, so it moves a graph's level, never its ranking. `loss="l1"` fits the
mean absolute relative error (MAPE itself) by iteratively reweighted least squares instead. Why additive and not a tree or a GNN on log runtime: a configuration's time
on this host is a sum over its executable calls and ops (fitted on the eighth session's labels:
6-9 us per call, 9-12 us per output buffer a call returns, 1-3 / 7-8 / 16-27 us per reduce /
matmul / conv node, bytes written between calls at 3-11 GB/s), and a sum extrapolates to
held-out programs with other kernel counts where trees on log runtime learn per-program levels
(RESULTS.md (i), ninth session). `log_roofline_residual`
gives the same prediction as the residual log(pred / roofline_s) the residual models learn.

Saved as JSON (`save` / `load`: weights by term name, the term scales, the training report).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from cost_model.learned.fusion_terms import SHIPPED_TERMS, TERM_NAMES, record_terms, residual_target
from cost_model.learned.fusion_xla_terms import XLA_TERM_NAMES
from cost_model.learned.tpugraphs import DatasetError, KernelRecord

__all__ = ["ALL_TERM_NAMES", "CONV_OFFSET", "FORMAT", "MIN_FRACTION", "AdditiveFusionModel", "TiedTerm", "train_additive_and_save"]

logger = logging.getLogger(__name__)

FORMAT = "compiler-opt-fusion-additive/1"
# A prediction is never below this fraction of the roofline step time: a candidate unlike the
# training configurations must not rank first on a negative or near-zero extrapolation.
MIN_FRACTION = 0.1
# The shipped form's terms of either sign (`signed_terms`): the per-conv offset of the measured conv seconds.
CONV_OFFSET = ("conv_nodes",)
# (a, b, r): w_b = r x w_a, r >= 0 (`tied_terms`)
TiedTerm = tuple[str, str, float]
# The columns `predict_terms` reads: `TERM_NAMES` (what `record_terms` / `graph_terms` give), then the
# seventeenth session's XLA call counts (`fusion_xla_terms.XLA_TERM_NAMES`, an optional term set: a
# model that uses none of them reads `TERM_NAMES`-wide rows as before).
ALL_TERM_NAMES = TERM_NAMES + XLA_TERM_NAMES
_L1_ITERATIONS = 20  # reweighting rounds of the l1 fit (converged well before on the fusion datasets)


class AdditiveFusionModel:
    """Seconds of a fusion configuration as a weighted sum of its `fusion_terms`."""

    def __init__(self, *, nonnegative: bool = True, ridge: float = 1e-4, terms: Sequence[str] = SHIPPED_TERMS, loss: str = "l2",
                 signed_terms: Sequence[str] = (), tied_terms: Sequence[TiedTerm] = ()) -> None:
        if loss not in ("l2", "l1"):
            raise ValueError(f"loss must be 'l2' or 'l1', got {loss!r}")
        unknown = set(terms) - set(ALL_TERM_NAMES)
        if unknown or "roofline_s" not in terms:
            raise ValueError(f"terms must be among {ALL_TERM_NAMES} and include roofline_s, got {list(terms)}")
        if set(signed_terms) - set(terms):
            raise ValueError(f"signed_terms must be among the model's terms, got {sorted(set(signed_terms) - set(terms))}")
        self.nonnegative, self.ridge, self.terms, self.loss = nonnegative, ridge, tuple(terms), loss
        self.signed_terms = tuple(t for t in self.terms if t in set(signed_terms))
        self.tied_terms: tuple[TiedTerm, ...] = tuple((str(a), str(b), float(r)) for a, b, r in tied_terms)
        tied = [b for _, b, _ in self.tied_terms]
        for a, b, r in self.tied_terms:
            if a not in self.terms or b not in self.terms or a == b or a in tied or tied.count(b) > 1 or not r >= 0:
                raise ValueError(f"tied_terms: ({a!r}, {b!r}, {r}) must name two different model terms, tie each term once "
                                 f"to an untied one, ratio >= 0")
            if b in self.signed_terms or (a in self.signed_terms and r > 0):
                raise ValueError(f"tied_terms: ({a!r}, {b!r}) may not tie a signed term")
        self.weights: np.ndarray | None = None
        self.extra: dict[str, Any] = {}

    def _columns(self) -> list[int]:
        return [ALL_TERM_NAMES.index(t) for t in self.terms]

    @property
    def uses_xla_terms(self) -> bool:
        """Whether the model reads the XLA call counts (rows must then be `ALL_TERM_NAMES` wide)."""
        return any(t in XLA_TERM_NAMES for t in self.terms)

    def fit(self, records: Sequence[KernelRecord]) -> AdditiveFusionModel:
        if not records:
            raise DatasetError("no fusion records to fit")
        if self.uses_xla_terms:
            raise DatasetError("a model with XLA call terms is fitted with fit_terms on rows that hold them (fusion_xla_terms.record_xla_terms)")
        x = np.concatenate([record_terms(r)[:, self._columns()] for r in records])
        y = np.concatenate([np.asarray(r.config_runtime, dtype=np.float64) for r in records])
        return self.fit_terms(x, y)

    def _tie_matrix(self) -> np.ndarray:
        """(len(terms), free weights): weights = tie @ free; a tied term's row is r x its anchor's."""
        tied = {b: (a, r) for a, b, r in self.tied_terms}
        free = [t for t in self.terms if t not in tied]
        tie = np.zeros((len(self.terms), len(free)))
        for i, t in enumerate(self.terms):
            anchor, ratio = tied.get(t, (t, 1.0))
            tie[i, free.index(anchor)] = ratio
        return tie

    def fit_terms(self, terms: np.ndarray, runtime: np.ndarray) -> AdditiveFusionModel:
        """Fit on a (rows, len(self.terms)) matrix of terms and their runtimes (seconds)."""
        tie = self._tie_matrix()
        a = (np.asarray(terms, dtype=np.float64) @ tie) / np.asarray(runtime, dtype=np.float64)[:, None]
        scale = np.sqrt((a**2).mean(axis=0))
        scale[scale == 0] = 1.0  # a term that is zero everywhere gets weight 0
        scaled = a / scale
        row_weight = np.ones(len(a))
        # loss "l1": the mean |pred / runtime - 1| itself (MAPE), by iteratively reweighted least squares
        for _ in range(_L1_ITERATIONS if self.loss == "l1" else 1):
            weights = self._solve(scaled * row_weight[:, None], row_weight)
            row_weight = 1.0 / np.sqrt(np.maximum(np.abs(scaled @ weights - 1.0), 1e-3))
        self.weights = tie @ (weights / scale)
        logger.info("additive fusion model: %s", dict(zip(self.terms, self.weights.round(9).tolist())))
        return self

    def _solve(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if self.nonnegative and self.signed_terms:
            from scipy.optimize import lsq_linear

            tied = {b for _, b, _ in self.tied_terms}
            lower = np.array([-np.inf if t in self.signed_terms else 0.0 for t in self.terms if t not in tied])
            return lsq_linear(a, b, bounds=(lower, np.inf), method="bvls").x
        if self.nonnegative:
            from scipy.optimize import nnls

            return nnls(a, b)[0]
        return np.linalg.solve(a.T @ a + self.ridge * len(a) * np.eye(a.shape[1]), a.T @ b)

    def predict_terms(self, terms: np.ndarray) -> np.ndarray:
        """Seconds for rows of all `TERM_NAMES` (`record_terms` / `graph_terms` output), or of all
        `ALL_TERM_NAMES` (those followed by the XLA call counts; needed when the model reads them)."""
        if self.weights is None:
            raise RuntimeError("fit() or load() first")
        terms = np.asarray(terms, dtype=np.float64)
        if terms.shape[1] not in (len(TERM_NAMES), len(ALL_TERM_NAMES)) or (self.uses_xla_terms and terms.shape[1] != len(ALL_TERM_NAMES)):
            raise ValueError(f"rows have {terms.shape[1]} columns; this model reads "
                             f"{len(ALL_TERM_NAMES) if self.uses_xla_terms else len(TERM_NAMES)} (or {len(ALL_TERM_NAMES)})")
        roofline = terms[:, TERM_NAMES.index("roofline_s")]
        return np.maximum(terms[:, self._columns()] @ self.weights, MIN_FRACTION * roofline)

    def predict(self, record: KernelRecord) -> np.ndarray:
        """Predicted log seconds of every configuration of a fusion dataset file."""
        return np.log(self.predict_terms(record_terms(record)))

    def log_roofline_residual(self, record: KernelRecord) -> np.ndarray:
        """The prediction as the residual over the simulator: log(predicted / roofline_s)."""
        terms = record_terms(record)
        return residual_target(self.predict_terms(terms), terms[:, TERM_NAMES.index("roofline_s")])

    def to_dict(self) -> dict[str, Any]:
        if self.weights is None:
            raise RuntimeError("fit() first")
        return {"format": FORMAT, "terms": list(self.terms), "weights": [float(w) for w in self.weights], "nonnegative": self.nonnegative, "ridge": self.ridge, "loss": self.loss,
                "signed_terms": list(self.signed_terms),
                "tied_terms": [list(t) for t in self.tied_terms], "min_fraction": MIN_FRACTION, "extra": self.extra}

    def save(self, path: str | os.PathLike[str], extra: dict[str, Any] | None = None) -> Path:
        from graph_ir.io.atomic import atomic_path

        self.extra |= extra or {}
        target = Path(path)
        with atomic_path(target) as tmp:
            Path(tmp).write_text(json.dumps(self.to_dict(), indent=1), encoding="utf-8")
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> AdditiveFusionModel:
        try:
            state = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise DatasetError(f"not an additive fusion model: {error}", file=os.fspath(path)) from error
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            raise DatasetError(f"not an additive fusion model (format field is not {FORMAT!r})", file=os.fspath(path))
        try:
            model = cls(nonnegative=bool(state["nonnegative"]), ridge=float(state["ridge"]), terms=state["terms"], loss=str(state.get("loss", "l2")),
                        signed_terms=state.get("signed_terms", ()), tied_terms=[tuple(t) for t in state.get("tied_terms", ())])
            weights = np.asarray(state["weights"], dtype=np.float64)
        except (KeyError, TypeError, ValueError) as error:
            raise DatasetError(f"additive fusion model: bad field {error}", file=os.fspath(path)) from error
        if weights.shape != (len(model.terms),):
            raise DatasetError(f"additive fusion model: {weights.size} weights for {len(model.terms)} terms (field weights)", file=os.fspath(path))
        model.weights, model.extra = weights, dict(state.get("extra", {}))
        return model


def train_additive_and_save(data_dir: str, output: str, *, split: str = "random", test_fraction: float = 0.2, seed: int = 0,
                            nonnegative: bool = True, loss: str = "l2", signed_terms: Sequence[str] = CONV_OFFSET,
                            xla_terms: Sequence[str] = (), xla_calls: str | os.PathLike[str] | None = None,
                            extra_terms: Sequence[str] = ()) -> dict[str, Any]:
    """`costmodel train --model additive`: fit on the split's training graphs, score both sides, save.
    `xla_terms` (seventeenth session): `XLA_TERM_NAMES` added to the shipped form, read from the
    `fusion_xla_terms.XlaCallCache` at `xla_calls` (every configuration of the folder collected).
    `extra_terms` (twenty-first session): `TERM_NAMES` outside the shipped form added to it (e.g.
    `kernels_pow1_5`, `CALL_GROWTH_TERMS`)."""
    from cost_model.learned.data import split_records
    from cost_model.learned.metrics import kernel_metrics, mean_metrics
    from cost_model.learned.tpugraphs import load_dir

    outside = [t for t in TERM_NAMES if t not in SHIPPED_TERMS]
    if set(extra_terms) - set(outside) or len(set(extra_terms)) != len(extra_terms):
        raise ValueError(f"extra terms must be among {outside} (the terms outside the shipped form), each once; got {list(extra_terms)}")
    unknown = set(xla_terms) - set(XLA_TERM_NAMES)
    if unknown or (xla_terms and not xla_calls):
        raise ValueError(f"xla_terms must be among {XLA_TERM_NAMES} and need xla_calls (a call cache); got {sorted(unknown) or list(xla_terms)}")
    records = load_dir(data_dir)
    train_idx, test_idx = split_records(records, split, test_fraction=test_fraction, seed=seed)
    rows = [record_terms(r) for r in records]
    if xla_terms:
        from cost_model.learned.fusion_xla_terms import XlaCallCache, record_xla_terms

        with XlaCallCache(xla_calls) as cache:  # type: ignore[arg-type]
            calls = cache.all_calls()
            rows = [np.concatenate([t, record_xla_terms(r, cache, calls)], axis=1) for t, r in zip(rows, records)]
    terms = SHIPPED_TERMS[:-1] + tuple(extra_terms) + tuple(xla_terms) + ("roofline_s",)
    model = AdditiveFusionModel(nonnegative=nonnegative, loss=loss, signed_terms=signed_terms, terms=terms)
    columns = model._columns()
    model.fit_terms(np.concatenate([rows[i][:, columns] for i in train_idx]), np.concatenate([np.asarray(records[i].config_runtime, dtype=np.float64)
                                                                                             for i in train_idx]))

    def scores(indices: list[int]) -> dict[str, float]:
        return mean_metrics(kernel_metrics(np.log(model.predict_terms(rows[i])), records[i].config_runtime) for i in indices)

    report = {"metrics": {"train": scores(train_idx), "test": scores(test_idx)},
              "train_config": {"model": "additive", "split": split, "test_fraction": test_fraction, "seed": seed, "nonnegative": nonnegative, "loss": loss,
                                   "signed_terms": list(model.signed_terms), "xla_terms": list(xla_terms), "extra_terms": list(extra_terms)},
              "kernels": len(records), "train_kernels": len(train_idx), "test_kernels": len(test_idx),
              "data": os.path.basename(os.path.normpath(data_dir))}
    model.save(output, extra=report)
    return report
