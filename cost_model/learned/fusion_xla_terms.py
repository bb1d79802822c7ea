"""What XLA's CPU backend makes of each executable call of a fusion configuration (seventeenth
session): counts read from the optimized HLO of every call, summed per configuration.

The fusion collection runs a configuration as one XLA executable per group
(`cost_model.profiling.calibration.GroupExecutor`: `cut_group` + the project's HLO exporter +
`compile_hlo_module`). XLA then compiles that small module with its own pipeline: it fuses the
group's ops into its loop fusions, wraps dots in YNNPACK custom fusions (`__ynn_fusion`, this
jaxlib) or leaves them as Eigen dot thunks, leaves convolutions as Eigen conv thunks, assigns
layouts and materialises the transposes and copies that needs. Each top-level instruction of the
optimized entry computation that is not a parameter / constant / tuple / get-tuple-element /
bitcast becomes one thunk the runtime dispatches in turn. `parse_optimized_hlo` reads those counts
from `executable.hlo_modules()[0].to_string()`; `call_counts` adds XLA's own cost analysis of the
optimized module and its buffer sizes.

Calls are deduplicated by `xla_backend.isomorphism_key` (the group's content signature, the
collection's own executable-sharing key) across configurations and graphs, and cached on disk
(`XlaCallCache`, SQLite: one row per distinct call, one per (graph, configuration) with the keys
of its calls), so collecting is resumable (`collect_xla_calls`).

Per configuration (`XLA_TERM_NAMES`, sums over its calls): see `CALL_COUNT_NAMES`. These are a
named term set for the additive model (`fusion_additive`; `AdditiveFusionModel()`'s default
terms, `fusion_terms.SHIPPED_TERMS`, never read them). The packaged `fusion_additive.json` reads one,
`xla_ynn_reduce_fusions`, since it passed a test pre-registered before its new programs were
collected (RESULTS (i), "Seventeenth session, fusion (a pre-registered test on new programs)").
"""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
import time
import zlib
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

__all__ = ["CALL_COUNT_NAMES", "EXECUTABLE_COUNT_NAMES", "XLA_TERM_NAMES", "XlaCallCache", "call_counts", "collect_xla_calls", "config_calls",
           "executable_counts", "graph_xla_terms", "optimized_hlo_text", "parse_optimized_hlo", "record_xla_terms"]

logger = logging.getLogger(__name__)

# What one call's optimized module holds (`parse_optimized_hlo` + `call_counts`):
CALL_COUNT_NAMES = (
    "xla_thunks",  # top-level instructions of the entry that run (not parameter/constant/tuple/gte/bitcast)
    "xla_loop_fusions",  # kLoop / kInput / kOutput fusions without a reduce or reduce-window inside
    "xla_reduce_fusions",  # such fusions with a reduce inside (XLA:CPU emits them as kLoop)
    "xla_window_fusions",  # such fusions with a reduce-window inside (pooling)
    "xla_ynn_dot_fusions",  # kCustom fusions with a dot inside (YNNPACK in this jaxlib)
    "xla_ynn_other_fusions",  # kCustom fusions without a dot (YNNPACK elementwise / reductions)
    "xla_ynn_reduce_fusions",  # of those, the ones with a reduce inside (YNNPACK reductions)
    "xla_fused_instructions",  # instructions inside all fusions (not parameters, constants, bitcasts)
    "xla_copies",  # copy instructions (layout assignment), in fusions or at the top
    "xla_transposes",  # transpose instructions XLA kept (a physical relayout), in fusions or at the top
    "xla_eigen_dots",  # dot thunks outside the custom fusions (Eigen)
    "xla_convs",  # convolution thunks (Eigen)
    "xla_custom_calls",  # custom-call thunks
    "xla_unfused_data_ops",  # reduce, reduce-window, scatter, gather, sort, select-and-scatter at the top, not fused
    "xla_unfused_other",  # any other top-level thunk that is not a fusion, dot, conv, custom call or the above (copy, pad, ...)
    "xla_parameters",  # the entry's parameters (arguments of the call)
    "xla_outputs",  # results of the call (tuple elements of the ROOT; 1 if not a tuple)
    "xla_fused_melements",  # output elements of the instructions inside the fusions (millions): loop work
    "xla_transcendental_melements",  # of those, exp / log / tanh / logistic / rsqrt / sqrt / power / divide / erf (millions)
    "xla_loop_reduce_in_melements",  # input elements of the reduces inside XLA's own (not custom) fusions (millions): its loop-emitted reductions
    "xla_thunk_output_mb",  # megabytes the top-level thunks write (intermediates between thunks and the results)
    "xla_temp_mb",  # XLA's temp buffer of the call (CompiledMemoryStats.temp_size_in_bytes, MB)
    "xla_mflops",  # XLA's cost analysis of the optimized module: flops (millions; 0 inside custom fusions)
    "xla_bytes_mb",  # bytes accessed (MB)
    "xla_transcendentals_m",  # transcendentals (millions)
)
# What `call_counts` reads from the executable beside its HLO text (kept with the text in the cache).
EXECUTABLE_COUNT_NAMES = ("xla_temp_mb", "xla_mflops", "xla_bytes_mb", "xla_transcendentals_m")
XLA_TERM_NAMES = CALL_COUNT_NAMES  # per configuration: the same names, summed over its calls

