"""Leave one program out: the additive fusion model's error on every program of a fusion dataset.

    PYTHONPATH=. python benchmarks/bench_fusion_lopo.py out/fusion_s8 [--json benchmarks/results/fusion_lopo.json]

The program split of bench_costmodel.py holds out a random 4 of the 15 programs per seed, so some
programs are never held out and a mean over 8 test graphs hides which program fails. Here every
program is held out once: the model (`AdditiveFusionModel`, its signed least-squares form, the
model without the op-class node counts of `fusion_terms.OP_CLASSES`, and its l1 fit) is
fitted on the other programs' graphs (all scales) and scored on the held-out program's graphs:
MAPE (configurations >= 5 us), Kendall tau, top-1 slowdown, the level |median(pred / label) - 1|
and the MAPE with the level removed; beside it the roofline simulator scaled by one constant
fitted on the same training graphs (the simplest learned correction). Prints a markdown table,
one row per held-out graph, and the means.

`--held-out mlp,conv,...` (or `first`: the fifteen programs of `fusion_s8`,
`fusion_graphs.FIRST_PROGRAMS`) holds out only those programs, one at a time, still training on
every other program of the folder (tenth session: the old programs scored with the new ones in
training). Beside the mean over every held-out graph it prints the mean over the first fifteen
programs' graphs and over the grouped / depthwise conv programs' (`GROUPED_PROGRAMS` + dw_sep).
`--variants s11` is the eleventh session's terms (no measured conv terms; twelfth session:
`measured` = the tenth session's terms + the measured conv seconds instead of the grouped-conv
counts; `mgrouped` = the eleventh session's terms + the grouped convs' measured seconds only; twelfth
session, part 2: the "additive" row is the shipped form, `conv_nodes` of either sign
(`fusion_additive.CONV_OFFSET`); `s12` is every weight >= 0, the form shipped before it (`l1`
its l1 fit), `offsetl1` the shipped form's l1 fit; part 3: the means over the 33 programs before
`SECOND_KIND_PROGRAMS` and over those four, so a folder with them compares with one without;
thirteenth session: the mean over `THIRD_KIND_PROGRAMS`, `mape_third_kind`, and the 33 old
programs' mean leaves both later tuples out).
`--train-programs first` drops every other program from the folder first (the ninth
session's setting on a merged folder). `--xgboost` adds the XGBoost residual model.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results" / "fusion_lopo.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="fusion dataset folder (layout-form .npz with meta.roofline_s)")
    parser.add_argument("--json", default=str(RESULTS))
    parser.add_argument("--held-out", default="", metavar="P,...|first", help="hold out only these programs (default: every program)")
    parser.add_argument("--train-programs", default="", metavar="P,...|first", help="use only these programs of the folder (default: all)")
    parser.add_argument("--xgboost", action="store_true", help="also the XGBoost residual model (GbdtBaseline objective=residual, depth 4)")
    parser.add_argument("--variants", default="signed,base,l1", help="additive variants beside the default: signed, base (no op-class "
                        "counts), l1, s9 (the ninth session's terms, without the tenth session's op classes and class MB), s9l1, nomb (without the class MB)")
    args = parser.parse_args(argv)

    def programs_of(text: str) -> set[str] | None:
        from compiler_opt.costmodel.fusion_graphs import FIRST_PROGRAMS

        return None if not text else set(FIRST_PROGRAMS) if text == "first" else set(text.split(","))

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_costmodel import level_metrics

    from cost_model.learned.fusion_additive import CONV_OFFSET, AdditiveFusionModel
    from compiler_opt.costmodel.fusion_graphs import FIRST_PROGRAMS, GROUPED_PROGRAMS, SECOND_KIND_PROGRAMS, THIRD_KIND_PROGRAMS
    from cost_model.learned.fusion_terms import BASE_TERMS, CLASS_MB, MEASURED_CONV_TERMS, S9_TERMS, S10_TERMS, S11_TERMS, SHIPPED_TERMS, TERM_NAMES, record_terms
    from cost_model.learned.metrics import kernel_metrics
    from cost_model.learned.tpugraphs import load_dir

    records = load_dir(args.data)
    keep = programs_of(args.train_programs)
    records = [r for r in records if keep is None or r.program in keep]
    terms = {r.name: record_terms(r) for r in records}
    roof = TERM_NAMES.index("roofline_s")
    held = programs_of(args.held_out)
    programs = sorted(p for p in {r.program for r in records} if held is None or p in held)
    variants = {"signed": ("additive, signed weights", {"nonnegative": False}), "base": ("additive without op-class node counts", {"terms": BASE_TERMS}),
                "l1": ("additive, l1 fit", {"loss": "l1"}), "s9": ("additive, ninth-session terms", {"terms": S9_TERMS}),
                "nomb": ("additive without the op-class MB", {"terms": tuple(t for t in SHIPPED_TERMS if t not in CLASS_MB)}),
                "s9l1": ("additive, ninth-session terms, l1 fit", {"terms": S9_TERMS, "loss": "l1"}),
                "s10": ("additive, tenth-session terms", {"terms": S10_TERMS}), "s10l1": ("additive, tenth-session terms, l1 fit", {"terms": S10_TERMS, "loss": "l1"}),
                "s11": ("additive, eleventh-session terms", {"terms": S11_TERMS}), "s11l1": ("additive, eleventh-session terms, l1 fit", {"terms": S11_TERMS, "loss": "l1"}),
                "measured": ("additive, tenth-session terms + measured convs", {"terms": S10_TERMS[:-1] + MEASURED_CONV_TERMS + ("roofline_s",)}),
                "mgrouped": ("additive, eleventh-session terms + measured grouped convs", {"terms": S11_TERMS[:-1] + ("measured_grouped_conv_s", "roofline_s")}),
                "s12": ("additive, every weight >= 0 (twelfth session)", {}),
                "offsetl1": ("additive, conv offset, l1 fit", {"loss": "l1", "signed_terms": CONV_OFFSET})}
    rows = []
    for program in programs:
        train = [r for r in records if r.program != program]
        test = [r for r in records if r.program == program]
        models = {"additive": AdditiveFusionModel(signed_terms=CONV_OFFSET).fit(train)}  # the shipped form
        for key in [v for v in args.variants.split(",") if v]:
            name, options = variants[key]
            models[name] = AdditiveFusionModel(**options).fit(train)
        if args.xgboost:
            from cost_model.learned.baselines import GbdtBaseline

            models["XGBoost residual"] = GbdtBaseline(seed=0, objective="residual", depth=4).fit(train)
        # roofline x c, c minimising the relative error on the training graphs: c = sum(r) / sum(r^2), r = roofline / label
        ratio = np.concatenate([terms[r.name][:, roof] / r.config_runtime for r in train])
        scale = float(ratio.sum() / (ratio**2).sum())
        for record in test:
            preds = {name: m.predict(record) for name, m in models.items()} | {"roofline x constant": np.log(scale * terms[record.name][:, roof])}
            for method, pred in preds.items():
                rows.append({"program": program, "graph": record.name, "method": method, "configs": record.num_configs}
                            | kernel_metrics(pred, record.config_runtime) | level_metrics(pred, record.config_runtime))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    print(f"leave one program out on {Path(args.data).name}: {len(programs)} programs held out one at a time, "
          f"{len({r.program for r in records})} programs / {len(records)} graphs in the folder")
    print("| held-out graph (configs) | " + " | ".join(f"{m}: MAPE / level / tau" for m in methods) + " |")
    print("|---|" + "---|" * len(methods))
    for record in [r for r in records if r.program in programs]:
        cells = []
        for method in methods:
            (row,) = [r for r in rows if r["graph"] == record.name and r["method"] == method]
            cells.append(f"{row['mape']:.1%} / {row['level_error']:.1%} / {row['kendall']:.3f}")
        print(f"| {record.name} ({record.num_configs}) | " + " | ".join(cells) + " |")
    summary = {}
    for method in methods:
        mine = [r for r in rows if r["method"] == method]
        summary[method] = {k: float(np.mean([r[k] for r in mine])) for k in ("mape", "kendall", "top1", "top5", "level_error", "mape_level_removed")}
        summary[method]["graphs_mape_over_5pct"] = sum(r["mape"] > 0.05 for r in mine)
        grouped_programs = set(GROUPED_PROGRAMS) | {"dw_sep"}
        for key, subset in (("first", [r for r in mine if r["program"] in FIRST_PROGRAMS]), ("grouped", [r for r in mine if r["program"] in grouped_programs]),
                            ("old33", [r for r in mine if r["program"] not in SECOND_KIND_PROGRAMS + THIRD_KIND_PROGRAMS]),
                            ("second_kind", [r for r in mine if r["program"] in SECOND_KIND_PROGRAMS]),
                            ("third_kind", [r for r in mine if r["program"] in THIRD_KIND_PROGRAMS])):
            summary[method][f"mape_{key}"] = float(np.mean([r["mape"] for r in subset])) if subset else float("nan")
            summary[method][f"graphs_{key}"] = len(subset)
        s = summary[method]
        print(f"| **mean, {method}** | MAPE {s['mape']:.1%}, level {s['level_error']:.1%}, level removed {s['mape_level_removed']:.1%}, "
              f"tau {s['kendall']:.3f}, top-1 {s['top1']:.1%}; {s['graphs_mape_over_5pct']} of {len(mine)} graphs over 5%; "
              f"first fifteen programs {s['mape_first']:.1%} ({s['graphs_first']} graphs), grouped conv programs {s['mape_grouped']:.1%} "
              f"({s['graphs_grouped']} graphs); the 33 programs before part 3 {s['mape_old33']:.1%} ({s['graphs_old33']} graphs), "
              f"part 3's programs {s['mape_second_kind']:.1%} ({s['graphs_second_kind']} graphs), the thirteenth session's "
              f"{s['mape_third_kind']:.1%} ({s['graphs_third_kind']} graphs) |")
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"data": Path(args.data).name, "rows": rows, "summary": summary}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
