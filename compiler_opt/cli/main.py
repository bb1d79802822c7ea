"""`compiler-opt`: the command-line entry point (a thin wrapper over the *_lib modules).

Exit codes: 0 success; 2 a problem with the input, the output or the command line (one line on
stderr, `compiler-opt: error: <file>: <message>`); 1 an internal error (a bug: rerun with
--debug for the traceback); 130 interrupted.

Start-up stays fast: this module imports only the standard library; each subcommand imports
what it needs when it runs, and nothing here imports TensorFlow, JAX or PyTorch.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import traceback
from typing import Any, Callable, Sequence

from compiler_opt.cli.arg_types import finite_float

__all__ = ["build_parser", "main"]

PROG = "compiler-opt"
logger = logging.getLogger("compiler_opt.cli")


def _cmd_inspect(args: argparse.Namespace) -> int:
    from compiler_opt.cli._render import render_tables
    from compiler_opt.cli.inspect_lib import summarize_model, summary_tables

    summary = summarize_model(args.model, infer_shapes=args.infer_shapes or None, module=args.module)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        render_tables(summary_tables(summary))
    return 0


def _cmd_convert(args: argparse.Namespace) -> int:
    from compiler_opt.cli.convert_lib import convert_model

    result = convert_model(
        args.input, args.output, args.passes or "", module=args.module, devices=args.devices, costs=args.costs
    )
    print(result.summary_line())
    return 0


def _cmd_optimize(args: argparse.Namespace) -> int:
    from compiler_opt.cli.optimize_lib import OptimizeRequest, run_optimize

    request = OptimizeRequest(
        input=args.input, output=args.output, devices=args.devices, method=args.method, tasks=args.tasks,
        budget_s=args.budget, report_dir=args.report, report_json=args.report_json, check=args.check, seed=args.seed,
        opt_level=args.opt_level, input_shapes=args.input_shape or (), module=args.module,
    )
    return run_optimize(request, sys.stdout, sys.stderr)


def _cmd_passes(args: argparse.Namespace) -> int:
    from compiler_opt.cli._render import render_tables
    from compiler_opt.cli.passes_lib import describe_passes, passes_tables

    described = describe_passes()
    if args.json:
        print(json.dumps(described, indent=2))
    else:
        render_tables(passes_tables(described))
    return 0


def _cmd_workloads(args: argparse.Namespace) -> int:
    from compiler_opt.cli._render import render_tables
    from compiler_opt.cli.workloads_lib import describe_workloads, workloads_tables

    described = describe_workloads()
    if args.json:
        print(json.dumps(described, indent=2))
    else:
        render_tables(workloads_tables(described))
    return 0


def _cmd_simulate(args: argparse.Namespace) -> int:
    from compiler_opt.cli._render import render_tables
    from compiler_opt.cli.simulate_lib import parse_sizes, simulate_model, simulate_tables

    report = simulate_model(
        args.model, args.devices, decisions=args.decisions, objective=args.objective, trace=args.trace,
        plot=args.plot, sizes=parse_sizes(args.size), paper=args.paper_sizes, module=args.module,
        costs=args.costs,
        default_fusion=not args.no_default_fusion,
    )
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        render_tables(simulate_tables(report))
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from compiler_opt.cli._render import render_tables
    from compiler_opt.cli.bench_lib import BenchSpec, bench_tables, run_bench

    def split(items: list[str] | None) -> list[str]:
        return [part for item in items or [] for part in item.split(",") if part.strip()]

    spec = BenchSpec(
        workloads=split(args.workloads), methods=split(args.methods) or None, objective=args.objective,
        budget=args.budget, time_limit_s=args.time_limit, expert=args.expert, accelerators=args.accelerators,
        memory=args.memory, seed=args.seed, costs=args.costs,
        default_fusion=not args.no_default_fusion, paper_sizes=not args.default_sizes, equal_time=not args.no_equal_time,
        fusion_aware=args.fusion_aware,
    )
    if args.devices:
        spec.devices = split(args.devices)
    rows = run_bench(spec)
    if args.json:
        from graph_ir.io.atomic import atomic_path

        with atomic_path(args.json) as tmp:
            tmp.write_text(json.dumps(rows, indent=2))
    render_tables(bench_tables(rows))
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    from compiler_opt.cli._render import render_tables
    from compiler_opt.cli.train_lib import run_train, train_tables

    render_tables(train_tables(run_train(args, args.argv), args.out))
    return 0


def _common_options(*, top_level: bool) -> argparse.ArgumentParser:
    """--debug and -v, accepted before or after the subcommand.

    The subcommand copies default to SUPPRESS so they do not reset a value given before it.
    """
    common = argparse.ArgumentParser(add_help=False)
    default: Any = {} if top_level else {"default": argparse.SUPPRESS}
    common.add_argument("--debug", action="store_true", help="show the full traceback on errors", **default)
    common.add_argument(
        "-v", "--verbose", action="count", help="log progress (-v: info, -vv: debug)", **(default or {"default": 0})
    )
    return common


_DEVICES_FORMS = "4xV100, 8xA100-pcie, mcm36-ring, 2xhost (this machine, measured), a device preset, or a YAML/JSON file"


def _target_options(
    sub: argparse.ArgumentParser, *, devices: bool = True, devices_help: str = "", required: bool = False
) -> None:
    """The target options shared by convert, simulate and bench (`cost_model.costs.Target`)."""
    if devices:
        sub.add_argument("--devices", required=required, metavar="PRESET", help=devices_help)
    sub.add_argument(
        "--costs",
        default=None if devices and not required else "roofline",
        metavar="SOURCE",
        help="kernel cost source: roofline (default) | profiled (timed on this machine, for its cpu devices, e.g. --devices 2xhost) | "
        "learned (the shipped GraphSAGE tile model, for dot/conv/reduce nodes on cpu devices) | recorded (latencies stored in the model)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Inspect, convert and optimize ML compiler graphs (ONNX, TF GraphDef, XLA HLO, StableHLO; "
        "the format comes from the file extension).",
        parents=[_common_options(top_level=True)],
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    common = _common_options(top_level=False)

    inspect_p = sub.add_parser(
        "inspect", parents=[common], help="summarize a model: ops, I/O, FLOPs, parameters",
        description="Summarize a model file: node and edge counts, op histogram, inputs and outputs, "
        "FLOPs (static shapes only), parameter bytes, opset imports.",
    )
    inspect_p.add_argument("model", help="model file; the extension selects the format (.onnx, .pb, .pbtxt, .hlo, .hlo.txt, .mlir)")
    inspect_p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    inspect_p.add_argument(
        "--infer-shapes", action="store_true", help="run shape inference first (FLOPs for values the file leaves untyped; the default when any result is untyped)"
    )
    inspect_p.add_argument("--module", type=int, metavar="N", help="which module of an HLO file holding several (0-based)")
    inspect_p.set_defaults(handler=_cmd_inspect, file_arg="model")

    convert_p = sub.add_parser(
        "convert", parents=[common], help="convert a model, optionally running a pass pipeline",
        description="Import IN, run the pass pipeline, verify the graph and write OUT atomically. "
        "Formats come from the file extensions.",
    )
    convert_p.add_argument("input", metavar="IN", help="input model file")
    convert_p.add_argument("output", metavar="OUT", help="output model file (never left half-written)")
    convert_p.add_argument(
        "-p", "--passes", metavar="PIPELINE", default="",
        help="pass pipeline, e.g. 'dce,cse,shape-infer' or 'fuse{max-nodes=8}' (see `compiler-opt passes`)",
    )
    convert_p.add_argument("--module", type=int, metavar="N", help="which module of an HLO file holding several (0-based)")
    _target_options(convert_p, devices_help="target topology of the pipeline's passes (default 4xV100): " + _DEVICES_FORMS)
    convert_p.set_defaults(handler=_cmd_convert, file_arg="input")
    _add_optimize_parser(sub, common)

    passes_p = sub.add_parser("passes", parents=[common], help="list the registered passes and their options")
    passes_p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    passes_p.set_defaults(handler=_cmd_passes, file_arg=None)

    workloads_p = sub.add_parser("workloads", parents=[common], help="list the benchmark workloads (built from code on first use)")
    workloads_p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    workloads_p.set_defaults(handler=_cmd_workloads, file_arg=None)

    simulate_p = sub.add_parser(
        "simulate", parents=[common], help="simulate a model's step time, memory and transfers on a device topology",
        description="Run the execution simulator on MODEL: a model file, or a workload name with an optional mode "
        "(resnet-50, resnet-50:inference; see `compiler-opt workloads`). Decisions come from --decisions, else the "
        "graph's nodes, else everything on the fastest device. --decisions FILE is JSON "
        '{"node": {"device": "gpu1", "fusion_group": 3, "priority": 1.0}} (fields optional).',
    )
    simulate_p.add_argument("model", metavar="MODEL", help="model file or workload name[:train|inference]")
    _target_options(simulate_p, devices_help="topology (required): " + _DEVICES_FORMS, required=True)
    simulate_p.add_argument("--decisions", metavar="FILE", help="JSON {node_name: {device, fusion_group, priority}}")
    simulate_p.add_argument("--objective", choices=("latency", "throughput", "memory"), default="latency", help="which number is reported as objective_value")
    simulate_p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    simulate_p.add_argument("--trace", metavar="OUT.json", help="write the timeline as a Chrome trace (chrome://tracing, Perfetto)")
    simulate_p.add_argument("--plot", metavar="OUT.png", help="write a Gantt chart of the timeline")
    simulate_p.add_argument("--size", action="append", metavar="KEY=VALUE", help="workload size override (repeatable), e.g. --size batch=64")
    simulate_p.add_argument("--paper-sizes", action="store_true", help="workload at its paper-like sizes (see `workloads --json`), before --size")
    simulate_p.add_argument("--module", type=int, metavar="N", help="which module of an HLO file holding several (0-based)")
    simulate_p.add_argument("--no-default-fusion", action="store_true", help="simulate op by op instead of with the framework's default GPU fusion (xla-gpu for HLO, cudnn-runtime for TF/ONNX)")
    simulate_p.set_defaults(handler=_cmd_simulate, file_arg="model")

    bench_p = sub.add_parser(
        "bench", parents=[common], help="run every placement method on workloads and print the comparison table",
        description="Place each workload with each method and report the objective, its ratio to the lower bound and "
        "to the human expert, peak memory/OOM and search time, with a geometric-mean row per method. Workloads: "
        "suite names (resnet-50:train), model files, or profiled-workload JSON files (Tarnawski et al.), which run at "
        "their own accelerator count under the paper's cost models.",
    )
    bench_p.add_argument("--workloads", action="extend", nargs="+", required=True, metavar="W[,W...]", help="suite names[:mode], model files (FILE#N: module N of a multi-module HLO file), profiled JSON files (space- or comma-separated, repeatable)")
    bench_p.add_argument("--devices", action="extend", nargs="+", metavar="T[,T...]", help="topologies for suite/model workloads, space- or comma-separated (default 2xV100 4xV100 8xV100)")
    _target_options(bench_p, devices=False)
    bench_p.add_argument("--methods", action="extend", nargs="+", metavar="M[,M...]", help="placement methods (default: all; 'expert' with --expert)")
    bench_p.add_argument("--objective", choices=("latency", "throughput", "memory"), help="default: latency for suites and latency-inputs files, throughput for other profiled files")
    bench_p.add_argument("--budget", type=int, default=1000, metavar="N", help="objective evaluations for every searching method (sa, random, dp-ls; default 1000)")
    bench_p.add_argument("--time-limit", type=finite_float, default=20.0, metavar="S", help="cp-sat time limit in seconds (default 20)")
    bench_p.add_argument("--expert", metavar="FILE|DIR", help="human-expert split for profiled workloads (a DIR holds <name>_expert.json); runs as method 'expert'")
    bench_p.add_argument("--accelerators", type=int, metavar="K", help="profiled workloads: accelerator count instead of the file's maxFPGAs")
    bench_p.add_argument("--memory", type=finite_float, metavar="BYTES", help="profiled workloads: memory per accelerator instead of the file's maxSizePerFPGA")
    bench_p.add_argument("--seed", type=int, default=0, help="seed of the randomised methods")
    bench_p.add_argument("--json", metavar="OUT.json", help="also write the rows as a JSON list")
    bench_p.add_argument("--no-default-fusion", action="store_true", help="place the unfused graph instead of the framework's default GPU fusion")
    bench_p.add_argument("--fusion-aware", action="store_true", help="placement methods score the default fusion kept within each device instead of the unfused graph")
    bench_p.add_argument("--default-sizes", action="store_true", help="suite workloads at their small default sizes (default: the paper sizes)")
    bench_p.add_argument("--no-equal-time", action="store_true", help="sa/random get exactly --budget evaluations, not at least the slowest other method's wall time")
    bench_p.set_defaults(handler=_cmd_bench, file_arg=None)

    from compiler_opt.cli.train_lib import add_train_parser

    add_train_parser(sub, common).set_defaults(handler=_cmd_train, file_arg=None)

    from compiler_opt.cli.costmodel_lib import add_parsers as add_costmodel_parsers  # stdlib-only at import

    add_costmodel_parsers(sub, common)
    return parser


def _add_optimize_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    optimize_p = sub.add_parser(
        "optimize", parents=[common], help="clean up, fuse, place and schedule a model; report and check it",
        description="Import IN, clean it up (-O level), decide fusion, placement (one method or a portfolio within "
        "--budget) and schedule for --devices, print the before/after summary, write OUT atomically, and optionally "
        "an HTML report, a JSON report and a numerical check (exit 3 when outputs differ; OUT is then not written).",
    )
    optimize_p.add_argument("input", metavar="IN", help="input model file")
    optimize_p.add_argument("-o", "--output", required=True, metavar="OUT", help="output model file")
    optimize_p.add_argument("--devices", default="4xV100", metavar="PRESET", help="target topology (default 4xV100)")
    optimize_p.add_argument("--method", default="auto", metavar="NAME|auto", help="placement method, or auto (a portfolio, the best kept)")
    optimize_p.add_argument("--tasks", nargs="+", default=["placement", "fusion", "schedule"], choices=["placement", "fusion", "schedule"], help="what to decide")
    optimize_p.add_argument("--budget", type=finite_float, default=30.0, metavar="SECONDS", help="search time for --method auto, and for go its seeds and local search after the policy's answer (default 30)")
    optimize_p.add_argument("--report", metavar="DIR", help="write DIR/report.html (graph by device, timeline, tables, pass log)")
    optimize_p.add_argument("--report-json", metavar="FILE", help="write the numbers as JSON")
    optimize_p.add_argument("--check", action="store_true", help="run original and result on seeded random inputs; exit 3 when they differ")
    optimize_p.add_argument("--seed", type=int, default=0, help="seed of the random inputs and randomised methods")
    optimize_p.add_argument("-O", dest="opt_level", type=int, choices=[0, 1, 2, 3], metavar="LEVEL", help="clean-up level -O0..-O3 (default -O2)")
    optimize_p.add_argument("--input-shape", action="append", metavar="NAME:DIMS", help="static shape of an input, e.g. input:1,3,224,224 (repeatable)")
    optimize_p.add_argument("--module", type=int, metavar="N", help="which module of an HLO file holding several (0-based)")
    optimize_p.set_defaults(handler=_cmd_optimize, file_arg="input")


def _configure_logging(verbosity: int) -> None:
    """-v: INFO, -vv: DEBUG, on stderr. Without -v nothing is configured (warnings still print).

    One handler of our own on the root logger, added once and pointed at the current stderr,
    so calling main() repeatedly in one process (tests, notebooks) neither duplicates lines nor
    removes handlers that others installed.
    """
    if verbosity <= 0:
        return
    root = logging.getLogger()
    handler = next((h for h in root.handlers if getattr(h, "compiler_opt_cli", False)), None)
    if handler is None:
        handler = _CurrentStderrHandler()
        handler.compiler_opt_cli = True  # type: ignore[attr-defined]
        handler.setFormatter(logging.Formatter(f"{PROG}: %(levelname)s: %(name)s: %(message)s"))
        root.addHandler(handler)
    root.setLevel(logging.INFO if verbosity == 1 else logging.DEBUG)


class _CurrentStderrHandler(logging.StreamHandler):
    """Writes to whatever `sys.stderr` is when a record is emitted: a stream captured at setup
    may be closed by then (test runners and notebooks swap stderr between calls)."""

    @property  # type: ignore[override]
    def stream(self):  # type: ignore[no-untyped-def]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:  # type: ignore[no-untyped-def]
        pass


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def _describe_error(err: BaseException, fallback_file: str | None) -> str:
    """`<file>: <message>` for the error line."""
    if isinstance(err, OSError):
        message = err.strerror or str(err)
        filename = err.filename if err.filename is not None else fallback_file
        return f"{filename}: {message}" if filename is not None else message
    errors = sys.modules.get("graph_ir.errors")  # unloaded: err cannot be a CompilerOptError
    if errors is not None and isinstance(err, errors.CompilerOptError):
        err.with_context(file=fallback_file)
        one_line = getattr(err, "one_line", None)  # e.g. pipeline errors draw a caret diagram
        if callable(one_line):
            prefix = f"{err.file}: " if err.file else ""
            return prefix + one_line()
    return str(err)


def _is_user_error(err: BaseException) -> bool:
    if isinstance(err, OSError):
        return True
    errors = sys.modules.get("graph_ir.errors")
    if errors is None or not isinstance(err, errors.CompilerOptError):
        return False
    return not _is_pass_bug(err, errors)


def _is_pass_bug(err: BaseException, errors) -> bool:  # noqa: ANN001 - the graph_ir.errors module
    """A pass that crashed (its `PassError` wraps an exception that is not about the input) or
    left an invalid graph: a bug of ours, not of the input, so exit 1 (the message names the pass)."""
    base = sys.modules.get("passes.infra.base")
    if base is None or type(err) is not base.PassError or getattr(err, "pass_name", None) is None:
        return False
    cause = err.__cause__
    if cause is None:
        return False
    if isinstance(cause, errors.VerificationError):
        return True  # the graph verified before the pass ran
    return not isinstance(cause, (OSError, errors.CompilerOptError))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code (the console script exits with it)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        args.argv = list(sys.argv[1:] if argv is None else argv)  # provenance for `train` checkpoints
    except SystemExit as exit_:  # --help or a usage error; argparse already printed
        return exit_.code if isinstance(exit_.code, int) else 0
    if args.version:
        import compiler_opt

        print(f"{PROG} {compiler_opt.__version__}")
        return 0
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_usage(sys.stderr)
        print(f"{PROG}: error: a command is required (inspect, convert, optimize, passes, workloads, simulate, bench)", file=sys.stderr)
        return 2
    _configure_logging(args.verbose)
    fallback_file = getattr(args, args.file_arg) if args.file_arg else None
    try:
        if args.verbose > 0:
            return handler(args)
        # Quiet by default: TensorFlow/XLA/absl log from C++ straight to fd 2; -v lets them through.
        from graph_ir.io._native_log import quiet_native_stderr

        with quiet_native_stderr(logging.getLogger("compiler_opt.native")):
            return handler(args)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `compiler-opt inspect m.onnx | head`
        return 0
    except Exception as err:
        if args.debug:
            traceback.print_exc()
        line = _one_line(_describe_error(err, fallback_file))
        if _is_user_error(err):
            print(f"{PROG}: error: {line}", file=sys.stderr)
            return 2
        hint = "" if args.debug else " (rerun with --debug for the traceback)"
        print(f"{PROG}: internal error: {type(err).__name__}: {line}{hint}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