_NOT_THUNKS = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all"}
_FUSED_FREE = {"parameter", "constant", "bitcast"}
_DATA_OPS = {"reduce", "reduce-window", "scatter", "gather", "sort", "select-and-scatter"}
_TRANSCENDENTAL = {"exponential", "exponential-minus-one", "log", "log-plus-one", "tanh", "logistic", "rsqrt", "sqrt", "cbrt", "power", "divide",
                   "erf", "sine", "cosine", "atan2"}
_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8,
          "c64": 8, "c128": 16}
_COMPUTATION = re.compile(r"^(ENTRY\s+)?%([\w.\-]+)\s.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s*(ROOT\s+)?%([\w.\-]+)\s*=\s*(.+?)\s+([a-z][a-z0-9\-]*)\((.*)$")
_ARRAY = re.compile(r"\b([a-z]+[0-9]*)\[([0-9,]*)\]")


def _shape_sizes(shape: str) -> tuple[int, int, int]:
    """(elements, bytes, arrays) of an HLO shape string (a tuple shape sums its arrays)."""
    elements = nbytes = arrays = 0
    for dtype, dims in _ARRAY.findall(shape):
        count = int(np.prod([int(d) for d in dims.split(",") if d])) if dims else 1
        elements += count
        nbytes += count * _BYTES.get(dtype, 4)
        arrays += 1
    return elements, nbytes, arrays


def _computations(text: str) -> tuple[dict[str, list[tuple[str, str, str, bool, str]]], str]:
    """{computation name: [(opcode, shape, rest of line, is_root, instruction name)]}, and the entry's name."""
    comps: dict[str, list[tuple[str, str, str, bool, str]]] = {}
    entry, current = "", None
    for line in text.splitlines():
        if current is None:
            match = _COMPUTATION.match(line)
            if match and not line.startswith("HloModule"):
                current = match.group(2)
                comps[current] = []
                if match.group(1):
                    entry = current
            continue
        if line.strip() == "}":
            current = None
            continue
        match = _INSTRUCTION.match(line)
        if match:
            comps[current].append((match.group(4), match.group(3), match.group(5), bool(match.group(1)), match.group(2)))
    if not entry:
        raise ValueError("no ENTRY computation in the optimized HLO text")
    return comps, entry


