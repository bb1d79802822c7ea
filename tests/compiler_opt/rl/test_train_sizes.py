"""`compiler-opt train --paper-sizes`: suite workloads are built at their paper sizes."""

from __future__ import annotations

import argparse

from compiler_opt.cli.train_lib import add_train_parser, config_from_args
from compiler_opt.rl import load_graph
from compiler_opt.workloads import build_workload
from graph_ir.graph import Graph
from passes.fusion.defaults import inline_cheap_calls


def _output_bytes(graph: Graph) -> int:
    return sum((out.nbytes() or 0) for node in graph.nodes for out in node.outputs if out is not None)


def test_paper_sizes_flag_reaches_the_config() -> None:
    parser = argparse.ArgumentParser()
    add_train_parser(parser.add_subparsers(), argparse.ArgumentParser(add_help=False))
    assert config_from_args(parser.parse_args(["train", "--workloads", "rnnlm-2", "--paper-sizes"])).paper_sizes
    assert not config_from_args(parser.parse_args(["train", "--workloads", "rnnlm-2"])).paper_sizes


def test_ratio_and_replay_flags_reach_the_config() -> None:
    parser = argparse.ArgumentParser()
    add_train_parser(parser.add_subparsers(), argparse.ArgumentParser(add_help=False))
    default = config_from_args(parser.parse_args(["train", "--workloads", "rnnlm-2"]))
    assert default.ratio == "decision" and not default.replay_best
    chosen = config_from_args(parser.parse_args(["train", "--workloads", "rnnlm-2", "--ratio", "episode", "--replay-best"]))
    assert chosen.ratio == "episode" and chosen.replay_best


def test_load_graph_builds_the_paper_size_workload() -> None:
    name, paper = load_graph("wavenet-2x18:inference", paper=True)
    _, small = load_graph("wavenet-2x18:inference")
    assert name == "wavenet-2x18:inference"
    expected = build_workload("wavenet-2x18", "inference", paper=True)
    inlined = inline_cheap_calls(expected)
    # Same layers, the paper's (longer, wider) tensors; cheap calls inlined as `bench` does.
    assert inlined > 0 and len(paper) == len(expected)
    assert _output_bytes(paper) == _output_bytes(expected)
    assert _output_bytes(paper) > _output_bytes(small)
