"""Where code may reach: imports point down, passes go through the cost door, the CLI does no file work."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# File-format work belongs to graph_ir.io; the CLI only handles arguments and printing.
FORMAT_MODULES = ("onnx", "tensorflow", "google.protobuf", "jaxlib", "shutil", "tempfile")
FORMAT_PREFIXES = ("graph_ir.io.onnx_", "graph_ir.io.hlo_", "graph_ir.io.tf_", "graph_ir.io.stablehlo_", "graph_ir.io.torch_")


def imports_of(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def modules_under(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def test_no_pass_reaches_into_the_simulator() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in modules_under("passes")
        for name in imports_of(path)
        if name == "cost_model.simulator" or name.startswith("cost_model.simulator.")
    ]
    assert not offenders, "passes must use the cost door (cost_model.costs):\n" + "\n".join(offenders)


def test_passes_never_import_compiler_opt() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in modules_under("passes")
        for name in imports_of(path)
        if name == "compiler_opt" or name.startswith("compiler_opt.")
    ]
    assert not offenders, "\n".join(offenders)


def test_the_cli_does_no_file_format_work() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in modules_under("compiler_opt/cli")
        for name in imports_of(path)
        if name in FORMAT_MODULES or name.split(".")[0] in ("onnx", "tensorflow", "jaxlib") or name.startswith(FORMAT_PREFIXES)
    ]
    assert not offenders, "file formats are graph_ir.io's job:\n" + "\n".join(offenders)


def test_lower_packages_do_not_import_upper_ones() -> None:
    order = ["graph_ir", "cost_model", "passes", "compiler_opt"]
    offenders = []
    for level, package in enumerate(order):
        above = tuple(order[level + 1 :])
        for path in modules_under(package):
            for name in imports_of(path):
                if name.split(".")[0] in above:
                    offenders.append(f"{path.relative_to(ROOT)}: {name}")
    assert not offenders, "imports must point down (graph_ir -> cost_model -> passes -> compiler_opt):\n" + "\n".join(offenders)
