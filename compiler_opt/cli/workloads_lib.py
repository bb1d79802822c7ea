"""`compiler-opt workloads`: the workload registry as a table or JSON (nothing is built)."""

from __future__ import annotations

from typing import Any

from compiler_opt.cli._render import Table, human_count

__all__ = ["describe_workloads", "workloads_tables"]


def describe_workloads() -> list[dict[str, Any]]:
    """One record per workload; `nodes` per mode is known only once that mode was built (cached)."""
    from compiler_opt.workloads.registry import cached_node_count, list_workloads

    records = []
    for workload in list_workloads():
        records.append(
            {
                "name": workload.name,
                "family": workload.family,
                "modes": list(workload.modes),
                "source_format": workload.source_format,
                "export_formats": list(workload.sources),
                "default_sizes": {**workload.default_sizes, **workload.fixed_sizes},
                "paper_sizes": dict(workload.paper_sizes),
                "paper_source": workload.paper_source,
                "nodes": {mode: cached_node_count(workload.name, mode) for mode in workload.modes},
                "slow": workload.slow,
                "description": workload.description,
            }
        )
    return records


def _sizes_text(sizes: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in sizes.items())


def workloads_tables(records: list[dict[str, Any]]) -> list[Table]:
    rows = []
    for record in records:
        nodes = record["nodes"]
        rows.append(
            [
                record["name"],
                record["family"],
                ",".join(record["modes"]),
                human_count(nodes["train"]) if nodes.get("train") else "-",
                human_count(nodes["inference"]) if nodes.get("inference") else "-",
                _sizes_text(record["default_sizes"]),
            ]
        )
    title = "workloads (nodes: from the cache, '-' until first built; build with `compiler-opt simulate NAME[:MODE]`)"
    return [Table(title, ["name", "family", "modes", "train nodes", "inference nodes", "default sizes"], rows, numeric=frozenset({3, 4}))]
