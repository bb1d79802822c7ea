"""What LLVM made of a tile configuration: features read from the compiled x86-64 assembly.

The knob and hardware features (`space.config_features`, `tile_hw_features`) say what a schedule
asks for; the compiler then decides what runs: whether the loop was vectorized and at which
register width, how many accumulators stay in registers and how many spill to the stack, how
much an unroll pragma blew the body up. This module builds each configuration for this host
(`cost_model.measure.tile.runner.build_config`, the collector's own compile path), reads
`mod.inspect_source("asm")` (AT&T syntax) and counts, over the compute functions
(`main_compute_` and the parallel lambdas; the argument-checking wrapper is left out):

- instructions; float FMA / multiply / add-sub-min-max by register width (zmm, ymm, xmm packed,
  scalar `ss`); loads and stores (memory operands, `lea` excluded); stack spills and reloads
  (stores to / loads from `rsp` / `rbp` addresses); gathers, broadcasts (incl. AVX-512 `{1toN}`),
  shuffles / permutes / blends / inserts / extracts; calls and whether the parallel runtime is
  launched; the stack frame size;
- loops as backward branches (a jump to a label defined above it in the same function; one loop
  per target label, up to its last backward branch), their count and deepest nesting; and for the innermost loops (those at the deepest nesting; the
  hot code of a tiled nest) the body's instructions, float operations (lanes x ops, FMA = 2),
  loads, stores and spill traffic, and the widest vector used.

Counts enter as log2(1 + count). `CODE_FEATURE_NAMES` names the columns.

The loop columns above (`loops`, `loop_depth`, `inner_*`) read text ranges, which is wrong where
LLVM lays the blocks of one loop around others or a cold block branches back to a join point (up
to 232 "loops" 184 deep where the control-flow graph has 7). `NATURAL_LOOP_FEATURE_NAMES` (eighteenth
session) are the same 11 columns from the natural loops of `tile_nest_features.natural_loops`
(count, deepest nesting, and the loops at the deepest nesting with their whole bodies).

Feature sets (seventeenth session; a model records the one it read, `extra["code_feature_set"]`,
absent = "s16"): "s16", the 35 columns above, what the sixteenth session shipped; "nest", those
plus the whole loop nest (`tile_nest_features`: per level from the inside the loops' own
instructions, float ops, loads, stores and trip counts, and the executed counts they imply);
"s18" and "nest18" (eighteenth session), the same with the 11 text-range loop columns replaced in
place by their natural-loop versions (the old sets stay as they were, so files fitted on them rank
as before); a "+z" suffix appends every column again as its z-score over the kernel's own candidates
(`kernel_zscores`: a ranker then compares configurations of one kernel, not absolute counts across
kernels; at ranking time over the candidates ranked together). The features are
machine-specific by construction (they read this host's code); a dataset's cache is only
meaningful for the CPU the target names (`host_target_text`, stored with the cache).

    feats = config_code_features(space, config)                 # one configuration, compiled here
    fill_code_feature_cache(records, "out/t11/code")            # every configuration of a dataset, cached per kernel
    records = with_code_features(records, "out/t11/code")       # config_feat + the code block
"""

from __future__ import annotations

import logging
import math
import os
import re
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from cost_model.learned.tpugraphs import DatasetError, KernelRecord
from cost_model.measure.tile.compile_probe import CompileProbe
from cost_model.measure.tile.runner import config_asm  # re-exported: what the code features read

__all__ = ["ALL_CODE_FEATURE_NAMES", "CODE_FEATURES", "CODE_FEATURE_NAMES", "CODE_FEATURE_SETS", "CODE_FEATURE_VERSION", "NATURAL_LOOP_FEATURE_NAMES",
           "AsmStats", "asm_stats", "natural_loop_counts",
           "code_feature_set_names", "code_feature_set_width", "code_features", "compute_functions", "config_asm", "config_code_features", "configs_code_block",
           "cache_path", "cached_asm", "extended_records", "fill_code_feature_cache", "kernel_zscores", "load_code_features", "with_code_features"]

