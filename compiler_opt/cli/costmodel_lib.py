"""`compiler-opt costmodel collect|train|evaluate` and `compiler-opt autotune`.

This module imports only the standard library at import time (the CLI's start-up rule); every
handler imports what it needs.

    compiler-opt costmodel collect --task tile --out data/tile --configs 50 --seed 0
    compiler-opt costmodel collect --task fusion --out data/fusion --configs 30 --seed 0
    compiler-opt costmodel noise data/tile --top 20          # per-kernel label quality, noisiest first
    compiler-opt costmodel remeasure data/tile --count 80 --max-load 2.5
    compiler-opt costmodel train data/tile -o model.pt --loss listmle --split program
    compiler-opt costmodel train data/tile -o tile_gbdt.ubj --model gbdt --split program
    compiler-opt costmodel evaluate model.pt data/tile --split program
    compiler-opt autotune model.onnx --task tile --budget 200 -o tuned.onnx
    compiler-opt autotune model.onnx --task tile --ranker gbdt -o tuned.onnx   # XGBoost rank model
    compiler-opt autotune model.onnx --task tile --ranker gbdt-ens -o tuned.onnx   # XGBoost rank + relative, z-scored
    compiler-opt autotune model.hlo --task fusion --budget 100 -o tuned.hlo
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from dataclasses import replace
from typing import Any

from compiler_opt.cli.arg_types import finite_float, non_negative_float

__all__ = ["add_parsers", "autotune_fusion_model", "autotune_model"]

logger = logging.getLogger(__name__)

DEFAULT_HLO_DIR = os.path.join("..", "shared", "testdata", "external", "hlo")


def _cache(path: str | None, out: str) -> Any:
    from cost_model.profiling.cache import ProfileCache

    os.makedirs(out, exist_ok=True)
    return ProfileCache(path or os.path.join(out, "measurements.sqlite"))


def _cmd_collect(args: argparse.Namespace) -> int:
    for flag, value, low in (("--synthetic", args.synthetic, 0), ("--configs", args.configs, 1), ("--repeats", args.repeats, 0),
                             ("--max-kernels", args.max_kernels, 0)):
        if value < low:  # checked before DIR is created
            print(f"compiler-opt: error: costmodel collect {flag} must be >= {low}, got {value}", file=sys.stderr)
            return 2
    if not args.max_flops > 0:
        print(f"compiler-opt: error: costmodel collect --max-flops must be > 0, got {args.max_flops:g}", file=sys.stderr)
        return 2
    # flags that would otherwise be ignored without a word: the shapes a user asked for are not the ones timed
    if (args.synthetic_kinds is not None or args.synthetic_seed is not None or args.synthetic_single_row) and not args.synthetic:
        print("compiler-opt: error: costmodel collect --synthetic-kinds / --synthetic-seed / --synthetic-single-row need --synthetic N (N > 0)", file=sys.stderr)
        return 2
    if not 0.0 <= args.synthetic_single_row <= 1.0:
        print(f"compiler-opt: error: costmodel collect --synthetic-single-row must lie in [0, 1], got {args.synthetic_single_row:g}", file=sys.stderr)
        return 2
    if args.dtype != "float32" and args.task != "tile":
        print(f"compiler-opt: error: costmodel collect --dtype is for --task tile; --task {args.task} times graphs in their own types", file=sys.stderr)
        return 2
    if args.synthetic and args.task != "tile":
        print(f"compiler-opt: error: costmodel collect --synthetic draws tile kernels; --task {args.task} does not take it", file=sys.stderr)
        return 2
    kind_weights = None
    if args.synthetic_kinds is not None:
        from cost_model.measure.tile.synthetic import parse_kind_weights

        try:
            kind_weights = parse_kind_weights(args.synthetic_kinds)
        except ValueError as exc:
            print(f"compiler-opt: error: costmodel collect --synthetic-kinds: {exc}", file=sys.stderr)
            return 2
    if args.task == "tile":
        from compiler_opt.costmodel.suite import suite_kernels
        from cost_model.measure.tile.collect import TILE_PROTOCOL, protocol_named
        from cost_model.measure.tile.compile_probe import parse_cpus
        from cost_model.measure.tile.dataset import collect_tile_dataset, protocol_mismatch, read_spec_list, write_spec_list

        # before anything is drawn or written: a folder timed under one protocol is never resumed under another
        protocol = protocol_named(args.timing_protocol) if args.timing_protocol else TILE_PROTOCOL
        mismatch = protocol_mismatch(args.out, protocol)
        if mismatch:
            print(f"compiler-opt: error: costmodel collect: {mismatch}", file=sys.stderr)
            return 2
        if args.compile_timeout is not None and args.compile_timeout <= 0:
            print(f"compiler-opt: error: costmodel collect --compile-timeout: a positive number of seconds, got {args.compile_timeout:g}", file=sys.stderr)
            return 2
        if (args.compile_cpus or args.code_cache) and args.compile_timeout is None:
            flag = "--compile-cpus" if args.compile_cpus else "--code-cache"
            print(f"compiler-opt: error: costmodel collect {flag} works through the compile probe: give --compile-timeout S too", file=sys.stderr)
            return 2
        try:
            compile_cpus = parse_cpus(args.compile_cpus) if args.compile_cpus else None
        except ValueError as error:
            print(f"compiler-opt: error: costmodel collect --compile-cpus: {error}", file=sys.stderr)
            return 2
        listing = os.path.join(args.out, "kernels.json")
        if os.path.isfile(listing):
            specs = read_spec_list(listing)
            held = sorted({spec.dtype for spec in specs})
            if held and held != [args.dtype]:  # one element type per dataset: a resumed collection must not mix them
                print(f"compiler-opt: error: costmodel collect: {args.out} holds {'/'.join(held)} kernels, not --dtype {args.dtype}", file=sys.stderr)
                return 2
        elif args.synthetic:
            from cost_model.measure.tile.synthetic import synthetic_kernels

            seed = args.seed if args.synthetic_seed is None else args.synthetic_seed
            try:  # drawn before DIR exists: a budget no shape fits leaves nothing behind
                specs = [replace(spec, dtype=args.dtype)
                         for spec in synthetic_kernels(args.synthetic, seed=seed, max_flops=args.max_flops, kind_weights=kind_weights,
                                                  single_row=args.synthetic_single_row)]
            except ValueError as exc:
                print(f"compiler-opt: error: costmodel collect --synthetic: {exc}", file=sys.stderr)
                return 2
            os.makedirs(args.out, exist_ok=True)
            write_spec_list(specs, listing)
        else:
            hlo_dir = args.hlo_dir if args.hlo_dir is not None else (DEFAULT_HLO_DIR if os.path.isdir(DEFAULT_HLO_DIR) else None)
            specs = [replace(spec, dtype=args.dtype) for spec in suite_kernels(hlo_dir=hlo_dir, max_flops=args.max_flops)]
            os.makedirs(args.out, exist_ok=True)
            write_spec_list(specs, listing)
        if args.max_kernels:
            import numpy as np

            keep = sorted(np.random.default_rng(args.seed).permutation(len(specs))[: args.max_kernels].tolist())
            specs = [specs[i] for i in keep]
        with _cache(args.cache, args.out) as cache:
            summary = collect_tile_dataset(specs, args.out, cache=cache, configs=args.configs, seed=args.seed,
                                           repeats=args.repeats or None, threads=args.threads, progress=not args.no_progress,
                                           protocol=protocol, compile_timeout=args.compile_timeout, compile_cpus=compile_cpus,
                                           code_cache=args.code_cache)
    else:
        import functools

        from compiler_opt.costmodel.fusion_collect import collect_fusion_dataset
        from compiler_opt.costmodel.fusion_graphs import fusion_graph, fusion_graph_names

        if args.in_process:  # XLA's timing setup must precede the graphs' JAX lowering
            from cost_model.measure.xla_timing import configure_xla_timing

            configure_xla_timing()
        names = fusion_graph_names(tuple(int(s) for s in args.scales.split(",")))
        if args.graphs:
            wanted = {w.strip() for w in args.graphs.split(",") if w.strip()}
            unknown = sorted(wanted - set(names))
            if unknown or not wanted:  # a typo left no graph and ended as "no .npz files" (forty-ninth session)
                print(f"compiler-opt: error: costmodel collect --graphs: unknown fusion graph(s) {unknown or [args.graphs]}; known at "
                      f"--scales {args.scales}: {', '.join(names)}", file=sys.stderr)
                return 2
            names = [n for n in names if n in wanted]
        # Builders, not graphs: with isolation each graph is built and measured in its own process.
        graphs = {name: functools.partial(fusion_graph, name) for name in names}
        with _cache(args.cache, args.out) as cache:
            summary = collect_fusion_dataset(graphs, args.out, cache=cache, configs=args.configs, seed=args.seed,
                                             repeats=args.repeats or 31, isolate=not args.in_process,
                                             retest_fraction=args.retest_fraction, reference_graph=None if args.reference in ("", "none") else args.reference,
                                             progress=not args.no_progress)
            if not args.no_conv_times:  # twelfth session: each conv of the graphs timed alone, after the configurations
                from compiler_opt.costmodel.fusion_merge import add_conv_times, conv_timer_for
                from cost_model.measure.xla_timing import configure_xla_timing

                if not args.in_process:
                    configure_xla_timing()  # this process has not created JAX's CPU client yet (the graphs ran in children)
                convs = add_conv_times(args.out, conv_timer_for(args.out, cache, seed=args.seed))
                print(f"conv times: {convs['convs']} distinct convs ({convs['measured']} timed now) stored per node (node_conv_time)")
    noise = summary["noise_floor"]
    print(f"{args.task}: {summary['kernels']} files in {args.out}, {summary['configs_per_kernel']} configs each; "
          f"noise floor (test-retest |min2/min1-1|): median {noise['median']:.3f}, p90 {noise['p90']:.3f} over {noise['pairs']} pairs")
    return 0


def _cmd_merge(args: argparse.Namespace) -> int:
    from compiler_opt.costmodel.fusion_merge import merge_fusion_collections

    summary = merge_fusion_collections(args.sources, args.out, scale_s=args.scale_s, refeaturize=args.refeaturize)
    for source in summary["merged_from"]:
        print(f"{source['folder']}: {source['kernels']} graphs, scale {source['scale_s'] * 1e6:.2f} us, labels x {source['factor']:.4f}")
    noise = summary["noise_floor"]
    print(f"fusion: {summary['kernels']} files in {args.out}, scale {summary['reference']['scale_s'] * 1e6:.2f} us per reference ratio; "
          f"noise floor median {noise['median']:.3f}, p90 {noise['p90']:.3f} over {noise['pairs']} pairs")
    return 0


def _cmd_conv_times(args: argparse.Namespace) -> int:
    from compiler_opt.costmodel.fusion_merge import add_conv_times, conv_timer_for
    from cost_model.measure.xla_timing import configure_xla_timing

    configure_xla_timing()  # before the graphs' JAX lowering creates the CPU client
    with _cache(args.cache, args.data) as cache:
        summary = add_conv_times(args.data, conv_timer_for(args.data, cache, repeats=args.repeats, seed=args.seed))
    times = sorted(summary["seconds"].items(), key=lambda item: item[1])
    print(f"conv times: {summary['files']} files in {args.data}, {summary['convs']} distinct convs ({summary['measured']} timed now, the rest cached)")
    for text, seconds in times:
        print(f"  {seconds * 1e6:9.1f} us  {text}")
    return 0


def _cmd_noise(args: argparse.Namespace) -> int:
    import numpy as np

    from cost_model.learned.tpugraphs import load_dir
    from cost_model.measure.harness import noise_floor
    from cost_model.measure.quality import kernel_noise, noisiest, retest_pairs

    records = load_dir(args.data)
    rows = noisiest([kernel_noise(r) for r in records], skip_remeasured=False)
    floor = noise_floor([p for r in records for p in retest_pairs(r)])
    print(f"{len(rows)} kernels; test-retest |min2/min1-1|: median {floor['median']:.3f}, p90 {floor['p90']:.3f} over {floor['pairs']} pairs; "
          f"score (max of medians): median {np.median([r.score for r in rows]):.3f}, {sum(r.remeasured for r in rows)} re-measured")
    print("| kernel | configs | spread med | spread p90 | retest med | pairs | retest tau | re-measured | score |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|")
    for r in rows[: args.top]:
        print(f"| {r.name} | {r.configs} | {r.spread_median:.3f} | {r.spread_p90:.3f} | {r.retest_median:.3f} | {r.retest_pairs} | "
              f"{r.retest_tau:.2f} | {'yes' if r.remeasured else 'no'} | {r.score:.3f} |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"noise_floor": floor, "kernels": [r.as_dict() for r in rows]}, handle, indent=1)
    return 0


def _cmd_remeasure(args: argparse.Namespace) -> int:
    from cost_model.measure.tile.remeasure import copy_dataset, remeasure_tile_dataset

    if args.out:
        try:
            args.data = str(copy_dataset(args.data, args.out))
        except (OSError, ValueError) as error:
            print(f"compiler-opt: error: costmodel remeasure --out: {error}", file=sys.stderr)
            return 2
        print(f"remeasure: relabelling the copy {args.data}; the original folder is left as it is")
    with _cache(args.cache, args.data) as cache:
        summary = remeasure_tile_dataset(args.data, cache=cache, count=args.count, min_score=args.min_score, repeats=args.repeats,
                                         threads=args.threads, seed=args.seed, max_load=args.max_load, max_wait=args.max_wait,
                                         progress=not args.no_progress)
    floor = summary["old_vs_new_noise_floor"]
    print(f"remeasure: {summary['remeasured_total']} kernels re-measured so far ({summary['chosen']} chosen this run); "
          f"collection vs re-measurement |min2/min1-1|: median {floor['median']:.3f}, p90 {floor['p90']:.3f} over {floor['pairs']} pairs; "
          f"mean per-kernel Kendall tau between the passes {summary['retest_tau_mean']:.3f}" + (f"; stopped: {summary['stopped']}" if summary["stopped"] else ""))
    return 0


def _test_fraction_error(args: argparse.Namespace, command: str) -> bool:
    """True (after saying so) when --test-fraction cannot split anything: a share strictly between 0 and 1."""
    if 0.0 < args.test_fraction < 1.0 or getattr(args, "split", "") == "all":  # `all` trains on every kernel: no test side
        return False
    print(f"compiler-opt: error: costmodel {command} --test-fraction: a share of the kernels strictly between 0 and 1, got {args.test_fraction:g}",
          file=sys.stderr)
    return True


def _missing_output_folder(path: str | None, flag: str) -> bool:
    """Print the usage error for an output whose folder does not exist (before a fit of minutes)."""
    if path is None:
        return False
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(folder):
        return False
    print(f"compiler-opt: error: {flag} {path}: output folder {folder} does not exist", file=sys.stderr)
    return True


def _cmd_train(args: argparse.Namespace) -> int:
    if _test_fraction_error(args, "train") or _missing_output_folder(args.output, "-o"):
        return 2
    if args.extra_data and args.model == "additive":  # tile kernels only; the additive model reads fusion datasets
        print("compiler-opt: error: costmodel train: --extra-data only applies to the tile models (gnn, gbdt, gbdt-ens)", file=sys.stderr)
        return 2
    ens_only = [flag for flag, given in (("--code-features", args.code_features), ("--extra-code-features", args.extra_code_features),
                                         ("--code-feature-set", args.code_feature_set != "s16"), ("--gbdt-members", args.gbdt_members),
                                         ("--gbdt-kind-weights", args.gbdt_kind_weights),
                                         ("--gbdt-depth", args.gbdt_depth is not None and args.model != "gbdt"), ("--warm-from", args.warm_from),
                                         ("--link-warm-start", args.link_warm_start), ("--rerank-top", args.rerank_top)) if given]
    if args.model != "gnn" and args.mse_weight is not None:  # the other models have no such term; silently ignoring it would mislead
        print(f"compiler-opt: error: costmodel train: --mse-weight only applies to --model gnn (got --model {args.model})", file=sys.stderr)
        return 2
    if args.split == "all" and args.model not in ("gbdt", "gbdt-ens"):
        print(f"compiler-opt: error: costmodel train: --split all applies to the tile rankers (--model gbdt / gbdt-ens), got --model {args.model}", file=sys.stderr)
        return 2
    if ens_only and args.model != "gbdt-ens":  # these would be silently ignored by the other models
        print(f"compiler-opt: error: costmodel train: {', '.join(ens_only)} only apply to --model gbdt-ens (got --model {args.model})", file=sys.stderr)
        return 2
    depth: dict[str, int] = {}  # --gbdt-depth (gbdt, gbdt-ens), checked once; absent: each model's own default
    if args.gbdt_depth is not None:
        from cost_model.learned.gbdt_ensemble import check_depth

        try:
            depth["depth"] = check_depth(args.gbdt_depth)
        except ValueError as error:
            print(f"compiler-opt: error: costmodel train --gbdt-depth: {error}", file=sys.stderr)
            return 2
    if args.model == "additive":
        from cost_model.learned.fusion_additive import train_additive_and_save

        try:
            report = train_additive_and_save(args.data, args.output, split=args.split, test_fraction=args.test_fraction, seed=args.seed,
                                             loss=args.additive_loss, signed_terms=[t for t in args.additive_signed_terms.split(",") if t],
                                             xla_terms=[f"xla_{t}" for t in args.additive_xla_terms.split(",") if t], xla_calls=args.xla_calls,
                                             extra_terms=[t for t in args.additive_terms.split(",") if t])
        except ValueError as error:  # a --additive-signed-terms / --additive-xla-terms / --additive-terms entry that is no term of the model
            print(f"compiler-opt: error: costmodel train --additive-signed-terms / --additive-xla-terms / --additive-terms: {error}", file=sys.stderr)
            return 2
        print(json.dumps(report["metrics"], indent=2))
        return 0
    if args.model == "gbdt-ens":
        from cost_model.learned.gbdt_ensemble import train_gbdt_ensemble_and_save

        extra_data, extra_caches = args.extra_data or [], args.extra_code_features or []
        if extra_caches and len(extra_caches) != len(extra_data) or args.code_features and len(extra_caches) != len(extra_data):
            print("compiler-opt: error: costmodel train: give one --extra-code-features per --extra-data (with --code-features), "
                  f"got {len(extra_caches)} for {len(extra_data)}", file=sys.stderr)
            return 2
        extra = list(zip(extra_data, extra_caches or [None] * len(extra_data)))
        from cost_model.learned.gbdt_ensemble import MEMBERS, check_kind_weights, member_weights, parse_kind_weights, parse_members

        try:  # weights left None take the library's defaults for these members (`default_weights`, `default_kind_weights`)
            members = parse_members(args.gbdt_members) if args.gbdt_members else MEMBERS
            weights = member_weights(args.gbdt_members) if args.gbdt_members else None
        except ValueError as error:
            print(f"compiler-opt: error: costmodel train --gbdt-members: {error}", file=sys.stderr)
            return 2
        try:  # checked here, before any data is read, so the error names the option
            kind_weights = None if args.gbdt_kind_weights is None else check_kind_weights(parse_kind_weights(args.gbdt_kind_weights), len(members))
        except ValueError as error:
            print(f"compiler-opt: error: costmodel train --gbdt-kind-weights: {error}", file=sys.stderr)
            return 2
        if args.link_warm_start and not args.warm_from:
            print("compiler-opt: error: costmodel train --link-warm-start: there is no warm start to refer to (give --warm-from)", file=sys.stderr)
            return 2
        if args.rerank_top == 1 or args.rerank_top < 0:
            print(f"compiler-opt: error: costmodel train --rerank-top: at least 2 candidates (0: no re-ranker), got {args.rerank_top}", file=sys.stderr)
            return 2
        report = train_gbdt_ensemble_and_save(args.data, args.output, split=args.split, test_fraction=args.test_fraction, seed=args.seed,
                                              threads=args.threads, code_features=args.code_features, code_feature_set=args.code_feature_set,
                                              extra=extra, members=members, weights=weights, kind_weights=kind_weights, warm_from=args.warm_from,
                                              link_warm_start=args.link_warm_start, rerank_top=args.rerank_top,
                                              **depth)
        print(json.dumps(report["metrics"], indent=2))
        return 0
    if args.model == "gbdt":
        from cost_model.learned.gbdt_predictor import train_gbdt_and_save

        report = train_gbdt_and_save(args.data, args.output, split=args.split, test_fraction=args.test_fraction, seed=args.seed, threads=args.threads,
                                     extra=args.extra_data or [], **depth)
        print(json.dumps(report["metrics"], indent=2))
        return 0
    from cost_model.learned.train import TrainConfig, train_and_save

    config = TrainConfig(loss=args.loss, epochs=args.epochs, hidden=args.hidden, layers=args.layers, pooling=args.pooling,
                         lr=args.lr, seed=args.seed, split=args.split, test_fraction=args.test_fraction, threads=args.threads,
                         residual=args.residual, **({} if args.mse_weight is None else {"mse_weight": args.mse_weight}))
    report = train_and_save(args.data, args.output, config, extra=args.extra_data or [])
    print(json.dumps(report["metrics"], indent=2))
    return 0


def _cmd_blend(args: argparse.Namespace) -> int:
    """Write several gbdt-ens files as one ranker (`tile_blend`): their members by reference, or copied with --copy."""
    from compiler_opt.cli._render import human_bytes
    from cost_model.learned.tile_blend import blend_files, parse_file_weight
    from cost_model.learned.tpugraphs import DatasetError

    if _missing_output_folder(args.output, "-o"):
        return 2
    try:
        ranker = blend_files([parse_file_weight(text) for text in args.files])
    except (DatasetError, ValueError) as error:
        print(f"compiler-opt: error: costmodel blend: {error}", file=sys.stderr)
        return 1
    ranker.save(args.output, link_members=not args.copy)
    how = "with every member's trees" if args.copy else "its members read from " + ", ".join(p["file"] for p in ranker.extra["blend"]) + \
        " (keep them beside it)"
    weights = ", ".join(f"{p['file']} x{p['weight']:g}" for p in ranker.extra["blend"])
    print(f"{args.output}: {len(ranker.members)} members ({weights}), {human_bytes(os.path.getsize(args.output))}, {how}")
    return 0


def _cmd_link_start(args: argparse.Namespace) -> int:
    """Store a gbdt-ens file's warm-start trees as a reference to the file they came from (files fitted before the
    forty-second session hold a copy of them in every member)."""
    from cost_model.learned.gbdt_ensemble import GbdtEnsembleTilePredictor, link_start
    from cost_model.learned.tpugraphs import DatasetError

    output = args.output or args.model
    if _missing_output_folder(output, "-o"):
        return 2
    try:
        start = GbdtEnsembleTilePredictor.load(args.start)
        ensemble = GbdtEnsembleTilePredictor.load(args.model)
    except DatasetError as error:
        print(f"compiler-opt: error: costmodel link-start: {error}", file=sys.stderr)
        return 1
    try:
        link_start(ensemble, start)
    except ValueError as error:
        print(f"compiler-opt: error: costmodel link-start: {args.model} is not fitted on top of {args.start}: {error}", file=sys.stderr)
        return 1
    before = os.path.getsize(args.model)
    ensemble.save(output, link_starts=True)
    print(f"{output}: {before / 1e6:.1f} MB -> {os.path.getsize(output) / 1e6:.1f} MB; its first trees are read from {args.start}")
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from cost_model.learned.train import evaluate_saved

    if _test_fraction_error(args, "evaluate"):
        return 2
    report = evaluate_saved(args.model, args.data, split=args.split, seed=args.seed, test_fraction=args.test_fraction,
                            code_features=args.code_features)
    print(json.dumps(report, indent=2))
    return 0


def autotune_model(model: str, output: str, *, cost_model: str | None = None, budget: int = 200, top_k: int | None = None, extra_k: int | None = None,
                   cache_path: str | None = None, seed: int = 0, progress: bool = False, finetune_steps: int = 0,
                   save_model: str | None = None, ranker: str | None = None, prefilter: float | None = None,
                   module: int | None = None, skipped: dict[str, str] | None = None, max_gflop: float | None = None) -> list[Any]:
    """Load `model`, tune its tile kernels (see passes.autotune.tile) with the `ranker` (gnn, gbdt
    or gbdt-ens; None: the one `cost_model`'s suffix names, else gbdt-ens; `cost_model` its file,
    None: the packaged one), write the result to `output`. Ops whose element types the tile kernels do
    not build (integers, complex, fp8, operands of two types) and kernels too large to measure on this
    host are left untuned and, given `skipped`, named there with the reason."""
    import graph_ir
    from cost_model.learned.predictor import load_tile_ranker, packaged_type_ranker, tile_ranker_for
    from cost_model.measure.tile.collect import tile_harness
    from cost_model.profiling.cache import ProfileCache
    from passes.autotune.tile import TILE_EXTRA_K, TILE_MAX_GFLOP, TILE_PREFILTER, TILE_TOP_K, TileTuner, tvm_threads

    from passes import run_pipeline

    graph = graph_ir.load(model, module)
    graph = run_pipeline(graph, "shape-infer").graph  # kernel shapes come from value types
    kind = tile_ranker_for(cost_model, ranker)
    predictor = load_tile_ranker(kind, cost_model)
    # the package's rankers fitted on other element types serve the packaged default only, not a ranker the user chose
    type_rankers = packaged_type_ranker if cost_model is None and kind == "gbdt-ens" else None
    with ProfileCache(cache_path) as cache:
        harness = tile_harness(cache, threads=tvm_threads(), retest_fraction=0.0, seed=seed)
        tuner = TileTuner(predictor, harness, budget=budget, top_k=TILE_TOP_K if top_k is None else top_k, seed=seed, finetune_steps=finetune_steps,
                          extra_k=TILE_EXTRA_K if extra_k is None else extra_k, prefilter=TILE_PREFILTER if prefilter is None else prefilter,
                          type_rankers=type_rankers, max_gflop=TILE_MAX_GFLOP if max_gflop is None else max_gflop)
        tunings = tuner.tune_graph(graph, progress=progress)
        if skipped is not None:
            skipped.update(tuner.skipped)
    graph.verify()
    graph_ir.save(graph, output)
    if save_model:
        predictor.save(save_model, extra={"finetuned_on": os.path.basename(model)})
    return tunings


def autotune_fusion_model(model: str, output: str, *, cost_model: str | None = None, budget: int = 100, top_k: int = 10,
                          cache_path: str | None = None, seed: int = 0, progress: bool = False, ranker: str | None = None,
                          module: int | None = None) -> Any:
    """Load the HLO or ONNX model `model`, tune its fusion groups (passes.autotune.fusion) with the
    `ranker` (additive, the default, or gnn; `cost_model` its file, None: the packaged one), write `output`."""
    import graph_ir
    from cost_model.learned.predictor import load_fusion_ranker
    from cost_model.profiling.cache import ProfileCache
    from passes.autotune.fusion import FusionTuner, fusion_harness

    if not model.endswith(".onnx"):
        # XLA timing setup (sync dispatch, one thread) before loading creates JAX's CPU client;
        # ONNX models run on onnxruntime and leave JAX alone.
        from cost_model.measure.xla_timing import configure_xla_timing

        configure_xla_timing()
    # StableHLO is lowered to HLO on load (XLA's converter): the tuner times groups of HLO
    # instructions, and HLO is written back as StableHLO when the output is .mlir.
    graph = graph_ir.load(model, module, target_format="hlo" if model.endswith(".mlir") else None)
    predictor = load_fusion_ranker(cost_model, ranker)
    with ProfileCache(cache_path) as cache:
        tuning = FusionTuner(predictor, fusion_harness(cache, seed=seed), budget=budget, top_k=top_k, seed=seed).tune(graph, progress=progress)
    graph.verify()
    graph_ir.save(graph, output)
    return tuning


def _cmd_autotune(args: argparse.Namespace) -> int:
    from graph_ir.io.formats import check_writable_path

    for flag, value in (("--top-k", args.top_k), ("--budget", args.budget)):
        if value is not None and value < 1:
            print(f"compiler-opt: error: autotune {flag} must be >= 1, got {value}", file=sys.stderr)
            return 2
    check_writable_path(args.output)  # before minutes of measuring, not after
    if _missing_output_folder(getattr(args, "save_model", None), "--save-model"):
        return 2
    if args.task == "fusion":
        if args.ranker in ("gbdt", "gbdt-ens"):
            print("compiler-opt: error: autotune --task fusion ranks with the additive model (--ranker additive, the default) "
                  "or the GraphSAGE layout model (--ranker gnn)", file=sys.stderr)
            return 2
        if args.extra_k is not None or args.prefilter is not None or args.max_gflop is not None:
            flag = "--extra-k" if args.extra_k is not None else "--prefilter" if args.prefilter is not None else "--max-gflop"
            print(f"compiler-opt: error: autotune {flag} is for --task tile (the fusion tuner measures its --top-k)", file=sys.stderr)
            return 2
        t = autotune_fusion_model(args.model, args.output, cost_model=args.cost_model, budget=args.budget or 100, top_k=args.top_k or 10,
                                  cache_path=args.cache, seed=args.seed, progress=not args.no_progress, ranker=args.ranker,
                                  module=args.module)
        print(f"autotune fusion: {len(t.candidates)} candidates ranked, {t.outcome.measurements} measured; best {t.outcome.best_seconds * 1e6:.1f} us "
              f"vs default fusion {t.default_seconds * 1e6:.1f} us ({t.speedup_over_default:.2f}x), {t.groups} fused groups, "
              f"outputs match the original graph; written to {args.output}")
        return 0
    if args.ranker == "additive":
        print("compiler-opt: error: autotune --task tile: --ranker additive ranks fusions; tiles take gnn, gbdt or gbdt-ens", file=sys.stderr)
        return 2
    if args.extra_k is not None and args.extra_k < 0:
        print(f"compiler-opt: error: autotune --extra-k must be >= 0, got {args.extra_k}", file=sys.stderr)
        return 2
    if args.prefilter is not None and not 0.0 < args.prefilter <= 1.0:
        print(f"compiler-opt: error: autotune --prefilter must be a fraction in (0, 1], got {args.prefilter:g}", file=sys.stderr)
        return 2
    if args.max_gflop is not None and not args.max_gflop > 0:
        print(f"compiler-opt: error: autotune --max-gflop must be positive, got {args.max_gflop:g}", file=sys.stderr)
        return 2
    skipped: dict[str, str] = {}
    tunings = autotune_model(args.model, args.output, cost_model=args.cost_model, budget=args.budget or 200, top_k=args.top_k, extra_k=args.extra_k,
                             cache_path=args.cache, seed=args.seed, progress=not args.no_progress, finetune_steps=args.finetune,
                             save_model=args.save_model, ranker=args.ranker, prefilter=args.prefilter, module=args.module, skipped=skipped,
                             max_gflop=args.max_gflop)
    for t in tunings:
        gate = (f" (+{t.outcome.extra_measured}: the top {t.outcome.measurements - t.outcome.extra_measured} measured disagreed with the ranker, "
                f"tau {t.outcome.agreement:.2f})") if t.outcome.extra_measured else ""
        print(f"{t.spec.signature}: {t.outcome.best_seconds * 1e6:.1f} us, {t.outcome.measurements} of {len(t.outcome.predicted)} candidates measured{gate}, "
              f"{len(t.nodes)} node(s); ranking {t.rank_s:.1f} s{f' ({t.ranked_as})' if t.ranked_as else ''}, measuring {t.measure_s:.1f} s")
    for signature, why in skipped.items():
        print(f"{signature}: not tuned: {why}")
    left = f", {len(skipped)} left untuned (above)" if skipped else ""
    print(f"autotune: {len(tunings)} kernels tuned{left}, written to {args.output}")
    return 0


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register `costmodel` (collect/train/evaluate) and `autotune` on the CLI's subparsers."""
    cm = sub.add_parser("costmodel", parents=[common], help="learned kernel cost model: collect data, train, evaluate")
    cm_sub = cm.add_subparsers(dest="costmodel_command", metavar="STEP", required=True)

    collect = cm_sub.add_parser("collect", parents=[common], help="measure kernels x configs on this machine into TpuGraphs-style .npz files")
    collect.add_argument("--task", choices=("tile", "fusion"), required=True)
    collect.add_argument("--out", required=True, metavar="DIR", help="dataset folder (one .npz per kernel/graph, dataset.json)")
    collect.add_argument("--cache", metavar="FILE.sqlite", help="measurement cache (default DIR/measurements.sqlite); reruns resume from it")
    collect.add_argument("--configs", type=int, default=50, help="configurations per kernel/graph (default 50)")
    collect.add_argument("--seed", type=int, default=0)
    collect.add_argument("--repeats", type=int, default=0, help="timed rounds per config (default: tile the timing protocol's, fusion 31)")
    collect.add_argument("--timing-protocol", choices=("long", "short"), default=None,
                         help="tile: long (default since the 23rd session: >= 2 ms samples, 15 rounds) or short (>= 0.2 ms samples, 5 rounds: the "
                              "datasets before it); each has its own cache rows")
    collect.add_argument("--threads", type=int, default=1, help="TVM runtime threads for tile kernels (default 1: shared machine)")
    collect.add_argument("--compile-timeout", type=finite_float, default=None, metavar="S",
                         help="tile: compile each configuration first in a child process and drop it when that takes over S seconds "
                              "(LLVM can take minutes over some unroll-512 configurations, and an in-process compile cannot be "
                              "abandoned; about twice the compile work; default: off)")
    collect.add_argument("--compile-cpus", metavar="CPU,...",
                         help="tile, with --compile-timeout: the compile child's CPUs; it compiles one configuration ahead of the "
                              "collector, so with another CPU than the timing one the extra compile costs no collection time")
    collect.add_argument("--code-cache", metavar="DIR",
                         help="tile, with --compile-timeout: write each kernel's compiled-code feature file (bench_tile_code_features.py's "
                              "cache) from the compile child's assembly, so no fill compiles it again")
    collect.add_argument("--max-kernels", type=int, default=0, metavar="N", help="tile: a seeded random subset of N kernels (0: all)")
    collect.add_argument("--max-flops", type=finite_float, default=8e6, help="tile: shapes scaled down to at most this many FLOPs")
    collect.add_argument("--synthetic", type=int, default=0, metavar="N",
                         help="tile: N random kernel shapes (cost_model/measure/tile/synthetic.py) instead of the suite's; "
                              "ignored when DIR already lists its kernels (kernels.json)")
    collect.add_argument("--synthetic-seed", type=int, metavar="S", help="tile: the seed of the --synthetic shapes (default --seed)")
    collect.add_argument("--dtype", default="float32", choices=("float32", "float64", "bfloat16", "float16"),
                         help="tile: the kernels' element type, one per dataset (bf16 / f16 kernels sum in float32, as XLA:CPU does)")
    collect.add_argument("--synthetic-kinds", metavar="KIND=W,...",
                         help="tile: the --synthetic kind mix as integer weights, unnamed kinds 0 (default "
                              "matmul=4,batch_matmul=1,conv2d_nhwc=2,conv2d_nchw=1,depthwise_nhwc=1,reduce=1,ew_reduce=1)")
    collect.add_argument("--synthetic-single-row", type=finite_float, default=0.0, metavar="F",
                         help="tile: the share of --synthetic reductions drawn as one long row, (1, cols) (default 0: about 1%% "
                              "of them are, where the suite's HLO has 18%%)")
    collect.add_argument("--hlo-dir", metavar="DIR", help=f"tile: HLO files to draw kernels from (default {DEFAULT_HLO_DIR} when present)")
    collect.add_argument("--scales", default="1,2", help="fusion: sizes of the built-in JAX programs (default 1,2)")
    collect.add_argument("--graphs", default="", metavar="NAME,...", help="fusion: only these graphs (e.g. mha@1,gru@2; default all)")
    collect.add_argument("--retest-fraction", type=finite_float, default=0.1, help="fusion: share of configs timed again in the same process (default 0.1)")
    collect.add_argument("--reference", default="mlp@1", metavar="GRAPH",
                         help="fusion: time a fixed fusion of this built-in graph after every sample and label by the median ratio "
                              "(default mlp@1; 'none': min of raw seconds)")
    collect.add_argument("--in-process", action="store_true",
                         help="fusion: measure every graph in this process instead of a fresh process per graph (noisier: process age drift)")
    collect.add_argument("--no-conv-times", action="store_true",
                         help="fusion: do not time each conv of the graphs alone afterwards (node_conv_time; `costmodel conv-times` adds it later)")
    collect.add_argument("--no-progress", action="store_true")
    collect.set_defaults(handler=_cmd_collect, file_arg=None)

    merge = cm_sub.add_parser("merge", parents=[common], help="fusion: merge referenced collections into one folder, labels in one scale")
    merge.add_argument("out", metavar="OUT", help="merged dataset folder (must not be a source)")
    merge.add_argument("sources", nargs="+", metavar="DIR", help="fusion collections with the same --reference and --seed")
    merge.add_argument("--scale-s", type=finite_float, default=None, help="seconds per reference ratio (default: the first source's scale)")
    merge.add_argument("--refeaturize", action="store_true",
                       help="recompute each graph's conv attributes (node_conv_feat) from the program rebuilt by name (files collected before they existed)")
    merge.set_defaults(handler=_cmd_merge, file_arg=None)

    conv_times = cm_sub.add_parser("conv-times", parents=[common],
                                   help="fusion: time every conv of a dataset's graphs alone through XLA and store it per node (node_conv_time)")
    conv_times.add_argument("data", metavar="DIR", help="fusion dataset folder (graphs rebuilt by name; the labels are not touched)")
    conv_times.add_argument("--cache", metavar="FILE.sqlite", help="measurement cache (default DIR/measurements.sqlite)")
    conv_times.add_argument("--repeats", type=int, default=11, help="interleaved rounds per conv (min over them; default 11)")
    conv_times.add_argument("--seed", type=int, default=0)
    conv_times.set_defaults(handler=_cmd_conv_times, file_arg="data")

    noise = cm_sub.add_parser("noise", parents=[common], help="label quality of a tile dataset: per-kernel timing noise, noisiest first")
    noise.add_argument("data", metavar="DIR")
    noise.add_argument("--top", type=int, default=20, help="rows to print (default 20)")
    noise.add_argument("--json", metavar="FILE", help="write every kernel's numbers here")
    noise.set_defaults(handler=_cmd_noise, file_arg="data")

    remeasure = cm_sub.add_parser("remeasure", parents=[common], help="time the noisiest tile kernels again into the same cache and relabel them (in place, or a copy with --out)")
    remeasure.add_argument("data", metavar="DIR")
    remeasure.add_argument("--out", metavar="NEW", help="relabel a copy made at NEW (files, not links; resumes in an earlier copy) and leave DIR as it is")
    remeasure.add_argument("--cache", metavar="FILE.sqlite", help="measurement cache (default: the relabelled folder's measurements.sqlite)")
    remeasure.add_argument("--count", type=int, default=None, metavar="N", help="at most N kernels, noisiest first (default: all not yet re-measured)")
    remeasure.add_argument("--min-score", type=finite_float, default=0.0, help="only kernels whose noise score is at least this")
    remeasure.add_argument("--repeats", type=int, default=None, help="timed rounds per config (default: those of the protocol each kernel was collected with)")
    remeasure.add_argument("--threads", type=int, default=1)
    remeasure.add_argument("--seed", type=int, default=0)
    remeasure.add_argument("--max-load", type=finite_float, default=None, metavar="L", help="wait for the 1-minute load average to drop below L before each kernel")
    remeasure.add_argument("--max-wait", type=finite_float, default=600.0, metavar="S", help="stop (resumable) after waiting S seconds for a quiet machine")
    remeasure.add_argument("--no-progress", action="store_true")
    remeasure.set_defaults(handler=_cmd_remeasure, file_arg="data")

    train = cm_sub.add_parser("train", parents=[common], help="train the GraphSAGE cost model on a dataset folder")
    train.add_argument("data", metavar="DIR")
    train.add_argument("-o", "--output", required=True, metavar="MODEL", help="gnn: a .pt checkpoint; gbdt: an XGBoost .ubj model; gbdt-ens, additive: a .json file")
    train.add_argument("--model", choices=("gnn", "gbdt", "gbdt-ens", "additive"), default="gnn",
                       help="gnn: the GraphSAGE model (default); gbdt: XGBoost's pairwise rank objective on flat features, a tile ranker for autotune --ranker gbdt; "
                            "gbdt-ens: XGBoost tile rankers z-scored per kernel and summed, a .json file (autotune --ranker gbdt-ens, the tile default; members and depth: "
                            "--gbdt-members, --gbdt-depth); "
                            "additive: fusion datasets, seconds as a fitted sum of per-call terms and the roofline step time (a .json file, autotune --task fusion's default ranker)")
    train.add_argument("--code-features", metavar="CACHE", help="gbdt-ens: also the compiled-code features of each configuration, read from this cache "
                                                               "(benchmarks/bench_tile_code_features.py); the autotuner then compiles every candidate to rank it")
    train.add_argument("--extra-data", action="append", metavar="DIR",
                       help="gnn, gbdt, gbdt-ens: another tile dataset folder whose every kernel joins the training side (repeatable; e.g. "
                            "`costmodel collect --task tile --synthetic N`)")
    train.add_argument("--extra-code-features", action="append", metavar="CACHE",
                       help="gbdt-ens with --code-features: the code feature cache of each --extra-data, in order")
    train.add_argument("--code-feature-set", default="s16", choices=("s16", "s16+z", "nest", "nest+z", "s18", "s18+z", "nest18", "nest18+z"),
                       help="gbdt-ens with --code-features: s16 = the 35 counts of the sixteenth session (the default); nest = + the whole loop nest "
                            "(per level trip counts and bodies); s18 / nest18 = the same with the loop columns (loops, loop depth, innermost "
                            "bodies) read from natural loops, not text ranges; +z = every column also as its z-score over the kernel's candidates")
    train.add_argument("--warm-from", metavar="FILE",
                       help="gbdt-ens: continue boosting from this ranker file's trees (same members and code features), "
                            "e.g. the shipped one fitted on another CPU")
    train.add_argument("--link-warm-start", action="store_true",
                       help="gbdt-ens with --warm-from: store the warm start's trees as a reference to that file (its name relative to "
                            "the output, and a checksum) instead of a copy; both files must then travel together (how the package's "
                            "host files are stored)")
    train.add_argument("--rerank-top", type=int, default=0, metavar="K",
                       help="gbdt-ens: add a pairwise re-ranker of the ensemble's top K candidates, fitted on the ensemble's cross-fitted "
                            "top K of every training kernel (tile_cascade; about 5 fits instead of 1; default 0: none)")
    train.add_argument("--gbdt-members", metavar="OBJ,...",
                       help="gbdt-ens: its XGBoost members, comma-separated: rank (pairwise over all pairs of a kernel's configurations), "
                            "ndcg (LambdaMART: the top of each kernel's list weighted most) and/or relative (log runtime over the kernel's median), "
                            "each optionally :WEIGHT in the z-scored sum (default 1); a name given again adds another model seed (default rank,ndcg:0.5; "
                            "sessions 19-40 rank; until the nineteenth session rank,relative at depth 6)")
    train.add_argument("--gbdt-kind-weights", metavar="KIND=W1,W2;...",
                       help="gbdt-ens: other member weights for kernels of some kinds, one per member in order, e.g. "
                            "'conv2d_nchw=1,0;conv2d_nhwc=1,0' ranks convolutions by the first member alone (default: none; a "
                            "forty-first session test of that example failed, RESULTS.md (i))")
    train.add_argument("--gbdt-depth", type=int, metavar="D", help="gbdt-ens: the members' tree depth (default 10); gbdt: its tree depth (default 6)")
    train.add_argument("--loss", choices=("mse", "mse_rel", "hinge", "logistic", "listmle"), default="listmle")
    train.add_argument("--mse-weight", type=non_negative_float, metavar="W",
                       help="gnn with a rank loss: W x the MSE on log runtime is added, keeping predictions in seconds (default 0.05; "
                            "the shipped tile_model.pt: 1, since the twentieth session, for --costs learned)")
    train.add_argument("--additive-loss", choices=("l2", "l1"), default="l2", help="additive: squared (NNLS) or absolute relative error (IRLS)")
    train.add_argument("--additive-signed-terms", default="conv_nodes", metavar="TERM,...",
                       help="additive: terms whose weight may be negative in the otherwise non-negative fit (default conv_nodes: the per-conv "
                            "offset of the measured conv seconds; '' for every weight >= 0, the form before the twelfth session's part 2)")
    train.add_argument("--additive-xla-terms", default="", metavar="TERM,...",
                       help="additive: XLA call counts added to the terms (fusion_xla_terms.XLA_TERM_NAMES without the xla_ prefix, e.g. "
                            "ynn_reduce_fusions; default none); read from --xla-calls; the autotuner then compiles every candidate's calls to rank it")
    train.add_argument("--additive-terms", default="", metavar="TERM,...",
                       help="additive: terms outside the default form added to it (fusion_terms: kernels_pow1_5, the calls to the power 1.5; "
                            "the buffer size terms)")
    train.add_argument("--xla-calls", metavar="CACHE", help="additive: the XLA call cache of the folder's configurations (benchmarks/collect_fusion_xla.py)")
    train.add_argument("--epochs", type=int, default=60)
    train.add_argument("--hidden", type=int, default=64)
    train.add_argument("--layers", type=int, default=3)
    train.add_argument("--pooling", choices=("mean", "max", "mean+max", "attention"), default="mean+max")
    train.add_argument("--lr", type=finite_float, default=2e-3)
    train.add_argument("--split", choices=("random", "program", "all"), default="random",
                       help="which kernels train: random / program (whole programs held out for the report), all (tile rankers: every kernel, no test score)")
    train.add_argument("--test-fraction", type=finite_float, default=0.2)
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--threads", type=int, default=1)
    train.add_argument("--residual", action="store_true",
                       help="gnn on a fusion dataset: learn log(runtime / roofline_s), the configuration's fusion terms joined before the MLP")
    train.set_defaults(handler=_cmd_train, file_arg="data")

    link = cm_sub.add_parser("link-start", parents=[common],
                             help="gbdt-ens: store a ranker file's warm-start trees as a reference to the file they came from, not a copy")
    link.add_argument("model", metavar="FILE", help="a gbdt-ens .json file fitted with --warm-from START")
    link.add_argument("--start", required=True, metavar="START", help="the gbdt-ens file its boosting started from")
    link.add_argument("-o", "--output", metavar="OUT", help="where to write it (default: FILE itself, replaced atomically)")
    link.set_defaults(handler=_cmd_link_start, file_arg="model")

    blend = cm_sub.add_parser("blend", parents=[common],
                              help="gbdt-ens: several ranker files as one (each member z-scored, at its weight times its file's)")
    blend.add_argument("files", nargs="+", metavar="FILE[:WEIGHT]", help="gbdt-ens .json files reading the same code features (weight default 1)")
    blend.add_argument("-o", "--output", required=True, metavar="OUT", help="the blended ranker's .json")
    blend.add_argument("--copy", action="store_true", help="store every member's trees in OUT (default: checked references to FILEs, "
                                                          "which must then stay beside OUT or ship in the package)")
    blend.set_defaults(handler=_cmd_blend, file_arg="output")

    evaluate = cm_sub.add_parser("evaluate", parents=[common], help="metrics of a trained model on a dataset's test split")
    evaluate.add_argument("model", metavar="MODEL", help="a .pt checkpoint, a .json additive fusion model, or a tile ranker (.ubj gbdt, .json gbdt-ens)")
    evaluate.add_argument("data", metavar="DIR")
    evaluate.add_argument("--code-features", metavar="CACHE",
                          help="a tile ranker that reads compiled-code features (the shipped tile_gbdt_ens.json does): DIR's code feature cache")
    evaluate.add_argument("--split", choices=("random", "program", "all"), default="random")
    evaluate.add_argument("--test-fraction", type=finite_float, default=0.2)
    evaluate.add_argument("--seed", type=int, default=0)
    evaluate.set_defaults(handler=_cmd_evaluate, file_arg="model")

    tune = sub.add_parser("autotune", parents=[common], help="pick tile sizes / fusions with the learned model, measuring only the top-k")
    tune.add_argument("model", metavar="MODEL", help="model file (any importable format)")
    tune.add_argument("-o", "--output", required=True, metavar="OUT")
    tune.add_argument("--module", type=int, metavar="N", help="which module of an HLO file holding several (0-based)")
    tune.add_argument("--task", choices=("tile", "fusion"), required=True,
                      help="tile: TVM tile configs of dot/conv/reduce kernels; fusion: fusion groups of an HLO graph (run on XLA)")
    tune.add_argument("--cost-model", metavar="MODEL", help="trained cost model (gnn: .pt, gbdt: .ubj, gbdt-ens: .json; default: the one shipped in the package for the task and ranker)")
    tune.add_argument("--ranker", choices=("gnn", "gbdt", "gbdt-ens", "additive"), default=None,
                      help="tile: rank candidates with the GraphSAGE model (gnn), the XGBoost rank model on flat features (gbdt) or that model "
                           "and a per-kernel relative regression together (gbdt-ens; the default, or what --cost-model's suffix names: .pt gnn, .ubj gbdt, .json gbdt-ens); "
                           "fusion: the additive model over the roofline simulator (additive, default) or the GraphSAGE layout model (gnn)")
    tune.add_argument("--budget", type=int, default=None, metavar="N",
                      help="candidates ranked by the model per kernel (tile, default 200) or graph (fusion: random legal fusions + the default one, default 100)")
    tune.add_argument("--top-k", type=int, help="candidates measured for real per kernel (tile, default 7) or graph (fusion, default 10)")
    tune.add_argument("--cache", metavar="FILE.sqlite", help="measurement cache (default: the profile cache folder)")
    tune.add_argument("--seed", type=int, default=0)
    tune.add_argument("--extra-k", type=int, default=None, metavar="N",
                      help="tile: measure N more in the ranker's order when the measured top-k disagree with its order of them "
                           "(Kendall tau < 0.2; default 0: off, as the gate failed its pre-registered test, benchmarks/RESULTS.md (i))")
    tune.add_argument("--prefilter", type=finite_float, default=None, metavar="FRACTION",
                      help="tile: the code-blind XGBoost model keeps this fraction of the candidates for a compiling ranker (gbdt-ens, which compiles "
                           "each one it ranks) to rank; default 0.75, by a pre-registered test (1: it ranks all; benchmarks/RESULTS.md (i), twenty-fifth session)")
    tune.add_argument("--max-gflop", type=finite_float, default=None, metavar="G",
                      help="tile: a kernel with more work per run is left untuned and named (default 50: an LLM's largest dots run for hours "
                           "on a CPU: the unscheduled reference, then every measured configuration 16 times)")
    tune.add_argument("--finetune", type=int, default=0, metavar="STEPS", help="tile: fine-tune the model on each kernel's top-k measurements (0: off)")
    tune.add_argument("--save-model", metavar="MODEL", help="write the (fine-tuned) ranker here (gnn: .pt, gbdt: .ubj, gbdt-ens: .json)")
    tune.add_argument("--no-progress", action="store_true")
    tune.set_defaults(handler=_cmd_autotune, file_arg="model")