def parse_optimized_hlo(text: str) -> dict[str, float]:
    """The HLO-side `CALL_COUNT_NAMES` of one optimized module (the text of
    `executable.hlo_modules()[0].to_string()`); the cost-analysis and buffer counts are 0 here."""
    comps, entry = _computations(text)
    counts = dict.fromkeys(CALL_COUNT_NAMES, 0.0)

    def fused_ops(name: str, seen: frozenset[str] = frozenset()) -> list[tuple[str, str]]:
        """(opcode, shape) of a fused computation's instructions, nested fusions opened."""
        out = []
        for opcode, shape, rest, _, _ in comps.get(name, []):
            called = re.search(r"calls=%([\w.\-]+)", rest)
            if opcode == "fusion" and called and called.group(1) not in seen:
                out += fused_ops(called.group(1), seen | {name})
            else:
                out.append((opcode, shape))
        return out

    def reduced_elements(name: str) -> int:
        """Input elements of the reduces in a fused computation (their first operand's)."""
        shapes = {n: s for _, s, _, _, n in comps.get(name, [])}
        total = 0
        for opcode, _, rest, _, _ in comps.get(name, []):
            operand = re.match(r"\s*%([\w.\-]+)", rest) if opcode == "reduce" else None
            total += _shape_sizes(shapes.get(operand.group(1), ""))[0] if operand else 0
        return total

    for opcode, shape, rest, is_root, _ in comps[entry]:
        if opcode == "parameter":
            counts["xla_parameters"] += 1
        if is_root:
            counts["xla_outputs"] += _shape_sizes(shape)[2] if opcode == "tuple" or shape.startswith("(") else 1
        if opcode in _NOT_THUNKS:
            continue
        counts["xla_thunks"] += 1
        counts["xla_thunk_output_mb"] += 1e-6 * _shape_sizes(shape)[1]
        if opcode == "fusion":
            kind = re.search(r"kind=(k\w+)", rest)
            called = re.search(r"calls=%([\w.\-]+)", rest)
            ops = fused_ops(called.group(1)) if called else []
            opcodes = {o for o, _ in ops}
            counts["xla_copies"] += sum(o == "copy" for o, _ in ops)
            counts["xla_transposes"] += sum(o == "transpose" for o, _ in ops)
            if kind and kind.group(1) == "kCustom":
                counts["xla_ynn_dot_fusions" if "dot" in opcodes else "xla_ynn_other_fusions"] += 1
                counts["xla_ynn_reduce_fusions"] += "dot" not in opcodes and "reduce" in opcodes
            else:
                counts["xla_loop_reduce_in_melements"] += 1e-6 * reduced_elements(called.group(1)) if called else 0.0
                kind_name = "xla_window_fusions" if "reduce-window" in opcodes else "xla_reduce_fusions" if "reduce" in opcodes else "xla_loop_fusions"
                counts[kind_name] += 1
            work = [(o, _shape_sizes(s)[0]) for o, s in ops if o not in _FUSED_FREE]
            counts["xla_fused_instructions"] += len(work)
            counts["xla_fused_melements"] += 1e-6 * sum(e for _, e in work)
            counts["xla_transcendental_melements"] += 1e-6 * sum(e for o, e in work if o in _TRANSCENDENTAL)
        elif opcode == "dot":
            counts["xla_eigen_dots"] += 1
        elif opcode == "convolution":
            counts["xla_convs"] += 1
        elif opcode == "custom-call":
            counts["xla_custom_calls"] += 1
        elif opcode in _DATA_OPS:
            counts["xla_unfused_data_ops"] += 1
        else:
            counts["xla_unfused_other"] += 1
            counts["xla_copies"] += opcode == "copy"
            counts["xla_transposes"] += opcode == "transpose"
    return counts


def executable_counts(executable: Any) -> dict[str, float]:
    """The `EXECUTABLE_COUNT_NAMES` of one compiled call: XLA's cost analysis of the optimized
    module and its temp buffer."""
    cost = executable.cost_analysis() or {}
    if isinstance(cost, list):  # older jaxlibs: one dict per module
        cost = cost[0] if cost else {}
    return {"xla_temp_mb": 1e-6 * float(executable.get_compiled_memory_stats().temp_size_in_bytes),
            "xla_mflops": 1e-6 * float(cost.get("flops", 0.0)), "xla_bytes_mb": 1e-6 * float(cost.get("bytes accessed", 0.0)),
            "xla_transcendentals_m": 1e-6 * float(cost.get("transcendentals", 0.0))}


def optimized_hlo_text(executable: Any) -> str:
    """The optimized HLO module of a loaded XLA executable, as text (what XLA made of the call)."""
    return executable.hlo_modules()[0].to_string()


def call_counts(executable: Any) -> dict[str, float]:
    """All `CALL_COUNT_NAMES` of one compiled call (a loaded XLA executable): the parsed optimized
    HLO, XLA's cost analysis of it and its temp buffer."""
    return parse_optimized_hlo(optimized_hlo_text(executable)) | executable_counts(executable)


