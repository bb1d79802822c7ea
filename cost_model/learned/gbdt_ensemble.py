"""Several XGBoost tile rankers as one (fourteenth session): each member's scores are z-scored
over the candidates of one kernel and summed with weights (`tile_rankers.zscore`), so members
with different objectives (pairwise rank scores, log runtime over the kernel's median) and model
seeds can be added.

    compiler-opt costmodel train out/tile_s13 -o tile_gbdt_ens.json --model gbdt-ens --split program --test-fraction 0.25
    ... --code-features out/tile_s13_code                  # sixteenth session, what ships: + the compiled-code features
    ranker = GbdtEnsembleTilePredictor.train(records)       # MEMBERS: (objective, model-seed offset, rank pairs); DEPTH
    scores = ranker.rank(space, configs)                   # lower = predicted faster

The same interface as `GbdtTilePredictor` (`rank_rows`, `rank`, `finetune`, `save`, `load`,
`packaged`), so `autotune --ranker gbdt-ens` and the `autotune-tiles{ranker=gbdt-ens}` pass use it.
File format: JSON (no pickle) with each member's XGBoost UBJSON model, zlib-compressed, in base64 (`ubj_zlib`;
files before the nineteenth session: `ubj`, uncompressed, still load) and its
`GbdtTilePredictor` metadata; written atomically. Forty-second session: a member fitted on top of a warm start holds
only its own trees and names its start (`start`: a place in `starts`), whose margin its trees add to; a start is stored
once however many members continue it, as trees or as a reference to the file it was read from
(`{"file", "member", "sha256"}`: `save(link_starts=True)`, `costmodel train --link-warm-start`, `costmodel link-start`).
Files without `starts` load as before.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import zlib
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from cost_model.learned.baselines import RANK_FAMILY, GbdtBaseline, can_continue, flat_features, flat_rows
from cost_model.learned.gbdt_predictor import GbdtTilePredictor, baseline_from_meta, baseline_meta, code_feature_set_read, fit_and_save_tile_ranker, ranked_last_if_uncompiled
from cost_model.learned.tile_cascade import FOLDS, TOP, TopReranker, cross_fitted_scores
from cost_model.learned.tile_rankers import zscore
from cost_model.learned.tpugraphs import DatasetError, KernelRecord

__all__ = ["DEPTH", "ENSEMBLE_FORMAT", "MEMBER_KIND_WEIGHTS", "MEMBER_OBJECTIVES", "MEMBER_WEIGHTS", "MEMBERS", "MEMBERS_S14", "MEMBERS_S19", "PACKAGED_GBDT_ENSEMBLE", "GbdtEnsembleTilePredictor", "packaged_host_ensemble", "packaged_type_ensemble", "check_depth", "check_kind_weights", "default_kind_weights", "default_weights", "link_start", "member_weights", "members_mismatch", "parse_kind_weights", "parse_members", "train_gbdt_ensemble_and_save"]

ENSEMBLE_FORMAT = "compiler-opt-gbdt-tile-ensemble/1"
PACKAGED_GBDT_ENSEMBLE = Path(__file__).with_name("tile_gbdt_ens.json")

# (GbdtBaseline objective, model seed offset, rank pairs per configuration or None). Fourteenth to
# eighteenth session: the pairwise rank model over all pairs of a kernel's 50 configurations + the
# regression of log runtime over the kernel's median, depth 6 (`MEMBERS_S14`). Nineteenth session,
# with 926 training kernels: the rank model alone at depth 10 (pre-registered test, RESULTS (i)).
# Forty-first session, by a pre-registered test (RESULTS (i)): + a LambdaMART member (`ndcg`, the top of each kernel's
# list weighted most) at half the rank member's weight: top-1 7.50% -> 6.75% held out, tau 0.807 -> 0.800.
MEMBERS: tuple[tuple[str, int, int | None], ...] = (("rank", 0, 50), ("ndcg", 0, 50))
MEMBER_WEIGHTS: tuple[float, ...] = (1.0, 0.5)
MEMBER_KIND_WEIGHTS: dict[str, tuple[float, ...]] = {}  # kernel kind -> the members' weights for it, where not MEMBER_WEIGHTS
MEMBERS_S19: tuple[tuple[str, int, int | None], ...] = (("rank", 0, 50),)  # nineteenth to fortieth session (`--gbdt-members rank`)
DEPTH = 10
MEMBERS_S14: tuple[tuple[str, int, int | None], ...] = (("rank", 0, 50), ("relative", 0, None))  # with depth 6
MEMBER_OBJECTIVES = ("rank", "ndcg", "relative")


def packaged_host_ensemble(cpu: str) -> Path:
    """Where the package keeps the ranker fitted on kernels of the CPU LLVM names `cpu` (twenty-fourth
    session: a tile ranker is its host's; RESULTS (i)). `packaged()` prefers it to the default file."""
    return PACKAGED_GBDT_ENSEMBLE.with_name(f"tile_gbdt_ens.{cpu}.json")


def _this_cpu() -> str:
    """The CPU LLVM names this host (what the shipped rankers are keyed by)."""
    from tvm.target import codegen

    return codegen.llvm_get_system_cpu()


def packaged_type_ensemble(cpu: str, dtype: str) -> Path:
    """Where the package keeps a ranker fitted on `dtype` kernels (bf16, f16, ...) of the CPU LLVM names
    `cpu` (thirty-first session); the tuner ranks such kernels' own code with it where it exists."""
    return PACKAGED_GBDT_ENSEMBLE.with_name(f"tile_gbdt_ens.{cpu}.{dtype}.json")


class GbdtEnsembleTilePredictor:
    """Ranks tile configurations of a kernel with several fitted `GbdtTilePredictor`s."""

    def __init__(self, members: Sequence[GbdtTilePredictor], weights: Sequence[float] | None = None, extra: dict[str, Any] | None = None,
                 reranker: TopReranker | None = None, kind_weights: dict[str, Sequence[float]] | None = None) -> None:
        if not members:
            raise ValueError("an ensemble needs at least one member")
        weights = [1.0] * len(members) if weights is None else [float(w) for w in weights]
        if len(weights) != len(members):
            raise ValueError(f"{len(members)} members but {len(weights)} weights")
        self.members, self.weights = list(members), weights
        # forty-first session: the weights for kernels of a kind, where they differ from `weights` (`check_kind_weights`)
        self.kind_weights = check_kind_weights(kind_weights or {}, len(members))
        self.extra = dict(extra or {})
        self.reranker = reranker  # twenty-sixth session: a second look at the members' top candidates (tile_cascade), or None

    @classmethod
    def train(cls, records: Sequence[KernelRecord], *, members: Sequence[tuple[str, int, int | None]] = MEMBERS, seed: int = 0, rounds: int = 400,
              depth: int = DEPTH, threads: int = 1, extra: dict[str, Any] | None = None, code_features: bool = False,
              code_feature_set: str = "s16", init: GbdtEnsembleTilePredictor | None = None,
              weights: Sequence[float] | None = None, kind_weights: dict[str, Sequence[float]] | None = None) -> GbdtEnsembleTilePredictor:
        """`code_features`: the records' config features end with the compiled-code block of
        `code_feature_set` (`tile_code_features.with_code_features`), and `rank` compiles each candidate to compute it.
        `init`: a fitted ensemble whose trees each member's boosting continues from (twenty-fourth session: a host's
        ranker boosted on top of another CPU's, RESULTS (i)): the member at the same place, or its only member
        (`members_mismatch`). `weights`: each member's weight in the z-scored sum (None: `default_weights`);
        `kind_weights`: other weights for kernels of some kinds (None: `default_kind_weights`)."""
        flag = ({"code_features": True} | ({"code_feature_set": code_feature_set} if code_feature_set != "s16" else {})) if code_features else {}
        mismatch = None if init is None else members_mismatch(init, members)
        if mismatch:
            raise ValueError(mismatch)
        kind_weights = default_kind_weights(members) if kind_weights is None else kind_weights
        fitted = [GbdtTilePredictor.train(records, seed=seed + offset, rounds=rounds, depth=depth, threads=threads, objective=objective, rank_pairs=pairs,
                                          extra=flag, init=None if init is None else init.members[min(i, len(init.members) - 1)])
                  for i, (objective, offset, pairs) in enumerate(members)]
        info = {"seed": seed, "rounds": rounds, "depth": depth, "members": [list(m) for m in members], "train_kernels": len(records)}
        return cls(fitted, default_weights(members) if weights is None else weights, extra=(extra or {}) | flag | {"train": info},
                   kind_weights=kind_weights)

    def with_reranker(self, records: Sequence[KernelRecord], refit: Callable[[list[KernelRecord]], GbdtEnsembleTilePredictor], *,
                      top: int = TOP, folds: int = FOLDS, seed: int = 0, threads: int = 1) -> GbdtEnsembleTilePredictor:
        """This ensemble (fitted on `records`) with a `TopReranker` of its top `top` candidates, fitted on
        each record's scores from `refit` (this ensemble's recipe) on the other `folds` folds."""
        records = list(records)
        oof = cross_fitted_scores(records, refit, folds=folds, seed=seed)
        reranker = TopReranker(top=top, seed=seed, threads=threads).fit([flat_features(r) for r in records], oof, [r.config_runtime for r in records])
        info = {"top": top, "folds": folds, "seed": seed, "depth": reranker.depth, "rounds": reranker.rounds}
        return GbdtEnsembleTilePredictor(self.members, self.weights, self.extra | {"reranker": info}, reranker, self.kind_weights)

    # -- ranking ---------------------------------------------------------------------------------
    def weights_for(self, kind: str | None) -> list[float]:
        """The members' weights for a kernel of `kind` (None or a kind without its own: `weights`)."""
        return list(self.kind_weights.get(kind, self.weights)) if kind is not None else self.weights

    def _combine(self, rows: np.ndarray, kind: str | None = None) -> np.ndarray:
        return sum(w * zscore(m.gbdt.predict_rows(rows)) for w, m in zip(self.weights_for(kind), self.members) if w)

    def rank_rows(self, node_feat: np.ndarray, node_opcode: np.ndarray, config_feat: np.ndarray, kind: str | None = None) -> np.ndarray:
        """Scores (lower = predicted faster) of the configurations `config_feat` (C, Fc) of one kernel of `kind`."""
        rows = flat_rows(node_feat, node_opcode, config_feat)
        scores = self._combine(rows, kind)
        return scores if self.reranker is None else self.reranker.order(rows, scores)

    def predict(self, record: KernelRecord) -> np.ndarray:
        """`rank_rows` of a dataset record's configurations (the bench rankers' interface)."""
        return self.rank_rows(record.node_feat, record.node_opcode, record.config_feat, kind=record.meta.get("kind"))

    def rank(self, space: Any, configs: Sequence[Any]) -> np.ndarray:
        """Scores (lower = predicted faster) of `configs` of the kernel behind `space` (a TileSpace)."""
        from cost_model.measure.tile.dataset import kernel_graph

        feats, opcodes, _ = kernel_graph(space.kernel)
        rows = self.members[0].config_rows(space, configs)
        return ranked_last_if_uncompiled(self.rank_rows(feats, opcodes, rows, kind=space.kernel.spec.kind), rows)

    def finetune(self, space: Any, configs: Sequence[Any], seconds: Sequence[float], *, steps: int = 20, **_: Any) -> float:
        """`steps` more boosting rounds per member on one kernel's new measurements; returns the
        ensemble's Kendall tau on those rows afterwards."""
        from scipy.stats import kendalltau

        from cost_model.measure.tile.dataset import kernel_graph

        if len(configs) < 2 or steps <= 0:
            return float("nan")
        feats, opcodes, _ = kernel_graph(space.kernel)
        rows = flat_rows(feats, opcodes, self.members[0].config_rows(space, configs))  # compiled once, not per member
        for member in self.members:
            member.gbdt.update(rows, np.asarray(seconds, dtype=np.float64), steps)
            member.extra["finetune_rounds"] = int(member.extra.get("finetune_rounds", 0)) + steps
        self.extra["finetune_rounds"] = int(self.extra.get("finetune_rounds", 0)) + steps
        return float(kendalltau(self._combine(rows, space.kernel.spec.kind), np.asarray(seconds)).statistic)

    # -- files -----------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str], extra: dict[str, Any] | None = None, *, link_starts: bool = False,
             link_members: bool = False) -> Path:
        """Write the ensemble (atomically). A warm start's trees are stored once however many members continue them
        (`starts`); `link_starts`: a start read from a file is stored as a reference to it (its name relative to this
        file, its member and a checksum) instead of a copy, so both files must then travel together. `link_members`
        (fifty-fifth session, `tile_blend`): so is a member read unchanged from another file (a blend of files)."""
        from graph_ir.io.atomic import atomic_path

        target = Path(path)
        starts: list[dict[str, Any]] = []
        written: dict[int, int] = {}  # id(start model) -> its place in `starts`

        def start_place(model: GbdtBaseline) -> int:
            if id(model) not in written:
                link = _file_link(model, target) if link_starts else None
                entry = link or {"meta": baseline_meta(model), "ubj_zlib": _compressed(model.booster)} | (
                    {"start": start_place(model.start)} if model.start is not None else {})
                starts.append(entry)
                written[id(model)] = len(starts) - 1
            return written[id(model)]

        members = []
        for member in self.members:
            link = _file_link(member.gbdt, target) if link_members else None
            if link is not None:  # the whole member, start and all, is the referenced file's
                members.append({"meta": member.meta()} | link)
                continue
            entry = {"meta": member.meta(), "ubj_zlib": _compressed(member.gbdt.booster)}
            if member.gbdt.start is not None:
                entry["start"] = start_place(member.gbdt.start)
            members.append(entry)
        doc = {"format": ENSEMBLE_FORMAT, "weights": self.weights, "extra": self.extra | (extra or {})}
        if starts:
            doc["starts"] = starts
        doc["members"] = members
        if self.kind_weights:
            doc["kind_weights"] = self.kind_weights
        if self.reranker is not None:
            doc["reranker"] = self.reranker.to_doc()
        with atomic_path(target) as tmp:
            tmp.write_text(json.dumps(doc), encoding="utf-8")
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> GbdtEnsembleTilePredictor:
        return cls._load(os.fspath(path), {}, 0)

    @classmethod
    def _load(cls, name: str, opened: dict[str, GbdtEnsembleTilePredictor | None], depth: int) -> GbdtEnsembleTilePredictor:
        """`load`, with the files a start refers to read once per load (`opened`: None while a file is being read) and
        their chain's `depth` bounded."""
        import xgboost as xgb

        opened.setdefault(os.path.abspath(name), None)

        try:
            doc = json.loads(Path(name).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise DatasetError(f"cannot read the GBDT ensemble tile model: {error}", file=name) from error
        if not isinstance(doc, dict) or doc.get("format") != ENSEMBLE_FORMAT:
            raise DatasetError(f"not a compiler-opt GBDT ensemble tile ranker (format != {ENSEMBLE_FORMAT})", file=name)
        starts: list[GbdtBaseline] = []
        if not isinstance(doc.get("starts", []), list) or not all(isinstance(entry, dict) for entry in doc.get("starts", [])):
            raise DatasetError("'starts' must be a list of objects (the warm starts' trees or references)", file=name)
        for j, entry in enumerate(doc.get("starts", [])):
            try:
                starts.append(_read_start(entry, starts, name, opened, depth))
            except (KeyError, TypeError, ValueError, IndexError, zlib.error, xgb.core.XGBoostError) as error:
                raise DatasetError(f"warm start {j} is not readable: {_why(error)}", file=name) from error
        members = []
        for i, entry in enumerate(doc.get("members", [])):
            try:
                if isinstance(entry, dict) and "file" in entry:  # a member of another file, by reference (`save(link_members=)`)
                    members.append(GbdtTilePredictor(_read_start(entry, starts, name, opened, depth), dict(entry["meta"].get("extra", {}))))
                    continue  # its origin stays the file it was read from, so saving it linked again refers there
                booster = xgb.Booster(model_file=bytearray(_member_ubj(entry)))
                member = GbdtTilePredictor.from_meta(booster, entry["meta"])
                member.gbdt.start = _start_at(entry, starts, len(starts))
                member.gbdt.origin = (os.path.abspath(name), i, _checksum(entry))
                members.append(member)
            except (KeyError, TypeError, ValueError, IndexError, zlib.error, xgb.core.XGBoostError) as error:
                what = "is not readable" if isinstance(entry, dict) and "file" in entry else "is not a GBDT tile ranker"
                raise DatasetError(f"member {i} {what}: {_why(error)}", file=name) from error
        if not members:
            raise DatasetError("the GBDT ensemble tile ranker has no members", file=name)
        reranker = None
        if doc.get("reranker") is not None:
            try:
                reranker = TopReranker.from_doc(doc["reranker"])
            except (KeyError, TypeError, ValueError, zlib.error, xgb.core.XGBoostError) as error:
                raise DatasetError(f"the re-ranker is not readable: {str(error).splitlines()[0] if str(error) else type(error).__name__}", file=name) from error
        try:
            return cls(members, doc.get("weights"), dict(doc.get("extra", {})), reranker, doc.get("kind_weights"))
        except (TypeError, ValueError) as error:
            raise DatasetError(f"bad member weights: {error}", file=name) from error

    @classmethod
    def packaged(cls, cpu: str | None = None) -> GbdtEnsembleTilePredictor:
        """The shipped ranker for the CPU LLVM names `cpu` (None: this host's) when the package has
        one (`packaged_host_ensemble`), else the default file."""
        host_file = packaged_host_ensemble(cpu or _this_cpu())
        if host_file.is_file():
            return cls.load(host_file)
        if not PACKAGED_GBDT_ENSEMBLE.is_file():
            raise DatasetError("no GBDT ensemble tile ranker ships with this installation; pass one (GbdtEnsembleTilePredictor.train(...).save(path))",
                               file=str(PACKAGED_GBDT_ENSEMBLE))
        return cls.load(PACKAGED_GBDT_ENSEMBLE)

    @classmethod
    def packaged_for_type(cls, dtype: str, cpu: str | None = None) -> GbdtEnsembleTilePredictor | None:
        """The shipped ranker fitted on `dtype` kernels of this host's CPU (`packaged_type_ensemble`), or None."""
        path = packaged_type_ensemble(cpu or _this_cpu(), dtype)
        return cls.load(path) if path.is_file() else None


MAX_MEMBER_BYTES = 1 << 30  # a compressed member that inflates past this is refused, not decompressed into memory


def _member_ubj(entry: dict[str, Any]) -> bytes:
    """A member's XGBoost UBJSON: `ubj_zlib` (zlib, base64; written since the nineteenth session) or `ubj` (base64)."""
    if "ubj_zlib" not in entry:
        return base64.b64decode(entry["ubj"], validate=True)
    inflate = zlib.decompressobj()
    raw = inflate.decompress(base64.b64decode(entry["ubj_zlib"], validate=True), MAX_MEMBER_BYTES)
    if inflate.unconsumed_tail:
        raise ValueError(f"the compressed model inflates past {MAX_MEMBER_BYTES >> 20} MiB")
    if not inflate.eof:
        raise ValueError("the compressed model is truncated")
    return raw


MAX_START_CHAIN = 8  # files referring to files: deeper than this is refused (a cycle, or not a file this package writes)


def _why(error: Exception) -> str:
    """An error's first line for a message; a missing field named as such."""
    if isinstance(error, KeyError):
        return f"missing field {error}"
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def _compressed(booster: Any) -> str:
    raw = zlib.compress(bytes(booster.save_raw(raw_format="ubj")), 9)  # deep trees: 17 MB of UBJ -> 8 MB
    return base64.b64encode(raw).decode("ascii")


def _checksum(entry: dict[str, Any]) -> str:
    """SHA-256 of a stored member's trees as the file holds them (what a reference to them checks)."""
    return hashlib.sha256(str(entry["ubj_zlib"] if "ubj_zlib" in entry else entry["ubj"]).encode("ascii")).hexdigest()


def _start_at(entry: dict[str, Any], starts: list[GbdtBaseline], limit: int) -> GbdtBaseline | None:
    """The start an entry names (`start`: a place among the file's starts before `limit`), or None."""
    if "start" not in entry:
        return None
    place = entry["start"]
    if not isinstance(place, int) or isinstance(place, bool) or not 0 <= place < limit:
        raise ValueError(f"start {place!r} is not one of the {limit} warm starts stored before it")
    return starts[place]


def _file_link(model: GbdtBaseline, target: Path) -> dict[str, Any] | None:
    """A reference, relative to the folder of the file `target` being written, to the file member `model` was read
    from (a warm start's, or with `save(link_members=)` a whole member's). None (store its trees) when it was not read from a file or changed since (`GbdtBaseline.update` forgets
    where it came from), or when `target` itself holds it or a start under it: writing over a file must not leave a
    reference to what it held."""
    if model.origin is None:
        return None
    chain: GbdtBaseline | None = model
    while chain is not None:
        if chain.origin is not None and os.path.abspath(chain.origin[0]) == os.path.abspath(target):
            return None
        chain = chain.start
    file, member, checksum = model.origin
    try:
        relative = os.path.relpath(file, target.parent)
    except ValueError:  # another drive: no relative name
        return None
    return {"file": Path(relative).as_posix(), "member": member, "sha256": checksum}


def _read_start(entry: dict[str, Any], starts: list[GbdtBaseline], name: str, opened: dict[str, GbdtEnsembleTilePredictor | None],
                depth: int) -> GbdtBaseline:
    """A stored warm start: its trees (and its own start, stored before it), or a reference to another file's member."""
    import xgboost as xgb

    if "file" not in entry:
        model = baseline_from_meta(xgb.Booster(model_file=bytearray(_member_ubj(entry))), entry["meta"])
        model.start = _start_at(entry, starts, len(starts))
        return model
    if depth >= MAX_START_CHAIN:
        raise ValueError(f"more than {MAX_START_CHAIN} files refer to one another (a cycle?)")
    relative, member, checksum = entry["file"], entry["member"], entry["sha256"]
    if not isinstance(relative, str) or not relative or os.path.isabs(relative):
        raise ValueError(f"'file' must be a file name relative to this file, got {relative!r}")
    if not isinstance(member, int) or isinstance(member, bool) or not isinstance(checksum, str):
        raise ValueError(f"'member' must be an integer and 'sha256' a string, got {member!r} and {type(checksum).__name__}")
    candidates = [Path(name).parent / relative, PACKAGED_GBDT_ENSEMBLE.parent / Path(relative).name]  # beside it, or shipped
    found = next((c for c in candidates if c.is_file()), None)
    if found is None:
        raise ValueError(f"its trees are member {member} of {relative}, which is neither beside this file nor shipped in the package")
    key = os.path.abspath(found)
    if key in opened and opened[key] is None:  # being read further up this chain
        raise ValueError(f"{relative} refers back to a file that refers to it (a cycle of warm starts)")
    if key not in opened:
        try:
            opened[key] = GbdtEnsembleTilePredictor._load(key, opened, depth + 1)
        except DatasetError as error:  # named as the start of this file, the referenced file's own error after it
            raise ValueError(f"its trees are in {relative}, which is not readable: {error}") from error
    source = opened[key]
    assert source is not None  # read above, or refused as a cycle
    if not 0 <= member < len(source.members):
        raise ValueError(f"{relative} has {len(source.members)} members, not a member {member}")
    model = source.members[member].gbdt
    if model.origin is None or model.origin[2] != checksum:
        raise ValueError(f"member {member} of {relative} has changed since this file was written with it (sha256 differs)")
    return model


def link_start(ensemble: GbdtEnsembleTilePredictor, start: GbdtEnsembleTilePredictor) -> GbdtEnsembleTilePredictor:
    """`ensemble` (its members each one booster) with each member's first trees taken as `start`'s member at its place
    (or its only member) when they are those trees, tree for tree; ValueError naming the member otherwise. For
    files fitted before the forty-second session: saved with `link_starts`, the start's trees are not stored again."""
    from cost_model.learned.baselines import booster_json

    def trees(booster: Any) -> list[Any]:
        return booster_json(booster)["learner"]["gradient_booster"]["model"]["trees"]

    for i, member in enumerate(ensemble.members):
        base = start.members[min(i, len(start.members) - 1)].gbdt
        if member.gbdt.start is not None:
            raise ValueError(f"member {i} is already stored on top of a warm start")
        rounds, own = base.num_rounds(), member.gbdt.booster.num_boosted_rounds()
        if own <= rounds:
            raise ValueError(f"member {i} has {own} boosting rounds, the start {rounds}: it was not fitted on top of it")
        if trees(member.gbdt.booster[:rounds]) != trees(base.flat_booster()):
            raise ValueError(f"member {i}'s first {rounds} trees are not the start's")
        member.gbdt.booster, member.gbdt.start = member.gbdt.booster[rounds:], base
    return ensemble


def members_mismatch(init: GbdtEnsembleTilePredictor, members: Sequence[tuple[str, int, int | None]]) -> str | None:
    """Why `init` cannot start an ensemble of `members`, or None. Each member continues the one at its place, or
    the warm start's only member (a one-member file starts every member); rank and ndcg may continue each other."""
    have, want = [m.gbdt.objective for m in init.members], [objective for objective, _, _ in members]
    starts = have if len(have) == len(want) else have * len(want) if len(have) == 1 else None
    if starts is None or not all(can_continue(a, b) for a, b in zip(starts, want)):
        return f"the warm start's members are {have}, this ensemble's {want}"
    return None


def check_depth(depth: int) -> int:
    """A member tree depth XGBoost accepts here (1-16); ValueError otherwise."""
    if not 1 <= depth <= 16:
        raise ValueError(f"a tree depth from 1 to 16, got {depth}")
    return depth


def parse_members(text: str) -> tuple[tuple[str, int, int | None], ...]:
    """`costmodel train --gbdt-members`: comma-separated objectives, `rank` (pairwise over all pairs of a
    kernel's configurations), `ndcg` (LambdaMART over all pairs, the top of each kernel's list weighted most) or
    `relative` (log runtime over the kernel's median), each optionally `:WEIGHT` (`member_weights`); an objective
    named again gets the next model seed (`rank,rank` = two rank models bagged)."""
    names = [t.split(":", 1)[0].strip() for t in text.split(",") if t.strip()]
    if not names:
        raise ValueError("no members given (e.g. rank or rank,ndcg:0.5)")
    members, seen = [], {}
    for name in names:
        if name not in MEMBER_OBJECTIVES:
            raise ValueError(f"unknown member {name!r} ({', '.join(MEMBER_OBJECTIVES)})")
        members.append((name, seen.get(name, 0), 50 if name in RANK_FAMILY else None))
        seen[name] = seen.get(name, 0) + 1
    member_weights(text)  # the weights are checked with the names
    return tuple(members)


def default_kind_weights(members: Sequence[tuple[str, int, int | None]]) -> dict[str, tuple[float, ...]]:
    """`MEMBER_KIND_WEIGHTS` for the default `MEMBERS`, else none."""
    return dict(MEMBER_KIND_WEIGHTS) if tuple(members) == MEMBERS else {}


def check_kind_weights(kind_weights: dict[str, Sequence[float]], members: int) -> dict[str, list[float]]:
    """`kind_weights` as {kernel kind: one finite weight >= 0 per member, not all 0}; ValueError naming the kind otherwise."""
    if not isinstance(kind_weights, dict):
        raise ValueError(f"kind weights must map kernel kinds to weights, got {type(kind_weights).__name__}")
    from cost_model.measure.tile.kernels import KINDS

    out = {}
    for kind, weights in kind_weights.items():
        if kind not in KINDS:
            raise ValueError(f"unknown kernel kind {kind!r} ({', '.join(KINDS)})")
        values = [float(w) for w in weights]
        if len(values) != members:
            raise ValueError(f"{kind}: {len(values)} weights for {members} members")
        if not all(math.isfinite(w) and w >= 0 for w in values) or not any(values):
            raise ValueError(f"{kind}: weights must be finite, >= 0 and not all 0, got {values}")
        out[kind] = values
    return out


def parse_kind_weights(text: str) -> dict[str, tuple[float, ...]]:
    """`costmodel train --gbdt-kind-weights`: `KIND=W1,W2;KIND=...` (one weight per member, in order), e.g.
    `conv2d_nchw=1,0;conv2d_nhwc=1,0` ranks convolutions by the first member alone. Checked against the members
    by `check_kind_weights`."""
    out = {}
    for part in (p.strip() for p in text.split(";") if p.strip()):
        kind, sep, weights = part.partition("=")
        if not sep:
            raise ValueError(f"{part!r}: expected KIND=W1,W2,...")
        try:
            out[kind.strip()] = tuple(float(w) for w in weights.split(","))
        except ValueError:
            raise ValueError(f"{kind.strip()}: weights {weights!r} are not numbers") from None
    return out


def default_weights(members: Sequence[tuple[str, int, int | None]]) -> tuple[float, ...]:
    """`MEMBER_WEIGHTS` for the default `MEMBERS`, else 1 for every member."""
    return MEMBER_WEIGHTS if tuple(members) == MEMBERS else (1.0,) * len(members)


def member_weights(text: str) -> tuple[float, ...]:
    """The weights of `parse_members`' text (`rank,ndcg:0.5` -> (1.0, 0.5)); a member without one weighs 1."""
    weights = []
    for token in (t.strip() for t in text.split(",") if t.strip()):
        name, _, weight = token.partition(":")
        try:
            value = float(weight) if weight.strip() else 1.0
        except ValueError:
            raise ValueError(f"member {name.strip()!r}: weight {weight.strip()!r} is not a number") from None
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"member {name.strip()!r}: a weight must be a positive number, got {weight.strip()}")
        weights.append(value)
    return tuple(weights)