logger = logging.getLogger(__name__)

CODE_FEATURE_VERSION = 5  # 2: one loop per backward-branch target; 3: + the whole-nest block (a cache holds every column); 4: its loops natural loops;
# 5: + the s16 loop columns from natural loops
_WIDTHS = ("zmm", "ymm", "xmm", "scalar")
_LANES = {"zmm": 16, "ymm": 8, "xmm": 4, "scalar": 1}  # float32
_COUNTS = ("instructions", *(f"{op}_{w}" for op in ("fma", "mul", "add") for w in _WIDTHS), "loads", "stores", "spills", "reloads",
           "gathers", "broadcasts", "shuffles", "calls", "loops", "loop_depth",
           "inner_loops", "inner_instructions", "inner_flops", "inner_loads", "inner_stores", "inner_spill_traffic")
CODE_FEATURE_NAMES: tuple[str, ...] = (*(f"log2_1p_{c}" for c in _COUNTS), "parallel_launch", "log2_1p_stack_bytes", "flops_per_instruction",
                                       "inner_flops_per_instruction", "inner_vector_lanes_log2", "inner_loads_per_flop")
CODE_FEATURES = len(CODE_FEATURE_NAMES)  # the "s16" set
_LOOP_COUNTS = ("loops", "loop_depth", "inner_loops", "inner_instructions", "inner_flops", "inner_loads", "inner_stores", "inner_spill_traffic")
_LOOP_RATIOS = ("inner_flops_per_instruction", "inner_vector_lanes_log2", "inner_loads_per_flop")
NATURAL_LOOP_FEATURE_NAMES: tuple[str, ...] = (*(f"log2_1p_natural_{c}" for c in _LOOP_COUNTS), *(f"natural_{c}" for c in _LOOP_RATIOS))

_WRAPPERS = ("__tvm_ffi_main", "__tvm_set_raised", "__truncsfhf2", "__extendhfsf2")
_BRANCH = re.compile(r"^j[a-z]{1,4}$")
_MEM = re.compile(r"\(%?[a-z0-9]*(,%[a-z0-9]+)?(,\d)?\)")
_STACK = re.compile(r"\(%(rsp|rbp)[,)]")


def _nest_names() -> tuple[str, ...]:
    from cost_model.learned.tile_nest_features import NEST_FEATURE_NAMES

    return NEST_FEATURE_NAMES


_OLD_WIDTH = CODE_FEATURES + len(_nest_names())  # the 65 columns a version-3 or 4 cache stores
ALL_CODE_FEATURE_NAMES: tuple[str, ...] = CODE_FEATURE_NAMES + _nest_names() + NATURAL_LOOP_FEATURE_NAMES  # the columns a version-5 cache stores


def _natural_in_place() -> list[int]:
    """The "s16" columns with each text-range loop column swapped for its natural-loop one."""
    swap = {f"log2_1p_{c}": f"log2_1p_natural_{c}" for c in _LOOP_COUNTS} | {c: f"natural_{c}" for c in _LOOP_RATIOS}
    return [ALL_CODE_FEATURE_NAMES.index(swap.get(name, name)) for name in CODE_FEATURE_NAMES]


# each base set's columns of a version-5 row, and the oldest cache version that holds them right
_SET_COLUMNS: dict[str, tuple[int, ...]] = {
    "s16": tuple(range(CODE_FEATURES)), "nest": tuple(range(_OLD_WIDTH)),
    "s18": tuple(_natural_in_place()), "nest18": (*_natural_in_place(), *range(CODE_FEATURES, _OLD_WIDTH)),
}
_SINCE_VERSION = {"s16": 2, "nest": 4, "s18": 5, "nest18": 5}
CODE_FEATURE_SETS = tuple(f"{base}{z}" for base in _SET_COLUMNS for z in ("", "+z"))


