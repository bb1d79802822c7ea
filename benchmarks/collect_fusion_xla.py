"""Compile every distinct executable call of a fusion dataset's configurations and cache what XLA's
CPU backend made of each (seventeenth session; `cost_model.learned.fusion_xla_terms`).

    PYTHONPATH=. python benchmarks/collect_fusion_xla.py out/fusion_s13 --cache out/xla_calls.sqlite [--graphs xent@1,ln_lse@2]

XLA is set up as the collection's timing processes set it (`configure_xla_timing`: one Eigen
thread, sync dispatch) before anything compiles. Resumable: configurations already in the cache
are skipped. Prints the rate (configurations and distinct calls per second).
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="+", help="fusion dataset folders (their graphs' configurations, deduplicated)")
    parser.add_argument("--cache", required=True)
    parser.add_argument("--graphs", default="", help="comma list of graph names (default: every graph of the folders)")
    args = parser.parse_args(argv)

    from cost_model.measure.xla_timing import configure_xla_timing

    settings = configure_xla_timing()
    from compiler_opt.costmodel.fusion_graphs import fusion_graph
    from cost_model.learned.fusion_xla_terms import XlaCallCache, collect_xla_calls
    from cost_model.learned.tpugraphs import load_dir

    wanted = set(args.graphs.split(",")) - {""}
    configs: dict[str, list[str]] = {}
    for folder in args.data:
        for record in load_dir(folder):
            if not wanted or record.name in wanted:
                seen = configs.setdefault(record.name, [])
                seen += [c for c in record.config_text if c not in set(seen)]
    with XlaCallCache(args.cache) as cache:
        summary = collect_xla_calls(sorted(configs.items()), cache, build=fusion_graph)
        summary["distinct_calls_in_cache"] = len(cache.all_calls())
    summary["xla_timing"] = settings
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