class XlaCallCache:
    """The distinct calls (by isomorphism key: the optimized HLO text, zlib-compressed, and the
    `EXECUTABLE_COUNT_NAMES`) and each (graph, configuration)'s call keys, in one SQLite file
    (committed per graph: a killed collection resumes where it stopped). The counts are parsed from
    the stored text when read, so a parser change needs no recompiling."""

    def __init__(self, path: str | os.PathLike[str] = ":memory:") -> None:
        self.path = Path(path)
        if str(path) != ":memory:":  # ":memory:": a cache of this process only (the autotuner's default)
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(path))
        self.db.execute("CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, hlo BLOB, executable TEXT, compile_s REAL)")
        self.db.execute("CREATE TABLE IF NOT EXISTS configs (graph TEXT, config TEXT, keys TEXT, PRIMARY KEY (graph, config))")

    def __enter__(self) -> XlaCallCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.db.commit()
        self.db.close()

    def has_call(self, key: str) -> bool:
        return self.db.execute("SELECT 1 FROM calls WHERE key = ?", (key,)).fetchone() is not None

    def call_text(self, key: str) -> str | None:
        row = self.db.execute("SELECT hlo FROM calls WHERE key = ?", (key,)).fetchone()
        return None if row is None else zlib.decompress(row[0]).decode()

    def call(self, key: str) -> dict[str, float] | None:
        """The `CALL_COUNT_NAMES` of one call (None: not collected)."""
        row = self.db.execute("SELECT hlo, executable FROM calls WHERE key = ?", (key,)).fetchone()
        return None if row is None else _counts(*row)

    def put_call(self, key: str, hlo_text: str, executable: dict[str, float], compile_s: float) -> None:
        self.db.execute("INSERT OR REPLACE INTO calls VALUES (?, ?, ?, ?)", (key, zlib.compress(hlo_text.encode()), json.dumps(executable), compile_s))

    def config_keys(self, graph: str, config: str) -> list[str] | None:
        row = self.db.execute("SELECT keys FROM configs WHERE graph = ? AND config = ?", (graph, config)).fetchone()
        return None if row is None else json.loads(row[0])

    def put_config(self, graph: str, config: str, keys: Sequence[str]) -> None:
        self.db.execute("INSERT OR REPLACE INTO configs VALUES (?, ?, ?)", (graph, config, json.dumps(list(keys))))

    def commit(self) -> None:
        self.db.commit()

    def all_calls(self) -> dict[str, dict[str, float]]:
        """{key: `CALL_COUNT_NAMES`} of every call in the cache."""
        return {k: _counts(h, e) for k, h, e in self.db.execute("SELECT key, hlo, executable FROM calls")}

    def compile_seconds(self) -> tuple[int, float]:
        """(calls, their summed compile seconds)."""
        n, s = self.db.execute("SELECT COUNT(*), SUM(compile_s) FROM calls").fetchone()
        return int(n), float(s or 0.0)

    def graph_configs(self, graph: str) -> dict[str, list[str]]:
        """{configuration text: its call keys} of one graph."""
        return {c: json.loads(k) for c, k in self.db.execute("SELECT config, keys FROM configs WHERE graph = ?", (graph,))}


def _counts(hlo: bytes, executable: str) -> dict[str, float]:
    return parse_optimized_hlo(zlib.decompress(hlo).decode()) | json.loads(executable)

    def graph_configs(self, graph: str) -> dict[str, list[str]]:
        return {c: json.loads(k) for c, k in self.db.execute("SELECT config, keys FROM configs WHERE graph = ?", (graph,))}


def config_calls(groups: np.ndarray) -> list[tuple[int, ...]]:
    """The calls of one configuration as node-index tuples (a group's members in node order; a
    node alone is its own call), as `calibration.kernel_groups` forms them (order aside)."""
    members: dict[int, list[int]] = {}
    for i, g in enumerate(np.asarray(groups, dtype=np.int64).tolist()):
        members.setdefault(g if g >= 0 else -1 - i, []).append(i)
    return [tuple(m) for m in members.values()]


class _GraphCalls:
    """One graph's calls: members -> isomorphism key, compiling a key not in the cache."""

    def __init__(self, graph: Any, nodes: Sequence[Any], cache: XlaCallCache) -> None:
        self.graph, self.nodes, self.cache = graph, list(nodes), cache
        self.keys: dict[tuple[int, ...], str] = {}
        self.compiled = 0
        self.compile_s = 0.0

    def key(self, members: tuple[int, ...]) -> str:
        key = self.keys.get(members)
        if key is not None:
            return key
        from cost_model.profiling.subgraph import cut_group
        from cost_model.profiling.xla_backend import compile_hlo_group, isomorphism_key

        cut = cut_group(self.graph, [self.nodes[i] for i in members], tuple_op="tuple")
        key = self.keys[members] = isomorphism_key(cut)
        if not self.cache.has_call(key):
            began = time.perf_counter()
            kernel = compile_hlo_group(self.graph, [self.nodes[i] for i in members], cut=cut)
            text, executable = optimized_hlo_text(kernel.executable), executable_counts(kernel.executable)
            seconds = time.perf_counter() - began
            self.cache.put_call(key, text, executable, seconds)
            self.compiled += 1
            self.compile_s += seconds
        return key