def _base_set(feature_set: str) -> str:
    if feature_set not in CODE_FEATURE_SETS:
        raise ValueError(f"unknown code feature set {feature_set!r} (one of {', '.join(CODE_FEATURE_SETS)})")
    return feature_set.removesuffix("+z")


def _base_width(feature_set: str) -> int:
    return len(_SET_COLUMNS[_base_set(feature_set)])


def code_feature_set_width(feature_set: str = "s16") -> int:
    """Columns a feature set adds to the config features."""
    return _base_width(feature_set) * (2 if feature_set.endswith("+z") else 1)


def code_feature_set_names(feature_set: str = "s16") -> tuple[str, ...]:
    base = tuple(ALL_CODE_FEATURE_NAMES[i] for i in _SET_COLUMNS[_base_set(feature_set)])
    return base + tuple(f"z_{name}" for name in base) if feature_set.endswith("+z") else base


def kernel_zscores(block: np.ndarray) -> np.ndarray:
    """Each column of one kernel's (C, F) code block as its z-score over the C candidates (NaN rows,
    compiles that timed out, stay NaN and are left out of the mean and spread; a constant column is 0)."""
    block = np.asarray(block, dtype=np.float64)
    out = np.full_like(block, np.nan)
    valid = np.isfinite(block).all(axis=1)
    if valid.any():
        rows = block[valid]
        spread = rows.std(axis=0)
        out[valid] = np.where(spread > 0, (rows - rows.mean(axis=0)) / np.where(spread > 0, spread, 1.0), 0.0)
    return out.astype(np.float32)


def _with_set(raw: np.ndarray, feature_set: str) -> np.ndarray:
    """A (C, columns of a cache row: all, the 65 of version 3-4 or the 35 of version 2) raw block as
    `feature_set`'s columns (z-scores appended for "+z")."""
    base = np.asarray(raw, dtype=np.float32)[:, list(_SET_COLUMNS[_base_set(feature_set)])]
    return np.concatenate([base, kernel_zscores(base)], axis=1) if feature_set.endswith("+z") else base


@dataclass
class AsmStats:
    """Counts over a module's compute functions (see the module docstring)."""

    counts: dict[str, float] = field(default_factory=lambda: dict.fromkeys(_COUNTS, 0.0))
    parallel_launch: bool = False
    stack_bytes: int = 0
    flops: float = 0.0
    inner_lanes: int = 0

    def vector(self) -> np.ndarray:
        c = self.counts
        head = [math.log2(1.0 + c[k]) for k in _COUNTS]
        return np.array(head + [float(self.parallel_launch), math.log2(1.0 + self.stack_bytes), self.flops / max(c["instructions"], 1.0),
                                c["inner_flops"] / max(c["inner_instructions"], 1.0), math.log2(max(self.inner_lanes, 1)),
                                c["inner_loads"] / max(c["inner_flops"], 1.0)], dtype=np.float32)


@dataclass
class _Instr:
    mnemonic: str
    operands: list[str]

    @property
    def kind(self) -> str | None:
        """fma / mul / add for float arithmetic (add covers sub, min, max), else None."""
        m = self.mnemonic
        if not m.endswith(("ps", "ss")):
            return None
        if re.match(r"^v?f(n)?m(add|sub)", m):
            return "fma"
        if re.match(r"^v?mul(ps|ss)$", m):
            return "mul"
        if re.match(r"^v?(add|sub|min|max)(ps|ss)$", m):
            return "add"
        return None

    @property
    def width(self) -> str:
        if self.mnemonic.endswith("ss"):
            return "scalar"
        text = " ".join(self.operands)
        return next((w for w in ("zmm", "ymm", "xmm") if f"%{w}" in text), "xmm")

    def loads(self) -> list[str]:
        """Memory operands read (AT&T: sources first, destination last; a store's only memory
        operand is its destination; `lea` computes an address and reads nothing)."""
        if self.mnemonic.startswith(("lea", "nop", "prefetch")) or not self.operands:
            return []
        sources = self.operands if len(self.operands) == 1 and not self.mnemonic.startswith(("push", "pop")) else self.operands[:-1]
        reads = [o for o in sources if _MEM.search(o)]
        if len(self.operands) > 1 and _MEM.search(self.operands[-1]) and not self.mnemonic.startswith(("mov", "vmov")):
            reads.append(self.operands[-1])  # read-modify-write (add to memory, cmp)
        return reads

    def stores(self) -> list[str]:
        if len(self.operands) < 2 or self.mnemonic.startswith(("cmp", "test", "vcmp", "vptest", "vucomi", "vcomi", "ucomi", "bt")):
            return []
        return [self.operands[-1]] if _MEM.search(self.operands[-1]) else []


