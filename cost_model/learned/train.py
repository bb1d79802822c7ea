"""Training and evaluation of the cost model; checkpoints; the CLI's `train` and `evaluate`.

One optimizer step per `kernels_per_step` kernels; every kernel contributes a random subset of
`configs_per_step` configurations (all of them when it has fewer) and the loss over them.
Checkpoints are a plain dict of tensors and JSON-able values, loaded with
`torch.load(weights_only=True)`.
"""

from __future__ import annotations

import logging
import os
import pickle
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from cost_model.learned.data import KernelTensors, split_records, to_tensors
from cost_model.learned.losses import loss_fn
from cost_model.learned.metrics import best_seconds_error, kernel_metrics, mean_metrics
from cost_model.learned.model import CostModel, ModelConfig
from cost_model.learned.tpugraphs import DatasetError, KernelRecord, load_dir

__all__ = ["TrainConfig", "evaluate_model", "evaluate_saved", "feature_scale", "fit", "load_model", "predict", "save_model", "tensors_for", "train_and_save"]

logger = logging.getLogger(__name__)


@dataclass
class TrainConfig:
    loss: str = "listmle"
    mse_weight: float = 0.05
    epochs: int = 60
    hidden: int = 64
    layers: int = 3
    pooling: str = "mean+max"
    lr: float = 2e-3
    weight_decay: float = 1e-5
    configs_per_step: int = 16
    kernels_per_step: int = 8
    seed: int = 0
    split: str = "random"
    test_fraction: float = 0.2
    threads: int = 1
    residual: bool = False  # fusion: learn log(runtime / roofline_s), the fusion terms joined before the MLP
    max_seconds: float = 0.0  # > 0: stop after the epoch that passes this much training time (`fit` records `epochs_run` on the model)


def feature_scale(rows: torch.Tensor) -> torch.Tensor:
    """Per-column std for input normalization, floored at 1e-3; 1 for a column constant over `rows`.
    A constant column (the collecting machine's cache sizes, lanes, registers) carries nothing to
    learn from, and with the 1e-3 floor a model trained on one machine read another machine's
    value as thousands of standard deviations out (fifteenth session: the tile model of
    `out/tile_s6`, 8 lanes, scored top-1 293% on `out/tile_s13`'s 16-lane kernels)."""
    if rows.shape[0] < 2:
        return torch.ones(rows.shape[1], dtype=rows.dtype)
    constant = rows.max(0).values == rows.min(0).values
    return torch.where(constant, torch.ones((), dtype=rows.dtype), rows.std(0).clamp_min(1e-3))


def _fit_normalization(model: CostModel, data: Sequence[KernelTensors]) -> None:
    nodes = torch.cat([d.node_feat for d in data])
    configs = torch.cat([d.config_feat.reshape(-1, d.config_feat.shape[-1]) for d in data])
    with torch.no_grad():
        model.node_mean.copy_(nodes.mean(0))
        model.node_std.copy_(feature_scale(nodes))
        model.config_mean.copy_(configs.mean(0))
        model.config_std.copy_(feature_scale(configs))
        model.target_mean.copy_(torch.cat([torch.log(d.runtime) - (d.offset if d.offset is not None else 0.0) for d in data]).mean().float())
        if model.config.graph_features:
            graphs = torch.cat([d.graph_feat for d in data])
            model.graph_mean.copy_(graphs.mean(0))
            # a floor of 0.1: a term nearly constant on the training graphs (a count one program has) must not blow up on another
            model.graph_std.copy_(graphs.std(0).clamp_min(0.1) if graphs.shape[0] > 1 else torch.ones_like(model.graph_std))


def _forward(model: CostModel, d: KernelTensors, index: torch.Tensor | None = None) -> torch.Tensor:
    def rows(t: torch.Tensor | None) -> torch.Tensor | None:
        return t if t is None or index is None else t[index]

    return model(d.node_feat, d.node_opcode, d.edge_index, d.configs(index), d.node_config_ids, rows(d.graph_feat), rows(d.offset))


def tensors_for(model: CostModel, record: KernelRecord) -> KernelTensors:
    """`to_tensors` with the inputs `model` reads (the residual form's fusion terms)."""
    return to_tensors(record, residual=model.config.residual)


def model_config_for(records: Sequence[KernelRecord], config: TrainConfig) -> ModelConfig:
    first = records[0]
    layout = first.layout_form
    if any(r.layout_form != layout for r in records):
        raise DatasetError("a dataset mixes tile-form and layout-form files")
    width = first.node_config_feat.shape[-1] if layout else first.config_feat.shape[-1]
    if config.residual and not layout:
        raise DatasetError("the residual form (log runtime / roofline_s) needs fusion (layout-form) files")
    from cost_model.learned.fusion_terms import SHIPPED_TERMS

    return ModelConfig(first.node_feat.shape[1], int(width), layout, config.hidden, config.layers, config.pooling,
                       graph_features=len(SHIPPED_TERMS) if config.residual else 0, residual=config.residual)


