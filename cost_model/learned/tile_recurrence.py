"""Dependence chains in a tile configuration's innermost loops (twenty-sixth session): what bounds
an iteration besides the instruction counts the other code features give.

For each innermost natural loop of the compiled code (`tile_nest_features.loop_tables`), one pass over
its body in program order (from the header, wrapping past the latch) follows values through vector
registers (xmm / ymm / zmm N are one register) and memory operands, with rough latencies of a recent
x86 core (float add / mul / FMA 4 cycles, divide 11, a load 5, a gather 20, a store then a load of the
same operand 5, a lane permute 3, other vector work 1, a register copy 0; a zeroing idiom starts a
fresh value):

- `critical path`: the longest latency chain within one iteration;
- `recurrence`: the longest chain from a value the iteration reads before it writes it back to that
  same register or memory operand (a loop-carried accumulator: the next iteration waits for it).
  Memory operands whose address registers the loop steps are not carried;
- `resource bound`: max(instructions / 4, float ops / 2, loads / 2, stores) cycles, from the ports;
- `carried chains`: how many registers / operands carry a float chain (>= 4 cycles) to the next
  iteration (independent accumulators hide the add latency; one accumulator serialises the loop).

The loop that runs most (own instructions x the trip counts around it, unknown trips 1) gives the
`hot_*` columns; every innermost loop's max(recurrence, resource bound) x its executions summed gives
an estimate of the cycles (`est_cycles`) and the share of them that the recurrence bounds. Counts enter
as log2(1 + n). A static estimate in the manner of LLVM's llvm-mca, which is not a Python library and
not on every machine: written here for the few things a tile ranker needs.

    block = recurrence_features(asm)      # (RECURRENCE_FEATURES,) float32

Measured (RESULTS (i), twenty-sixth session, pre-registered on 8 split runs): appended to the s18 code
features it made the tile ranker's top-1 worse on every run and its tau no better, so no code feature set
reads it; `benchmarks/bench_tile_recurrence.py` is the experiment.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:
    from cost_model.learned.tile_code_features import Parsed
    from cost_model.learned.tile_nest_features import LoopTables

__all__ = ["RECURRENCE_FEATURES", "RECURRENCE_FEATURE_NAMES", "LoopChains", "loop_chains", "recurrence_features"]

RECURRENCE_FEATURE_NAMES: tuple[str, ...] = (
    "log2_1p_hot_recurrence", "log2_1p_hot_critical_path", "log2_1p_hot_resource_bound", "log2_1p_hot_carried_chains",
    "hot_recurrence_bound", "hot_recurrence_through_memory", "log2_1p_hot_flops_per_cycle", "log2_1p_est_cycles", "est_recurrence_share",
)
RECURRENCE_FEATURES = len(RECURRENCE_FEATURE_NAMES)

_VREG = re.compile(r"%[xyz]mm(\d+)")
_GPR = re.compile(r"%(r[a-z0-9]+|e[a-z]{2}|[a-z]{2})\b")
_FP_LATENCY = 4
_LATENCY = (  # (mnemonic pattern, cycles); first match wins
    (re.compile(r"^v?(div|sqrt|rcp|rsqrt)"), 11),
    (re.compile(r"^v?(p?gather|gather)"), 20),
    (re.compile(r"^v?f(n)?m(add|sub)"), _FP_LATENCY),
    (re.compile(r"^v?(add|sub|mul|min|max|hadd)(p|s)[sd]$"), _FP_LATENCY),
    (re.compile(r"^v?(cvt|round)"), 4),
    (re.compile(r"^v?(perm|extract|insert|broadcast|shuf|unpck|pshuf|palignr|compress|expand)"), 3),
)
_READS_DESTINATION = re.compile(r"^(v?f(n)?m(add|sub)|v?p?gather|vperm[ti]2)")
_LOAD_LATENCY, _FORWARD_LATENCY = 5, 5


class LoopChains:
    """One innermost loop's chains (cycles) and counts."""

    __slots__ = ("recurrence", "critical_path", "resource_bound", "carried_chains", "through_memory", "flops")

    def __init__(self, recurrence: float, critical_path: float, resource_bound: float, carried_chains: int, through_memory: bool, flops: float) -> None:
        self.recurrence, self.critical_path, self.resource_bound = recurrence, critical_path, resource_bound
        self.carried_chains, self.through_memory, self.flops = carried_chains, through_memory, flops

    @property
    def bound(self) -> float:
        return max(self.recurrence, self.resource_bound, 1.0)