def _split_operands(text: str) -> list[str]:
    """AT&T operands, split at commas outside parentheses and braces."""
    out, depth, current = [], 0, ""
    for ch in text:
        if ch in "({":
            depth += 1
        elif ch in ")}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        out.append(current.strip())
    return out


def _functions(asm: str) -> dict[str, list[str]]:
    """Function name -> its lines (from its label to the next function's `.type`)."""
    funcs: dict[str, list[str]] = {}
    current: str | None = None
    declared: set[str] = set()
    for line in asm.splitlines():
        stripped = line.strip()
        if stripped.startswith(".type") and "@function" in stripped:
            declared.add(stripped[len(".type"):].split(",")[0].strip())
            current = None
            continue
        if not line.startswith((" ", "\t")) and stripped.endswith(":") and stripped[:-1] in declared:
            current = stripped[:-1]
            funcs[current] = []
            continue
        if current is not None:
            funcs[current].append(line)
    return funcs


def _parse(lines: list[str]) -> tuple[list[_Instr], dict[str, int], list[tuple[int, int]]]:
    """Instructions, label -> index of the next instruction, and loops (first, last instruction index)."""
    instrs: list[_Instr] = []
    labels: dict[str, int] = {}
    jumps: list[tuple[int, str]] = []
    for line in lines:
        stripped = line.split("#", 1)[0].strip()
        if not stripped:
            continue
        if stripped.endswith(":") and not line.startswith((" ", "\t")):
            labels[stripped[:-1]] = len(instrs)
            continue
        if stripped.startswith("."):
            continue  # a directive
        parts = stripped.split(None, 1)
        instr = _Instr(parts[0], _split_operands(parts[1]) if len(parts) > 1 else [])
        if _BRANCH.match(instr.mnemonic) and instr.operands:
            jumps.append((len(instrs), instr.operands[0]))
        instrs.append(instr)
    # one loop per header: a header's backward branches (latch, `continue` edges) end at its last one
    latest: dict[str, int] = {}
    for at, target in jumps:
        if target in labels and labels[target] <= at:
            latest[target] = max(at, latest.get(target, at))
    return instrs, labels, sorted((labels[target], at) for target, at in latest.items())


Parsed = list[tuple[list[_Instr], dict[str, int], list[tuple[int, int]]]]


def compute_functions(asm: str) -> Parsed:
    """`_parse` of each compute function of a module's assembly (TVM's wrappers left out): parsed
    once for both `asm_stats` and the whole-nest block (`tile_nest_features`)."""
    parsed = [_parse(lines) for name, lines in _functions(asm).items() if not name.startswith(_WRAPPERS)]
    if not parsed:
        raise ValueError("no compute function in the assembly (expected main_compute_ or a parallel lambda)")
    return parsed


