"""Predictions of a trained model for arbitrary kernels and configurations (no measurement).

    predictor = TilePredictor.load("model.pt")          # or TilePredictor.packaged()
    seconds = predictor.predict_seconds(space, configs)  # one number per configuration

`FusionPredictor` does the same for fusion configurations of a graph (a layout-form model);
`AdditiveFusionPredictor` with the additive model (`fusion_additive`, a JSON file), which computes
the roofline simulator's step time of every candidate itself. `load_fusion_ranker(path)` picks
by the file (`.json`: additive, else a GraphSAGE checkpoint); None: the packaged additive model
(`fusion_additive.json`, the fusion autotuner's default since the ninth session; since the
seventeenth session it reads `xla_ynn_reduce_fusions`, so `AdditiveFusionPredictor` compiles every
HLO candidate's calls once to count them).
"""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from cost_model.learned.model import CostModel
from cost_model.learned.train import load_model

__all__ = ["FUSION_RANKERS", "PACKAGED_FUSION_ADDITIVE", "PACKAGED_FUSION_MODEL", "PACKAGED_MODEL", "TILE_RANKERS", "AdditiveFusionPredictor",
           "FusionPredictor", "TilePredictor", "load_fusion_ranker", "load_tile_ranker", "packaged_type_ranker", "host_mismatch"]

logger = logging.getLogger(__name__)

PACKAGED_MODEL = Path(__file__).with_name("tile_model.pt")
PACKAGED_FUSION_MODEL = Path(__file__).with_name("fusion_model.pt")
PACKAGED_FUSION_ADDITIVE = Path(__file__).with_name("fusion_additive.json")
FUSION_RANKERS = ("additive", "gnn")  # AdditiveFusionPredictor (default), FusionPredictor
TILE_RANKERS = ("gnn", "gbdt", "gbdt-ens")  # GraphSAGE (TilePredictor), XGBoost rank on flat features (GbdtTilePredictor), an ensemble of those (GbdtEnsembleTilePredictor)


def _edge_index(edges: np.ndarray) -> torch.Tensor:
    """(E, 2) producer->consumer pairs as the (2, E) consumer-first index the model reads."""
    return torch.from_numpy(edges[:, ::-1].T.copy()).long() if edges.size else torch.zeros((2, 0), dtype=torch.long)


class _Predictor:
    """`load` and `packaged` for both predictors; a subclass names its packaged file."""

    packaged_path: Path
    missing_hint: str

    def __init__(self, model: CostModel, extra: dict[str, Any] | None = None) -> None:
        self.model = model
        self.extra = extra or {}

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Any:
        model, extra = load_model(path)
        return cls(model, extra)

    @classmethod
    def packaged(cls) -> Any:
        from graph_ir.errors import CompilerOptError

        if not cls.packaged_path.is_file():
            raise CompilerOptError(f"no {cls.missing_hint}", file=str(cls.packaged_path))
        return cls.load(cls.packaged_path)