def collect_xla_calls(graphs: Iterable[tuple[str, Sequence[str]]], cache: XlaCallCache, *, build: Any, progress: bool = True) -> dict[str, Any]:
    """Compile every distinct call of the given configurations (name, config texts) and cache what
    XLA made of it. `build(name)` returns the graph (the collection's builder,
    `compiler_opt.costmodel.fusion_graphs.fusion_graph`, passed in by the caller: `cost_model` sits
    below `compiler_opt`). Returns {"configs", "calls_compiled", "compile_s", "seconds", "rate_configs_s"}."""
    from tqdm import tqdm

    from cost_model.decisions import node_order

    todo = [(name, configs) for name, configs in graphs]
    began, done, compiled, compile_s = time.perf_counter(), 0, 0, 0.0
    bar = tqdm(total=sum(len(c) for _, c in todo), desc="xla calls", unit="config", disable=not progress)
    for name, configs in todo:
        missing = [c for c in configs if cache.config_keys(name, c) is None]
        bar.update(len(configs) - len(missing))
        if not missing:
            continue
        graph = build(name)
        calls = _GraphCalls(graph, node_order(graph), cache)
        for config in missing:
            keys = [calls.key(m) for m in config_calls(np.asarray(json.loads(config)))]
            cache.put_config(name, config, keys)
            done += 1
            bar.update(1)
            bar.set_postfix(compiled=compiled + calls.compiled)
        cache.commit()
        compiled += calls.compiled
        compile_s += calls.compile_s
    bar.close()
    seconds = time.perf_counter() - began
    return {"configs": done, "calls_compiled": compiled, "compile_s": compile_s, "seconds": seconds,
            "rate_configs_s": done / seconds if seconds > 0 else float("nan"), "rate_calls_s": compiled / seconds if seconds > 0 else float("nan")}


def record_xla_terms(record: Any, cache: XlaCallCache, calls: dict[str, dict[str, float]] | None = None) -> np.ndarray:
    """(C, len(XLA_TERM_NAMES)) of a fusion dataset file: each configuration's calls' counts summed.
    `calls`: `cache.all_calls()` when the caller reads many files. Raises KeyError naming the graph
    when a configuration was not collected (`collect_xla_calls`)."""
    calls = calls if calls is not None else cache.all_calls()
    configs = cache.graph_configs(record.name)
    rows = []
    for text in record.config_text:
        keys = configs.get(text)
        if keys is None:
            raise KeyError(f"{record.name}: a configuration without XLA call counts (run collect_xla_calls on it)")
        rows.append([sum(calls[k][n] for k in keys) for n in XLA_TERM_NAMES])
    return np.asarray(rows, dtype=np.float64)


def graph_xla_terms(graph: Any, nodes: Sequence[Any], groups: Sequence[np.ndarray], *, cache: XlaCallCache | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """(C, len(XLA_TERM_NAMES)) for candidate groupings of an HLO graph (`nodes` in `node_order`;
    `groups[c][i]`: node i's group, -1 alone), the features a model fitted on `record_xla_terms`
    reads: every distinct call of the candidates compiled once, as the collection compiles it.
    `cache`: an `XlaCallCache` kept between graphs (None: one in memory for this call). Also
    returns {"calls", "calls_compiled", "compile_s", "seconds_per_candidate"}: the cost of the terms."""
    began = time.perf_counter()
    own = cache is None
    cache = XlaCallCache() if cache is None else cache
    try:
        calls = _GraphCalls(graph, nodes, cache)
        keys = [[calls.key(m) for m in config_calls(np.asarray(g))] for g in groups]
        counts = {k: cache.call(k) for k in {k for row in keys for k in row}}
        rows = np.array([[sum(counts[k][n] for k in row) for n in XLA_TERM_NAMES] for row in keys], dtype=np.float64).reshape(len(keys), len(XLA_TERM_NAMES))
    finally:
        if own:
            cache.close()
    seconds = time.perf_counter() - began
    return rows, {"calls": len(counts), "calls_compiled": calls.compiled, "compile_s": calls.compile_s,
                  "seconds_per_candidate": seconds / len(keys) if keys else 0.0}