def fit(records: Sequence[KernelRecord], config: TrainConfig, *, log_every: int = 10) -> CostModel:
    """Train a fresh model on `records`."""
    torch.manual_seed(config.seed)
    torch.set_num_threads(max(1, config.threads))
    model = CostModel(model_config_for(records, config))
    data = [to_tensors(r, residual=config.residual) for r in records]
    _fit_normalization(model, data)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(1, config.epochs))
    loss_of = loss_fn(config.loss, config.mse_weight)
    rng = np.random.default_rng(config.seed)
    began = time.monotonic()
    model.epochs_run = 0
    for epoch in range(config.epochs):
        model.train()
        total, steps = 0.0, 0
        order = rng.permutation(len(data)).tolist()
        for start in range(0, len(order), config.kernels_per_step):
            optimizer.zero_grad()
            losses = []
            for i in order[start : start + config.kernels_per_step]:
                d = data[i]
                count = d.runtime.shape[0]
                index = torch.from_numpy(rng.choice(count, size=min(count, config.configs_per_step), replace=False))
                losses.append(loss_of(_forward(model, d, index).double(), d.runtime[index]))
            loss = torch.stack(losses).mean()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            optimizer.step()
            total += float(loss.detach())
            steps += 1
        scheduler.step()
        if log_every and (epoch % log_every == 0 or epoch == config.epochs - 1):
            logger.info("epoch %d: loss %.4f", epoch, total / max(steps, 1))
        model.epochs_run = epoch + 1
        if config.max_seconds > 0 and time.monotonic() - began > config.max_seconds and epoch + 1 < config.epochs:
            logger.warning("stopped after %d of %d epochs (max_seconds %.0f)", epoch + 1, config.epochs, config.max_seconds)
            break
    model.eval()
    return model


def predict(model: CostModel, d: KernelTensors) -> np.ndarray:
    """Predicted log runtimes (seconds) of every configuration of `d`."""
    with torch.no_grad():
        return _forward(model, d).double().numpy()


def evaluate_model(model: CostModel, records: Sequence[KernelRecord]) -> dict[str, float]:
    rows = []
    for record in records:
        d = tensors_for(model, record)
        pred, runtime = predict(model, d), d.runtime.numpy()
        rows.append(kernel_metrics(pred, runtime) | {"best_seconds_error": best_seconds_error(pred, runtime)})
    return mean_metrics(rows)


def save_model(model: CostModel, path: str | os.PathLike[str], extra: dict[str, Any] | None = None) -> Path:
    from graph_ir.io.atomic import atomic_path

    state = {"format": "compiler-opt-costmodel/1", "config": model.config.to_dict(), "state_dict": model.state_dict(), "extra": extra or {}}
    target = Path(path)
    with atomic_path(target) as tmp:
        torch.save(state, tmp)
    return target