class TilePredictor(_Predictor):
    packaged_path = PACKAGED_MODEL
    missing_hint = "tile cost model ships with this installation; pass one (compiler-opt costmodel train)"

    def __init__(self, model: CostModel, extra: dict[str, Any] | None = None) -> None:
        from cost_model.measure.tile.space import CONFIG_FEATURES

        if model.config.layout_form:
            raise ValueError("a layout-form (fusion) model cannot rank tile configurations")
        if model.config.config_features != CONFIG_FEATURES:
            raise ValueError(f"this tile model reads {model.config.config_features} config features, the tile space now makes "
                             f"{CONFIG_FEATURES} (a checkpoint from before a feature change): retrain it with costmodel train")
        super().__init__(model, extra)

    def predict_log(self, space: Any, configs: Sequence[Any]) -> np.ndarray:
        """Predicted log seconds of each configuration of the kernel behind `space` (a TileSpace)."""
        from cost_model.measure.tile.dataset import kernel_graph

        feats, opcodes, edges = kernel_graph(space.kernel)
        config_feat = np.stack([space.features(c) for c in configs])
        edge_index = _edge_index(edges)
        with torch.no_grad():
            out = self.model(torch.from_numpy(feats).float(), torch.from_numpy(opcodes).long(), edge_index, torch.from_numpy(config_feat).float())
        return out.double().numpy()

    def predict_seconds(self, space: Any, configs: Sequence[Any]) -> np.ndarray:
        return np.exp(self.predict_log(space, configs))

    def rank(self, space: Any, configs: Sequence[Any]) -> np.ndarray:
        """The autotuner's ranking (lower = predicted faster): the predicted log seconds."""
        return self.predict_log(space, configs)

    def save(self, path: str | os.PathLike[str], extra: dict[str, Any] | None = None) -> Path:
        from cost_model.learned.train import save_model

        return save_model(self.model, path, extra=self.extra | (extra or {}))

    def finetune(self, space: Any, configs: Sequence[Any], seconds: Sequence[float], *, steps: int = 20, lr: float = 5e-4, loss: str = "listmle") -> float:
        """A few optimizer steps on new measurements of one kernel (the autotuner's online
        update); returns the last loss. The rank loss plus 0.05 x MSE keeps times in seconds."""
        from cost_model.learned.losses import loss_fn
        from cost_model.measure.tile.dataset import kernel_graph

        if len(configs) < 2 or steps <= 0:
            return float("nan")
        feats, opcodes, edges = kernel_graph(space.kernel)
        config_feat = torch.from_numpy(np.stack([space.features(c) for c in configs])).float()
        edge_index = _edge_index(edges)
        runtime = torch.tensor(list(seconds), dtype=torch.float64)
        objective = loss_fn(loss, mse_weight=0.05)
        optimizer = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.model.train()
        value = float("nan")
        for _ in range(steps):
            optimizer.zero_grad()
            out = objective(self.model(torch.from_numpy(feats).float(), torch.from_numpy(opcodes).long(), edge_index, config_feat).double(), runtime)
            out.backward()
            optimizer.step()
            value = float(out.detach())
        self.model.eval()
        return value


class FusionPredictor(_Predictor):
    """A layout-form (fusion) model's predictions for fusion configurations of a graph.

        predictor = FusionPredictor.load("fusion_model.pt")   # or FusionPredictor.packaged()
        log_seconds = predictor.predict_log(nodes, [decisions.fusion_group, ...])
    """

    packaged_path = PACKAGED_FUSION_MODEL
    missing_hint = "fusion cost model ships with this installation; pass one (compiler-opt costmodel train on a fusion dataset)"

    def __init__(self, model: CostModel, extra: dict[str, Any] | None = None) -> None:
        if not model.config.layout_form:
            raise ValueError("a tile-form model cannot rank fusion configurations (train one on a fusion dataset)")
        super().__init__(model, extra)

    def predict_log(self, nodes: Sequence[Any], groups: Sequence[np.ndarray], *, batch: int = 64) -> np.ndarray:
        """Predicted log seconds of the whole graph under each grouping (`groups[c][i]`: node i's
        group in configuration c, -1 alone), in batches of `batch` configurations."""
        from cost_model.learned.fusion_features import fusion_config_features, fusion_graph_arrays

        feats, opcodes, edges = fusion_graph_arrays(nodes)
        edge_index = _edge_index(edges)
        ids = torch.arange(len(nodes))
        graph_feat = offset = None
        if self.model.config.residual:  # the residual form reads the roofline simulator's step time of every candidate
            from cost_model.learned.data import residual_inputs
            from cost_model.learned.fusion_terms import graph_terms

            graph_feat, offset = residual_inputs(graph_terms(nodes, groups))
        out = []
        with torch.no_grad():
            for start in range(0, len(groups), batch):
                config = np.stack([fusion_config_features(nodes, g) for g in groups[start : start + batch]])
                rows = slice(start, start + batch)
                out.append(self.model(torch.from_numpy(feats).float(), torch.from_numpy(opcodes).long(), edge_index,
                                      torch.from_numpy(config).float(), ids, None if graph_feat is None else graph_feat[rows],
                                      None if offset is None else offset[rows]).double().numpy())
        return np.concatenate(out) if out else np.zeros(0)


