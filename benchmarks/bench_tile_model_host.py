"""Why a saved GraphSAGE tile model fails on another dataset: its inputs under its own normalizers.

    git show a075496:cost_model/learned/tile_model.pt > out/tile_model_s6.pt   # the file trained on out/tile_s6
    PYTHONPATH=. python benchmarks/bench_tile_model_host.py out/tile_s13 out/tile_model_s6.pt --seeds 0,1,2

For each config feature, how far the dataset's values lie from the checkpoint's stored training
mean in units of its stored std (features constant on the training data were stored with std
1e-3, so any other value is thousands of standard deviations out); then the model's test metrics
(the split of bench_costmodel.py) on the features as loaded, and again with the config features
recomputed against the machine the checkpoint's constant hardware features describe
(`--host l2=524288,lanes=8,registers=16`: `HostCaches` fields, the rest as the data records),
and with only the machine's own features (log2 of caches, lanes, registers, threads) set back.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

import numpy as np


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data")
    parser.add_argument("model")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--test-fraction", type=float, default=0.25)
    parser.add_argument("--host", default="l2=524288,lanes=8,registers=16", help="HostCaches fields of the checkpoint's training machine")
    args = parser.parse_args(argv)

    import torch

    from cost_model.learned.data import split_records
    from cost_model.learned.metrics import kernel_metrics, mean_metrics
    from cost_model.learned.tile_hw_features import HostCaches
    from cost_model.learned.tpugraphs import load_dir
    from cost_model.learned.train import load_model, predict, tensors_for
    from cost_model.measure.tile.space import CONFIG_FEATURES, refresh_config_features

    torch.set_num_threads(1)
    records = load_dir(args.data)
    model, _ = load_model(args.model)
    state = model.state_dict()
    mean, std = state["config_mean"].numpy(), state["config_std"].numpy()
    feats = np.concatenate([r.config_feat for r in records])
    z = np.abs(feats - mean) / std
    print(f"{len(records)} kernels; config features {feats.shape[1]} (checkpoint {mean.shape[0]}); stored std at the 1e-3 floor: {int((std <= 1e-3).sum())}")
    print("| feature | stored mean | stored std | data mean | data min | data max | median abs z |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for j in np.argsort(-np.median(z, axis=0))[:8]:
        print(f"| {j} | {mean[j]:.4g} | {std[j]:.3g} | {feats[:, j].mean():.4g} | {feats[:, j].min():.4g} | {feats[:, j].max():.4g} | {np.median(z[:, j]):.3g} |")
    overrides = {k: int(v) for k, v in (item.split("=") for item in args.host.split(",") if item)}
    # the machine's own columns (tile_hw_features: log2 L1, L2, L3, lanes, registers, threads), before the last ("pattern known")
    machine_cols = slice(CONFIG_FEATURES - 7, CONFIG_FEATURES - 1)

    def variant(name: str) -> list[np.ndarray]:
        out = []
        for r in records:
            if name == "as loaded":
                out.append(r.config_feat)
                continue
            host = replace(HostCaches.from_dict(r.meta["machine"]["caches"]), **overrides)
            old = refresh_config_features(r.config_text, r.meta["is_reduce"], r.meta["extents"], kind=str(r.meta.get("kind", "")),
                                          dims=r.meta.get("dims", ()), host=host).astype(np.float32)
            if name == "machine features set back":
                fixed = r.config_feat.copy()
                fixed[:, machine_cols] = old[:, machine_cols]
                out.append(fixed)
            else:
                out.append(old)
        return out

    print("\n| split | seed | config features | top-1 | top-5 | Kendall tau |")
    print("|---|---:|---|---:|---:|---:|")
    variants = {name: variant(name) for name in ("as loaded", "machine features set back", "all recomputed for the old host")}
    for split in ("random", "program"):
        for seed in [int(s) for s in args.seeds.split(",")]:
            _, test = split_records(records, split, test_fraction=args.test_fraction, seed=seed)
            for name, feats_of in variants.items():
                rows = []
                for i in test:
                    d = tensors_for(model, records[i])
                    d.config_feat = torch.from_numpy(feats_of[i])
                    rows.append(kernel_metrics(predict(model, d), records[i].config_runtime))
                m = mean_metrics(rows)
                print(f"| {split} | {seed} | {name} | {m['top1']:.1%} | {m['top5']:.1%} | {m['kendall']:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