def train_gbdt_ensemble_and_save(data_dir: str, output: str, *, split: str = "random", test_fraction: float = 0.2, seed: int = 0,
                                 rounds: int = 400, depth: int = DEPTH, threads: int = 1, code_features: str | None = None,
                                 code_feature_set: str = "s16", extra: Sequence[tuple[str, str | None]] = (),
                                 members: Sequence[tuple[str, int, int | None]] = MEMBERS, weights: Sequence[float] | None = None,
                                 kind_weights: dict[str, Sequence[float]] | None = None, warm_from: str | None = None,
                                 link_warm_start: bool = False, rerank_top: int = 0) -> dict[str, Any]:
    """`costmodel train --model gbdt-ens`: fit the ensemble on a split's training kernels, score both
    sides (top-1/top-5 slowdown, Kendall tau), save it. `code_features`: a tile_code_features cache
    folder; the model then reads the compiled-code block (kernels without cached features left out).
    `extra`: (folder, cache) pairs of more kernels for the training side (`fit_and_save_tile_ranker`).
    `warm_from`: a gbdt-ens file of the same code features whose trees the boosting continues from: of the same members, or of one
    member that every member continues (`members_mismatch`). The file stores the start's trees once, or with
    `link_warm_start` as a reference to `warm_from` (`save(link_starts=)`).
    `rerank_top` > 1: add a `TopReranker` of the ensemble's top `rerank_top` candidates (`with_reranker`: the same
    recipe refitted on `FOLDS` folds of the training kernels, so this takes about FOLDS + 1 fits)."""
    check_depth(depth)  # before any data is read or file written
    if rerank_top == 1 or rerank_top < 0:
        raise ValueError(f"a re-ranker needs a top of at least 2 candidates (0: none), got {rerank_top}")
    init = None
    if warm_from:
        init = GbdtEnsembleTilePredictor.load(warm_from)  # checked here, before any data is read
        reads, wanted = code_feature_set_read(init.extra), code_feature_set if code_features else None
        if reads != wanted:
            raise DatasetError(f"the warm start reads code feature set {reads!r}, this fit {wanted!r} (--code-features / --code-feature-set)", file=warm_from)
        mismatch = members_mismatch(init, members)
        if mismatch:
            raise DatasetError(f"{mismatch} (--gbdt-members)", file=warm_from)
    weights = tuple(default_weights(members) if weights is None else weights)
    if len(weights) != len(members):
        raise ValueError(f"{len(members)} members but {len(weights)} weights")
    kind_weights = check_kind_weights(default_kind_weights(members) if kind_weights is None else kind_weights, len(members))
    config = {"model": "gbdt-ens", "members": [list(m) for m in members], "weights": list(weights)} | (
        {"kind_weights": kind_weights} if kind_weights else {}) | {"split": split, "test_fraction": test_fraction, "seed": seed,
              "rounds": rounds, "depth": depth} | ({"code_features": os.path.basename(os.path.normpath(code_features)),
                                                   "code_feature_set": code_feature_set} if code_features else {})
    if init is not None:  # what the trees it starts from were fitted on
        config["warm_from"] = {"file": os.path.basename(warm_from or ""), "hosts": init.extra.get("hosts", []),
                               "timing_protocols": init.extra.get("timing_protocols", []), "data": init.extra.get("data")}
    if rerank_top:
        config["rerank_top"] = rerank_top

    def fit(train: list[KernelRecord]) -> GbdtEnsembleTilePredictor:
        return GbdtEnsembleTilePredictor.train(train, members=members, seed=seed, rounds=rounds, depth=depth, threads=threads,
                                               code_features=bool(code_features), code_feature_set=code_feature_set, init=init, weights=weights,
                                               kind_weights=kind_weights)

    def fit_with_reranker(train: list[KernelRecord]) -> GbdtEnsembleTilePredictor:
        return fit(train).with_reranker(train, fit, top=rerank_top, seed=seed, threads=threads)

    return fit_and_save_tile_ranker(data_dir, output, fit_with_reranker if rerank_top else fit, config,
                                    code_features=code_features, code_feature_set=code_feature_set, extra=extra,
                                    save_options={"link_starts": True} if link_warm_start else {})