class AdditiveFusionPredictor:
    """The additive fusion model's predictions for candidate groupings of a graph. It needs the
    roofline simulator's step time of every candidate: computed here on the graph the nodes
    belong to (`fusion_terms.graph_terms`), as the collector computed `meta["roofline_s"]`.
    A model that weighs the measured conv terms (`fusion_terms.MEASURED_CONV_TERMS`) has the
    graph's convs timed alone once per graph (`conv_timer`, a `conv_timing.ConvTimer`; made on
    first use, cached in the measurement cache the tuner hands over with `use_measurement_cache`)."""

    def __init__(self, model: Any, *, conv_timer: Any = None) -> None:
        self.model = model
        self.extra = model.extra
        self.conv_timer = conv_timer
        self.xla_cost: dict[str, Any] = {}  # the last prediction's cost of the XLA call terms (a model that reads them)

    @property
    def measures_convs(self) -> bool:
        """Whether a prediction needs the graph's convs timed (a measured conv term has weight)."""
        from cost_model.learned.fusion_terms import MEASURED_CONV_TERMS

        weights = self.model.weights if self.model.weights is not None else ()
        return any(term in MEASURED_CONV_TERMS and weight != 0 for term, weight in zip(self.model.terms, weights))

    def use_measurement_cache(self, cache: Any) -> None:
        """Time convs into `cache` (a `ProfileCache`; the autotuner's) when the model needs them
        (a timer of another cache is replaced: the tuner's cache of this call is the one open)."""
        if self.measures_convs and (self.conv_timer is None or self.conv_timer.harness.cache is not cache):
            from cost_model.measure.conv_timing import ConvTimer

            self.conv_timer = ConvTimer(cache)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> AdditiveFusionPredictor:
        from cost_model.learned.fusion_additive import AdditiveFusionModel

        return cls(AdditiveFusionModel.load(path))

    @classmethod
    def packaged(cls) -> AdditiveFusionPredictor:
        from graph_ir.errors import CompilerOptError

        if not PACKAGED_FUSION_ADDITIVE.is_file():
            raise CompilerOptError("no additive fusion model ships with this installation; pass one (compiler-opt costmodel train "
                                   "--model additive on a fusion dataset)", file=str(PACKAGED_FUSION_ADDITIVE))
        return cls.load(PACKAGED_FUSION_ADDITIVE)

    def predict_log(self, nodes: Sequence[Any], groups: Sequence[np.ndarray], *, graph: Any = None) -> np.ndarray:
        """Predicted log seconds of the whole graph under each grouping (`groups[c][i]`: node i's
        group in configuration c, -1 alone); `nodes` in `node_order` of their graph."""
        from cost_model.learned.fusion_terms import graph_terms

        if not len(groups):
            return np.zeros(0)
        if self.measures_convs and self.conv_timer is None:
            self.use_measurement_cache(None)  # no cache handed over: timed in this process only
        timer = self.conv_timer if self.measures_convs else None
        terms = graph_terms(nodes, groups, graph=graph, conv_timer=timer)
        if getattr(self.model, "uses_xla_terms", False):  # seventeenth session: what XLA makes of each call, every candidate compiled
            terms = np.concatenate([terms, self._xla_terms(nodes, groups, graph)], axis=1)
        return np.log(self.model.predict_terms(terms))

    def _xla_terms(self, nodes: Sequence[Any], groups: Sequence[np.ndarray], graph: Any) -> np.ndarray:
        from cost_model.learned.fusion_xla_terms import XLA_TERM_NAMES, graph_xla_terms

        if any(node.domain != "hlo" for node in nodes):  # onnxruntime runs ONNX groups: there is no XLA module to read
            logger.warning("the fusion model reads XLA call terms, which an ONNX graph does not have: they count 0 (ranked by the other terms)")
            self.xla_cost = {}
            return np.zeros((len(groups), len(XLA_TERM_NAMES)))
        rows, self.xla_cost = graph_xla_terms(graph if graph is not None else nodes[0].graph, nodes, groups)
        logger.info("XLA call terms of %d candidates: %d distinct calls compiled in %.1f s (%.3f s per candidate)", len(groups),
                    self.xla_cost["calls_compiled"], self.xla_cost["compile_s"], self.xla_cost["seconds_per_candidate"])
        return rows


def load_fusion_ranker(path: str | os.PathLike[str] | None = None, ranker: str | None = None) -> Any:
    """The fusion autotuner's ranker: a file (`.json`: the additive model, else a GraphSAGE
    checkpoint), or the packaged one of `ranker` (`additive`, the default, or `gnn`)."""
    if path:
        if ranker not in (None, "additive" if str(path).endswith(".json") else "gnn"):
            raise ValueError(f"{path} is not a {ranker} fusion model (.json: additive, .pt: gnn)")
        return AdditiveFusionPredictor.load(path) if str(path).endswith(".json") else FusionPredictor.load(path)
    if ranker in (None, "additive"):
        return AdditiveFusionPredictor.packaged()
    if ranker == "gnn":
        return FusionPredictor.packaged()
    raise ValueError(f"unknown fusion ranker {ranker!r} (one of {', '.join(FUSION_RANKERS)})")


