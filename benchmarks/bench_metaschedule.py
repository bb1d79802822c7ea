"""MetaSchedule's own XGBoost cost model (XGBModel on PerStoreFeature features) on the tile dataset.

    PYTHONPATH=. python benchmarks/bench_costmodel.py out/tile --splits-only        # writes the splits
    PYTHONPATH=. /path/to/venv-with-tvm-ffi-0.1.14/bin/python benchmarks/bench_metaschedule.py out/tile --feature-cache out/ms_features
    PYTHONPATH=. python benchmarks/bench_costmodel.py out/tile --metaschedule benchmarks/results/metaschedule_preds.json

Runs in a virtual environment with apache-tvm 0.27.0.post1 and apache-tvm-ffi 0.1.14.post1
(0.26.0 with 0.1.13.post2 works too), plus xgboost-cpu, psutil and pyyaml. With apache-tvm-ffi
0.1.15.post2 (what pip picks for apache-tvm 0.26/0.27 today, and what the shared venv has),
`tvm.ir.save_json` of any object segfaults in `tvm::ffi::ToJSONGraph`, and PerStoreFeature
deep-copies each candidate's module through it.
`TuneContext` is built through its FFI constructor: its Python `__init__` imports
`tvm.s_tir.tensor_intrin`, which parses every CUDA/CPU intrinsic as TVMScript (minutes on this
loaded machine) and is not needed to extract features.

For every kernel file of the splits (`benchmarks/results/costmodel_splits.json`, written by
bench_costmodel.py with the same seed), each stored configuration is rebuilt as the TVM schedule
that was measured (`TileSpace.schedule_object`), its PerStoreFeature vectors extracted, and
XGBModel's own training (`_train`: the per-store features summed per candidate, fitted to
min_cost / cost within a kernel, its XGBConfig, early stopping on the training set) is run once
on all training kernels. Predictions (normalized throughput, higher = faster) are written as
minus log for bench_costmodel.py to score with the other methods.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def _context(mod):  # type: ignore[no-untyped-def]
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule import _ffi_api
    from tvm.s_tir.meta_schedule.logging import get_logger, get_logging_func
    import tvm

    ctx = ms.TuneContext.__new__(ms.TuneContext)
    target = tvm.target.Target({"kind": "llvm"})  # PerStoreFeature reads only whether it is a GPU
    ctx.__init_handle_by_constructor__(_ffi_api.TuneContext, mod, target, None, None, "tile", 1, 0, get_logging_func(get_logger("ms")))
    return ctx


def kernel_features(path: str, cache_dir: str | None = None) -> tuple[list[np.ndarray], np.ndarray]:
    """PerStoreFeature arrays of every stored configuration of one kernel file, and its runtimes.
    With `cache_dir`, features already extracted for a configuration (by its text) are reused."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from cost_model.measure.tile.kernels import KernelSpec, build_kernel
    from cost_model.measure.tile.space import TileConfig, TileSpace

    with np.load(path, allow_pickle=False) as data:
        meta = json.loads(str(data["meta"]))
        texts = [str(t) for t in data["config_text"]]
        runtime = data["config_runtime"].astype(np.float64)
    known: dict[str, np.ndarray] = {}
    cache_file = Path(cache_dir) / Path(path).name if cache_dir else None
    if cache_file is not None and cache_file.is_file():
        with np.load(cache_file, allow_pickle=False) as data:
            offsets = data["offsets"]
            known = {str(t): data["features"][offsets[i] : offsets[i + 1]] for i, t in enumerate(data["texts"])}
    todo = [t for t in texts if t not in known]
    if todo:
        space = TileSpace(build_kernel(KernelSpec(meta["kind"], tuple(meta["dims"]))))
        mod = tvm.IRModule({"main": space.kernel.func})
        args = ms.arg_info.ArgInfo.from_prim_func(space.kernel.func)
        candidates = [ms.MeasureCandidate(space.schedule_object(TileConfig.from_text(t)), args) for t in todo]
        extractor = ms.feature_extractor.PerStoreFeature()
        for text, f in zip(todo, extractor.extract_from(_context(mod), candidates)):
            known[text] = f.numpy().astype("float32")
        if cache_file is not None:
            cache_file.parent.mkdir(parents=True, exist_ok=True)
            names = list(known)
            offsets = np.cumsum([0] + [known[t].shape[0] for t in names])
            width = next((known[t].shape[1] for t in names if known[t].ndim == 2 and known[t].shape[0]), 164)
            stacked = np.concatenate([known[t].reshape(-1, width) for t in names]) if names else np.zeros((0, width), np.float32)
            np.savez(cache_file, texts=np.array(names), offsets=offsets, features=stacked)
    return [known[t] for t in texts], runtime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="tile dataset folder")
    parser.add_argument("--splits", default=str(RESULTS / "costmodel_splits.json"))
    parser.add_argument("-o", "--output", default=str(RESULTS / "metaschedule_preds.json"))
    parser.add_argument("--feature-cache", metavar="DIR", help="reuse PerStoreFeature arrays extracted before (per kernel file, by config)")
    args = parser.parse_args(argv)

    import tvm
    from tvm.s_tir.meta_schedule.cost_model import XGBModel
    from tvm.s_tir.meta_schedule.feature_extractor import PerStoreFeature

    splits = json.loads(Path(args.splits).read_text(encoding="utf-8"))
    names = sorted({n for s in splits["splits"].values() for side in ("train", "test") for n in s[side]})
    began = time.perf_counter()
    cache: dict[str, tuple[list[np.ndarray], np.ndarray]] = {}
    for i, name in enumerate(names):
        cache[name] = kernel_features(str(Path(args.data) / name), args.feature_cache)
        if i % 20 == 0:
            print(f"features: {i + 1}/{len(names)} kernels, {time.perf_counter() - began:.0f} s", flush=True)
    out = {"tvm": tvm.__version__, "seed": splits.get("seed"), "predictions": {}, "train_s": {}}
    for split, sides in splits["splits"].items():
        t0 = time.perf_counter()
        model = XGBModel(extractor=PerStoreFeature(), adaptive_training=False, num_warmup_samples=0)
        xs: list[np.ndarray] = []
        ys: list[np.ndarray] = []
        for name in sides["train"]:
            feats, runtime = cache[name]
            keep = [j for j, f in enumerate(feats) if len(f)]
            xs += [feats[j] for j in keep]
            ys.append(runtime[keep].min() / runtime[keep])  # XGBModel's target: min_cost / cost per workload
        model._train(xs=xs, ys=np.concatenate(ys).astype("float32"))  # noqa: SLF001 (XGBModel.update's own last step)
        preds = {}
        for name in sides["test"]:
            feats, _ = cache[name]
            score = model._predict(xs=feats).astype(np.float64)  # noqa: SLF001
            preds[name] = (-np.log(np.clip(score, 1e-6, None))).tolist()
        out["predictions"][split] = preds
        out["train_s"][split] = time.perf_counter() - t0
        print(f"{split}: trained on {len(sides['train'])} kernels ({len(xs)} configs), predicted {len(preds)}", flush=True)
    path = Path(args.output)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out), encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