def asm_stats(asm: str | Parsed) -> AsmStats:
    """`AsmStats` of a module's assembly text (AT&T, as LLVM prints it for x86-64), or of its
    `compute_functions`."""
    stats = AsmStats()
    c = stats.counts
    parsed = compute_functions(asm) if isinstance(asm, str) else asm
    inner: list[tuple[list[_Instr], tuple[int, int]]] = []
    depth_best = 0
    for instrs, _, loops in parsed:
        for instr in instrs:
            c["instructions"] += 1
            kind = instr.kind
            if kind is not None:
                width = instr.width
                c[f"{kind}_{width}"] += 1
                stats.flops += _LANES[width] * (2 if kind == "fma" else 1)
            loads, stores = instr.loads(), instr.stores()
            c["loads"] += len(loads)
            c["stores"] += len(stores)
            c["reloads"] += sum(bool(_STACK.search(o)) for o in loads)
            c["spills"] += sum(bool(_STACK.search(o)) for o in stores)
            m = instr.mnemonic
            c["gathers"] += m.startswith("vgather")
            c["broadcasts"] += m.startswith(("vbroadcast", "vpbroadcast")) or any("{1to" in o for o in instr.operands)
            c["shuffles"] += m.startswith(("vperm", "vshuf", "vunpck", "vinsert", "vextract", "vblend", "vpblend", "vmovshdup", "vmovsldup", "vpshuf"))
            c["calls"] += m.startswith("call")
            if m.startswith(("call", "mov")) and any("TVMBackendParallelLaunch" in o for o in instr.operands):
                stats.parallel_launch = True
            if m == "subq" and len(instr.operands) == 2 and instr.operands[1] == "%rsp" and instr.operands[0].startswith("$"):
                stats.stack_bytes += int(instr.operands[0][1:])
        c["loops"] += len(loops)
        for loop in loops:
            depth = sum(a <= loop[0] and loop[1] <= b for a, b in loops)  # loops containing it, itself included
            if depth > depth_best:
                depth_best, inner = depth, []
            if depth == depth_best:
                inner.append((instrs, loop))
    c["loop_depth"] = depth_best
    c["inner_loops"] = len(inner)
    for instrs, (first, last) in inner:
        for instr in instrs[first : last + 1]:
            c["inner_instructions"] += 1
            kind = instr.kind
            if kind is not None:
                lanes = _LANES[instr.width]
                c["inner_flops"] += lanes * (2 if kind == "fma" else 1)
                stats.inner_lanes = max(stats.inner_lanes, lanes)
            loads, stores = instr.loads(), instr.stores()
            c["inner_loads"] += len(loads)
            c["inner_stores"] += len(stores)
            c["inner_spill_traffic"] += sum(bool(_STACK.search(o)) for o in loads + stores)
    return stats


def natural_loop_counts(asm: str | Parsed, tables: Any = None) -> dict[str, float]:
    """The counts behind `NATURAL_LOOP_FEATURE_NAMES`, from the natural loops of the compute
    functions (`tile_nest_features.loop_tables`, computed here unless given): `loops`, the deepest
    nesting `loop_depth`, the loops at that depth (`inner_loops`; over all functions, as the text-range
    columns) and their bodies' instructions, float ops x lanes (FMA = 2), loads, stores, spill
    traffic, and `inner_lanes` the widest float vector in them. An innermost loop holds no other
    loop, so its own body (`LoopInfo`'s counts) is its whole body."""
    from cost_model.learned.tile_nest_features import loop_tables

    parsed = compute_functions(asm) if isinstance(asm, str) else asm
    infos = [info for table, _ in (loop_tables(parsed) if tables is None else tables) for info in table]
    depth = max((info.depth for info in infos), default=0)
    inner = [info for info in infos if info.depth == depth]
    return {"loops": float(len(infos)), "loop_depth": float(depth), "inner_loops": float(len(inner)),
            "inner_instructions": sum(i.instructions for i in inner), "inner_flops": sum(i.flops for i in inner),
            "inner_loads": sum(i.loads for i in inner), "inner_stores": sum(i.stores for i in inner),
            "inner_spill_traffic": sum(i.spill_traffic for i in inner), "inner_lanes": float(max((i.lanes for i in inner), default=0))}