# The tile autotuner's default ranker (fourteenth session): on the 346-kernel `tile_s13` dataset,
# held-out programs (3 split seeds), gbdt-ens top-1 57.9% / top-5 8.2% / tau 0.514 against the
# GraphSAGE file's 293% / 36.6% / 0.198 (seed 0; RESULTS.md (i), fourteenth session, tiles).
# Since the sixteenth session the packaged gbdt-ens file reads the compiled-code features
# (tile_code_features; it compiles every candidate, ~0.13 s each): on the 289 kernels whose code
# was compiled, held out 21.7% / 3.6% / 0.630 against 67.3% / 10.2% / 0.500 without them.
DEFAULT_TILE_RANKER = "gbdt-ens"
_TILE_RANKER_SUFFIX = {".pt": "gnn", ".ubj": "gbdt", ".json": "gbdt-ens"}


def tile_ranker_for(path: str | os.PathLike[str] | None = None, ranker: str | None = None) -> str:
    """The tile ranker to use: `ranker` when given, else the one a model file's suffix names
    (.pt gnn, .ubj gbdt, .json gbdt-ens), else `DEFAULT_TILE_RANKER`."""
    if ranker:
        return ranker
    if path:
        suffix = Path(path).suffix.lower()
        if suffix not in _TILE_RANKER_SUFFIX:
            raise ValueError(f"{path}: cannot tell the tile ranker from the suffix {suffix!r} (.pt gnn, .ubj gbdt, .json gbdt-ens); name it with --ranker")
        return _TILE_RANKER_SUFFIX[suffix]
    return DEFAULT_TILE_RANKER


def host_mismatch(ranker: Any) -> str | None:
    """Why `ranker` may rank poorly here: it was fitted on kernels compiled and timed on other CPUs (its
    extra's `hosts`, written by `costmodel train` since the twenty-third session). None when it names no
    host or names this one. On another host the shipped ranker ranked even its own training kernels at
    tau 0.63 (RESULTS (i), twenty-third session)."""
    from cost_model.measure.tile.runner import host_target_text

    hosts = (getattr(ranker, "extra", None) or {}).get("hosts") or []
    here = host_target_text()
    if not hosts or here in hosts:
        return None
    return (f"the tile ranker was fitted on kernels measured on {', '.join(hosts)}, and this host compiles for {here}: its ranking "
            "may be poor here; collect this host's kernels (costmodel collect --task tile) and train on them, or fine-tune (autotune --finetune)")


@functools.lru_cache(maxsize=None)
def packaged_type_ranker(dtype: str) -> Any:
    """The shipped gbdt-ens ranker fitted on `dtype` kernels of this host's CPU, or None (the tuner then
    ranks such a kernel as its float32 twin); loaded once per process."""
    from cost_model.learned.gbdt_ensemble import GbdtEnsembleTilePredictor

    return GbdtEnsembleTilePredictor.packaged_for_type(dtype)


def load_tile_ranker(ranker: str = "gnn", path: str | os.PathLike[str] | None = None) -> Any:
    """The tile autotuner's ranker: `gnn` (GraphSAGE, a `.pt` checkpoint), `gbdt` (XGBoost rank
    model, a `.ubj` file) or `gbdt-ens` (XGBoost models z-scored per kernel and summed, a `.json`
    file; shipped since the nineteenth session: the rank model alone at depth 10); `path` None: the
    one shipped in the package (gbdt-ens: this CPU's own file where the package has one,
    `gbdt_ensemble.packaged_host_ensemble`, since the twenty-fourth session)."""
    if ranker == "gnn":
        return TilePredictor.load(path) if path else TilePredictor.packaged()
    if ranker == "gbdt":
        from cost_model.learned.gbdt_predictor import GbdtTilePredictor

        return GbdtTilePredictor.load(path) if path else GbdtTilePredictor.packaged()
    if ranker == "gbdt-ens":
        from cost_model.learned.gbdt_ensemble import GbdtEnsembleTilePredictor

        return GbdtEnsembleTilePredictor.load(path) if path else GbdtEnsembleTilePredictor.packaged()
    raise ValueError(f"unknown tile ranker {ranker!r} (one of {', '.join(TILE_RANKERS)})")