def load_model(path: str | os.PathLike[str]) -> tuple[CostModel, dict[str, Any]]:
    try:
        state = torch.load(os.fspath(path), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:  # torch's own text is a page suggesting weights_only=False: never here
        raise DatasetError("not a cost model checkpoint: not a torch file of tensors and plain values (read with weights_only=True)",
                           file=os.fspath(path)) from error
    except Exception as error:  # noqa: BLE001 - torch raises many types for a bad file
        raise DatasetError(f"not a cost model checkpoint: {error}", file=os.fspath(path)) from error
    if not isinstance(state, dict) or state.get("format") != "compiler-opt-costmodel/1":
        raise DatasetError("not a compiler-opt cost model checkpoint (format field)", file=os.fspath(path))
    try:
        model = CostModel(ModelConfig(**state["config"]))
        model.load_state_dict(state["state_dict"])
    except (KeyError, TypeError, RuntimeError) as error:  # a config or weights this network does not have
        raise DatasetError(f"the checkpoint does not match the cost model network: {error}", file=os.fspath(path)) from error
    model.eval()
    return model, dict(state.get("extra", {}))


def train_and_save(data_dir: str, output: str, config: TrainConfig, *, extra: Sequence[str] = ()) -> dict[str, Any]:
    """`costmodel train --model gnn`: fit on a split's training kernels plus every kernel of the
    `extra` folders (which never test), score both sides of the split, save the checkpoint."""
    records = load_dir(data_dir)
    train_idx, test_idx = split_records(records, config.split, test_fraction=config.test_fraction, seed=config.seed)
    added = [record for folder in extra for record in load_dir(folder)]
    model = fit([records[i] for i in train_idx] + added, config)
    metrics = {"train": evaluate_model(model, [records[i] for i in train_idx]), "test": evaluate_model(model, [records[i] for i in test_idx])}
    report = {"metrics": metrics, "train_config": asdict(config), "kernels": len(records),
              "train_kernels": len(train_idx) + len(added), "test_kernels": len(test_idx), "data": os.path.basename(os.path.normpath(data_dir))}
    if extra:
        report |= {"extra_kernels": len(added), "extra_data": [os.path.basename(os.path.normpath(folder)) for folder in extra]}
    save_model(model, output, extra=report)
    return report


def evaluate_saved(model_path: str, data_dir: str, *, split: str = "random", seed: int = 0, test_fraction: float = 0.2,
                   code_features: str | None = None) -> dict[str, Any]:
    """Metrics of a saved model on a split's test kernels: a `.pt` checkpoint, a `.json` additive
    fusion model, or a tile ranker (`.ubj` gbdt, `.json` gbdt-ens: top-1 / top-5 slowdown and Kendall
    tau; a ranker that reads compiled-code features needs `code_features`, the data's cache)."""
    kind = _saved_model_kind(model_path)
    if code_features and kind not in ("gbdt", "gbdt-ens"):
        raise DatasetError("--code-features applies only to tile rankers that read compiled-code features (.ubj / gbdt-ens .json)", file=model_path)
    records = load_dir(data_dir)
    if split == "all":
        chosen = records
    else:
        _, test_idx = split_records(records, split, test_fraction=test_fraction, seed=seed)
        chosen = [records[i] for i in test_idx]
    extra: dict[str, Any] = {}
    if kind == "additive":
        from cost_model.learned.fusion_additive import AdditiveFusionModel

        additive = AdditiveFusionModel.load(model_path)
        metrics = mean_metrics(kernel_metrics(additive.predict(r), r.config_runtime) for r in chosen)
    elif kind in ("gbdt", "gbdt-ens"):
        from cost_model.learned.gbdt_predictor import ranker_metrics

        ranker, chosen, extra = _ranker_and_records(model_path, kind, chosen, code_features, data_dir)
        metrics = ranker_metrics(ranker, chosen)
    else:
        model, _ = load_model(model_path)
        metrics = evaluate_model(model, chosen)
    return {"split": split, "kernels": len(chosen), "metrics": metrics} | extra


def _saved_model_kind(model_path: str) -> str:
    """gnn (.pt), gbdt (.ubj), or for .json what its `format` field says: additive or gbdt-ens."""
    name = str(model_path)
    if name.endswith(".ubj"):
        return "gbdt"
    if not name.endswith(".json"):
        return "gnn"
    import json

    from cost_model.learned.fusion_additive import FORMAT as ADDITIVE_FORMAT
    from cost_model.learned.gbdt_ensemble import ENSEMBLE_FORMAT

    try:
        doc = json.loads(Path(name).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DatasetError(f"cannot read the model: {error}", file=name) from error
    found = doc.get("format") if isinstance(doc, dict) else None
    if found == ENSEMBLE_FORMAT:
        return "gbdt-ens"
    if found == ADDITIVE_FORMAT:
        return "additive"
    raise DatasetError(f"a .json model must be an additive fusion model ({ADDITIVE_FORMAT}) or a GBDT ensemble tile ranker "
                       f"({ENSEMBLE_FORMAT}); its format field is {found!r}", file=name)


def _ranker_and_records(model_path: str, kind: str, chosen: list[KernelRecord], code_features: str | None,
                        data_dir: str) -> tuple[Any, list[KernelRecord], dict[str, Any]]:
    """The tile ranker and the chosen kernels as it reads them (with the compiled-code block where it
    reads one; kernels the cache lacks are left out and counted)."""
    from cost_model.learned.predictor import load_tile_ranker

    ranker = load_tile_ranker(kind, model_path)
    if any(r.config_feat is None for r in chosen):
        raise DatasetError("a tile ranker needs a tile dataset (config_feat); this looks like a fusion dataset", file=data_dir)
    info: dict[str, Any] = {"model_kind": kind}
    if not ranker.extra.get("code_features"):
        if code_features:
            raise DatasetError("this ranker reads no compiled-code features; drop --code-features", file=model_path)
        return ranker, chosen, info
    if not code_features:
        raise DatasetError("this ranker reads the compiled-code features of each configuration: pass --code-features CACHE, the data's "
                           "cache (benchmarks/bench_tile_code_features.py)", file=model_path)
    from cost_model.learned.tile_code_features import extended_records

    feature_set = ranker.extra.get("code_feature_set", "s16")
    extended = extended_records(chosen, code_features, feature_set)
    kept = [e for e in extended if e is not None]
    if not kept:
        raise DatasetError(f"no chosen kernel has cached code features in {code_features}", file=data_dir)
    return ranker, kept, info | {"code_feature_set": feature_set, "kernels_without_code_features": len(chosen) - len(kept)}