def _natural_vector(c: dict[str, float]) -> np.ndarray:
    """`NATURAL_LOOP_FEATURE_NAMES` of `natural_loop_counts` (as `AsmStats.vector` makes the text-range ones)."""
    return np.array([math.log2(1.0 + c[k]) for k in _LOOP_COUNTS] + [c["inner_flops"] / max(c["inner_instructions"], 1.0), math.log2(max(c["inner_lanes"], 1.0)),
                                                                       c["inner_loads"] / max(c["inner_flops"], 1.0)], dtype=np.float32)


def code_features(asm: str, feature_set: str | None = None, *, nest: bool = False) -> np.ndarray:
    """float32 features of a module's assembly text: `feature_set`'s base columns (no "+z": those
    need the other candidates) if given, else every column of `ALL_CODE_FEATURE_NAMES` if `nest`,
    else the (CODE_FEATURES,) "s16" columns. The assembly is parsed once and its natural loops
    found once, and only where the columns asked for need them."""
    base = "all" if feature_set is None and nest else _base_set(feature_set or "s16")
    parsed = compute_functions(asm)
    head = asm_stats(parsed).vector()
    if base == "s16":
        return head
    from cost_model.learned.tile_nest_features import loop_tables, nest_features

    tables = loop_tables(parsed)
    row = np.concatenate([head, nest_features(parsed, tables) if base != "s18" else np.zeros(_OLD_WIDTH - CODE_FEATURES, dtype=np.float32),
                          _natural_vector(natural_loop_counts(parsed, tables)) if base != "nest" else np.zeros(len(NATURAL_LOOP_FEATURE_NAMES), dtype=np.float32)])
    return row if base == "all" else row[list(_SET_COLUMNS[base])]


def config_code_features(space: Any, config: Any, *, target: Any = None, nest: bool = False, feature_set: str | None = None) -> np.ndarray:
    """Compile `config` of `space` (a TileSpace) for this host (or `target`) and read its code
    (`code_features`: `feature_set`'s base columns, else every column if `nest`, else "s16")."""
    return code_features(config_asm(space, config, target=target), feature_set, nest=nest)


def configs_code_block(space: Any, configs: Sequence[Any], feature_set: str = "s16", *, target: Any = None, workers: int | None = None) -> np.ndarray:
    """(C, code_feature_set_width) of `configs` of one kernel, each compiled here; the "+z" columns are
    z-scores over these candidates. The compiles spread over `workers` threads (None:
    `code_feature_pool.compile_workers()`, the CPUs this process may use; 1: one after another); for this host
    (`target` None) each compile runs in a child process and a candidate past `COMPILE_TIMEOUT_S` gets a NaN row
    (`probed_code_features`); with a `code_feature_store` active, what it holds is read back instead of compiled."""
    from cost_model.learned.code_feature_pool import compile_workers, probed_code_features
    from cost_model.learned.code_feature_store import stored_block

    base = _base_set(feature_set)
    workers = compile_workers() if workers is None else workers

    def compiled(chosen: Sequence[Any]) -> np.ndarray:
        if target is None:  # this host: in child processes with a timeout (a timed-out candidate's row is NaN)
            return probed_code_features(space, chosen, base, workers)
        # another target (the probe compiles for this host only): here, one after another
        return np.stack([config_code_features(space, c, target=target, feature_set=base) for c in chosen])

    # for this host, the rows an active `code_feature_store` already holds are read back, not compiled
    block = stored_block(space, configs, base, compiled) if target is None else compiled(configs)
    return np.concatenate([block, kernel_zscores(block)], axis=1) if feature_set.endswith("+z") else block


# -- the per-kernel cache ---------------------------------------------------------------------------

def cache_path(cache_dir: str | os.PathLike[str], record: KernelRecord) -> Path:
    """Where a kernel file's code features live: `<cache_dir>/<kernel file name>` (row i = config i)."""
    return Path(cache_dir) / Path(record.path).name