def _latency(mnemonic: str) -> int:
    for pattern, cycles in _LATENCY:
        if pattern.match(mnemonic):
            return cycles
    return 1


def _vector(operand: str) -> str | None:
    found = _VREG.search(operand.split("{")[0])
    return f"v{found.group(1)}" if found and "(" not in operand else None


def _gpr(name: str) -> str:
    """One name per 64-bit register: ecx -> rcx, r8d -> r8."""
    if len(name) == 3 and name[0] == "e":
        return "r" + name[1:]
    return name[:-1] if name[0] == "r" and name[-1] in "dwb" and name[1:-1].isdigit() else name


def _address_registers(operand: str) -> set[str]:
    return {_gpr(name) for name in _GPR.findall(operand)}


def _locations(instr: object, moving: set[str]) -> tuple[list[str], str | None, bool, bool]:
    """(sources, destination, destination is memory, a zeroing idiom) as location keys: `vN` for a
    vector register, `m:<operand>` for a memory operand whose address registers the loop does not step."""
    from cost_model.learned.tile_code_features import _MEM

    mnemonic, operands = instr.mnemonic, instr.operands  # type: ignore[attr-defined]
    if len(operands) < 2 or mnemonic.startswith(("cmp", "test", "vcmp", "vptest", "vucomi", "vcomi", "ucomi", "lea", "prefetch", "j", "kx", "kmov", "kand", "kor")):
        return [], None, False, False
    keys = []
    for operand in operands:
        if _MEM.search(operand):
            address = _address_registers(operand)
            keys.append(None if address & moving else f"m:{operand.split('{')[0]}")
        else:
            keys.append(_vector(operand))
    *sources, destination = keys
    last = operands[-1]
    is_memory = bool(_MEM.search(last))
    zeroing = bool(re.match(r"^v?p?xor", mnemonic)) and len(set(keys)) == 1 and destination is not None and not is_memory
    reads = [k for k in sources if k is not None]
    merges = "{%k" in last and "{z}" not in last
    two_operand = len(operands) == 2 and not mnemonic.startswith(("v", "mov", "cvt", "pmov", "movs"))
    if destination is not None and not is_memory and (_READS_DESTINATION.match(mnemonic) or merges or two_operand):
        reads.append(destination)  # accumulates into its destination (FMA, gather's merge, masked merge, two-operand SSE)
    return reads, destination, is_memory, zeroing