def _read_cache(path: Path, record: KernelRecord, feature_set: str | None = None) -> np.ndarray | None:
    """The cached block as `feature_set`'s columns; None: every column of the current version (a
    fill's check). An older file serves the sets whose columns it holds right (`_SINCE_VERSION`:
    version 2, the 35 "s16" columns; 3, + the nest block of text-range loops, so "s16" only; 4, +
    the natural-loop nest block, "s16" and "nest"): the columns of each set are the same in every
    version that serves it, so a file fitted on an old set reads the same numbers."""
    if not path.is_file():
        return None
    with np.load(path, allow_pickle=False) as data:
        version = int(data["version"])
        if list(data["config_text"]) != list(record.config_text):
            return None
        if version != CODE_FEATURE_VERSION and not (feature_set is not None and 2 <= _SINCE_VERSION[_base_set(feature_set)] <= version):
            return None
        feats = np.asarray(data["features"], dtype=np.float32)
    width = {2: CODE_FEATURES, 3: _OLD_WIDTH, 4: _OLD_WIDTH}.get(version, len(ALL_CODE_FEATURE_NAMES))
    if feats.shape != (record.num_configs, width):
        return None
    return feats if feature_set is None else _with_set(feats, feature_set)


def cached_asm(path: str | os.PathLike[str], record: KernelRecord) -> list[str] | None:
    """The assembly a cache file keeps for each of `record`'s configurations (zlib), None where it
    keeps none or other configurations: a parser change re-reads it instead of compiling again."""
    import zlib

    path = Path(path)
    if not path.is_file():
        return None
    with np.load(path, allow_pickle=False) as data:
        if "asm_zlib" not in data.files or list(data["config_text"]) != list(record.config_text):
            return None
        blob, offsets = bytes(data["asm_zlib"]), data["asm_offsets"]
    return [zlib.decompress(blob[a:b]).decode("utf-8") for a, b in zip(offsets[:-1], offsets[1:])]


def _row(asm: str) -> np.ndarray:
    """A configuration's features; NaN (XGBoost's missing value) where its compile timed out ("")."""
    return code_features(asm, nest=True) if asm else np.full(len(ALL_CODE_FEATURE_NAMES), np.nan, dtype=np.float32)


def _write_cache(path: Path, record: KernelRecord, asm: list[str], target_text: str) -> None:
    import zlib

    from graph_ir.io.atomic import atomic_path

    packed = [zlib.compress(text.encode("utf-8"), 6) for text in asm]
    offsets = np.cumsum([0] + [len(b) for b in packed]).astype(np.int64)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as handle:
            np.savez(handle, features=np.stack([_row(text) for text in asm]), config_text=np.array(record.config_text),
                     version=np.array(CODE_FEATURE_VERSION), target=np.array(target_text), names=np.array(ALL_CODE_FEATURE_NAMES),
                     asm_zlib=np.frombuffer(b"".join(packed), dtype=np.uint8), asm_offsets=offsets)


def write_code_cache(cache_dir: str | os.PathLike[str], record: KernelRecord, asm: Sequence[str]) -> Path:
    """The code-feature cache file of `record` from assembly compiled elsewhere (one text per
    configuration, in `record.config_text`'s order, for this host): what the collector writes from its
    compile probe's answers, so no fill has to compile the kernel again."""
    from cost_model.measure.tile.runner import host_target_text

    if len(asm) != record.num_configs or not all(asm):
        raise ValueError(f"{record.path}: need the assembly of all {record.num_configs} configurations, got {sum(map(bool, asm))}")
    path = cache_path(cache_dir, record)
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_cache(path, record, list(asm), host_target_text())
    return path


def fill_code_feature_cache(records: Sequence[KernelRecord], cache_dir: str | os.PathLike[str], *, deadline: float | None = None,
                            progress: bool = True, timeout: float = 30.0) -> dict[str, Any]:
    """Compile every configuration of `records` whose kernel has no valid cache file yet and write
    one `.npz` per kernel (features, config_text, version, target, the assembly; a file of an older
    feature version whose assembly matches is re-parsed, not compiled). Kernels are done in the order
    given (shuffle it for a partial run that covers every kind; two runs in other orders on one cache
    split the work: a kernel another run wrote meanwhile is skipped); `deadline` (time.time()) stops
    before a kernel that would start after it. A configuration whose compile takes longer than
    `timeout` seconds (in a child process) gets NaN features, XGBoost's missing value. Returns
    counts and the compile rate."""
    from tqdm import tqdm

    from cost_model.measure.tile.runner import host_target_text

    out = Path(cache_dir)
    out.mkdir(parents=True, exist_ok=True)
    target_text = host_target_text()
    worker = CompileProbe(timeout)  # compiles in a child process, so one LLVM never finishes is abandoned
    todo = [r for r in records if _read_cache(cache_path(out, r), r) is None]
    done = compiled = reparsed = timed_out = by_others = 0
    seconds = 0.0
    bar = tqdm(total=sum(r.num_configs for r in todo), desc="compile configs", unit="config", disable=not progress)
    for record in todo:
        if deadline is not None and time.time() >= deadline:
            break
        path = cache_path(out, record)
        if _read_cache(path, record) is not None:  # a second fill on the same cache (another order) did it meanwhile
            by_others += 1
            bar.update(record.num_configs)
            continue
        asm = cached_asm(path, record)
        if asm is not None:
            _write_cache(path, record, asm, target_text)
            reparsed += 1
            bar.update(record.num_configs)
            continue
        began = time.perf_counter()
        asm = []
        for text in record.config_text:
            asm.append(worker.asm(str(record.meta["kind"]), tuple(int(d) for d in record.meta["dims"]), text, record.meta.get("dtype", "float32"),
                                  record.meta.get("out_dtype", "")))
            if not asm[-1]:
                timed_out += 1
                logger.warning("%s: compile of %s took over %.0f s: NaN features", Path(record.path).name, text, timeout)
            bar.update(1)
        _write_cache(path, record, asm, target_text)
        seconds += time.perf_counter() - began
        compiled += len(asm)
        done += 1
        bar.set_postfix(rate=f"{compiled / max(seconds, 1e-9):.1f}/s")
    bar.close()
    worker.close()
    return {"kernels_compiled": done, "kernels_reparsed": reparsed, "timed_out": timed_out, "timeout_s": timeout,
            "kernels_cached_before": len(records) - len(todo), "kernels_filled_by_another_run": by_others,
            "kernels_left": len(todo) - done - reparsed - by_others, "configs_compiled": compiled, "seconds": seconds,
            "configs_per_second": compiled / seconds if seconds else float("nan"), "target": target_text}


def load_code_features(records: Sequence[KernelRecord], cache_dir: str | os.PathLike[str], feature_set: str = "s16") -> list[np.ndarray | None]:
    """Each record's (C, code_feature_set_width(feature_set)) cached features, None where the cache
    has none (or a stale one)."""
    _base_width(feature_set)
    return [_read_cache(cache_path(cache_dir, r), r, feature_set) for r in records]


def extended_records(records: Sequence[KernelRecord], cache_dir: str | os.PathLike[str], feature_set: str = "s16") -> list[KernelRecord | None]:
    """Per record, a copy whose `config_feat` ends with the code feature block, or None where the
    cache has none (positions kept, so split indices still apply)."""
    return [None if feats is None else replace(record, config_feat=np.concatenate([record.config_feat, feats], axis=1).astype(np.float32))
            for record, feats in zip(records, load_code_features(records, cache_dir, feature_set))]


def with_code_features(records: Sequence[KernelRecord], cache_dir: str | os.PathLike[str], *, require: bool = True,
                       feature_set: str = "s16") -> list[KernelRecord]:
    """Copies of `records` whose `config_feat` ends with the code feature block. `require`:
    DatasetError naming the first kernel without cached features; else those kernels are left out."""
    out = []
    for record, extended in zip(records, extended_records(records, cache_dir, feature_set)):
        if extended is None:
            if require:
                raise DatasetError(f"no cached code features for this kernel in {os.fspath(cache_dir)} (fill_code_feature_cache)", file=record.path)
            continue
        out.append(extended)
    return out