def loop_chains(instrs: Sequence[object], body: Sequence[int], header: int, moving: set[str]) -> LoopChains:
    """`LoopChains` of one loop whose instruction indices are `body` (header first in program order)."""
    from cost_model.learned.tile_code_features import _LANES

    order = sorted(i for i in body if i >= header) + sorted(i for i in body if i < header)
    depth: dict[str, float] = {}                      # critical path: longest chain to each location's value
    carried: dict[str, tuple[float, str, bool]] = {}  # recurrence: (longest chain from a carried origin, origin, via memory)
    written: set[str] = set()
    read_first: set[str] = set()
    counts = {"instructions": 0.0, "fp": 0.0, "loads": 0.0, "stores": 0.0, "flops": 0.0}
    for i in order:
        instr = instrs[i]
        counts["instructions"] += 1
        kind = instr.kind  # type: ignore[attr-defined]
        if kind is not None:
            counts["fp"] += 1
            counts["flops"] += _LANES[instr.width] * (2 if kind == "fma" else 1)  # type: ignore[attr-defined]
        loads, stores = instr.loads(), instr.stores()  # type: ignore[attr-defined]
        counts["loads"] += len(loads)
        counts["stores"] += len(stores)
        reads, destination, to_memory, zeroing = _locations(instr, moving)
        if destination is None:
            continue
        for key in reads:
            if key not in written:
                read_first.add(key)
        mnemonic = instr.mnemonic  # type: ignore[attr-defined]
        if zeroing:
            depth[destination] = 0.0
            carried.pop(destination, None)
            written.add(destination)
            continue
        latency = 0 if (mnemonic.startswith(("vmov", "mov")) and not loads and not to_memory) else _latency(mnemonic)
        extra = {key: (_FORWARD_LATENCY if key in written else _LOAD_LATENCY) if key.startswith("m:") else 0 for key in reads}
        # an operand loaded from memory the loop steps is ready a load's latency after the iteration starts (off any carried chain)
        loaded = _LOAD_LATENCY if len(loads) > sum(k.startswith("m:") for k in reads) else 0
        start = max([depth.get(k, 0.0) + extra[k] for k in reads] + [loaded])
        depth[destination] = start + latency
        best: tuple[float, str, bool] | None = None
        for key in reads:
            lat, origin, memory = carried.get(key, (0.0, key, key.startswith("m:")) if key not in written else (-1.0, "", False))
            if lat < 0:
                continue
            candidate = (lat + extra[key] + latency, origin, memory or key.startswith("m:"))
            if best is None or candidate[0] > best[0]:
                best = candidate
        if best is None:
            carried.pop(destination, None)
        else:
            carried[destination] = best
        written.add(destination)
    recurrence, chains, through_memory = 0.0, 0, False
    for key in read_first & written:
        lat, origin, memory = carried.get(key, (-1.0, "", False))
        if origin == key and lat > 0:
            if lat >= _FP_LATENCY:
                chains += 1
            if lat > recurrence:
                recurrence, through_memory = lat, memory
    resource = max(counts["instructions"] / 4.0, counts["fp"] / 2.0, counts["loads"] / 2.0, counts["stores"])
    return LoopChains(recurrence, max(depth.values(), default=0.0), resource, chains, through_memory, counts["flops"])


def _moving_registers(instrs: Sequence[object], body: Sequence[int]) -> set[str]:
    """General registers the loop writes (its address steps): memory operands through them move."""
    moving = set()
    for i in body:
        instr = instrs[i]
        operands = instr.operands  # type: ignore[attr-defined]
        if operands and not instr.mnemonic.startswith(("cmp", "test", "j", "v", "prefetch")):  # type: ignore[attr-defined]
            moving.update(_address_registers(operands[-1]) if "(" not in operands[-1] else set())
    return moving


def recurrence_features(asm: str | Parsed, tables: LoopTables | None = None) -> np.ndarray:
    """(RECURRENCE_FEATURES,) float32 of a module's assembly or its `compute_functions` (+ `loop_tables`)."""
    from cost_model.learned.tile_code_features import compute_functions
    from cost_model.learned.tile_nest_features import loop_tables

    parsed = compute_functions(asm) if isinstance(asm, str) else asm
    tables = loop_tables(parsed) if tables is None else tables
    scored: list[tuple[float, LoopChains]] = []  # (executions, chains) per innermost loop
    for (instrs, _, _), (table, _) in zip(parsed, tables):
        parents = {info.parent for info in table if info.parent is not None}
        for k, info in enumerate(table):
            if k in parents:
                continue
            executions, at = 1.0, k
            while at is not None:
                executions *= max(table[at].trip, 1)
                at = table[at].parent
            body = sorted(info.body)
            scored.append((executions, loop_chains(instrs, body, info.first, _moving_registers(instrs, body))))
    if not scored:
        return np.zeros(RECURRENCE_FEATURES, dtype=np.float32)
    executions, hot = max(scored, key=lambda item: item[0] * item[1].bound)
    total = sum(n * c.bound for n, c in scored)
    by_recurrence = sum(n * c.bound for n, c in scored if c.recurrence >= c.resource_bound)
    return np.array([
        math.log2(1.0 + hot.recurrence), math.log2(1.0 + hot.critical_path), math.log2(1.0 + hot.resource_bound), math.log2(1.0 + hot.carried_chains),
        float(hot.recurrence >= hot.resource_bound), float(hot.through_memory), math.log2(1.0 + hot.flops / hot.bound),
        math.log2(1.0 + total), by_recurrence / total if total > 0 else 0.0,
    ], dtype=np.float32)
