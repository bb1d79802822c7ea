"""The whole loop nest of a tile configuration's compiled code (seventeenth session), beside the
counts of `tile_code_features` (which see the compute functions and the innermost loops only).

Loops are natural loops of each compute function's control-flow graph (basic blocks from labels
and branches; a back edge is a branch to a block that dominates it; one loop per header), not the
text ranges `tile_code_features` brackets (there a backward branch to any label above opens a
loop: on some unroll-512 convolutions that read 232 loops 184 deep where the graph has 7, 7 deep).
Each loop's own body is the instructions it holds that no loop nested in it
holds. Levels are counted from the inside: level 0 holds the loops at the deepest nesting, level 1
the loops one level out, and so on, up to `NEST_LEVELS` levels (a shallower nest leaves its outer
levels zero). Per level: the loops' count, own instructions, float operations x lanes (FMA = 2),
loads, stores, and the largest trip count read off the code:

- a compare with an immediate before the loop's back edge (or at its header, for a loop whose back
  edge is an unconditional jump) against a register the loop steps by an immediate
  (`add $s` / `inc` / `sub` / `lea s(r), r`): trip = ceil(bound / step), bound + 1 for `<=`
  branches (the loop's start value is not read: a loop that starts above 0 is over-counted);
- a register counted up to zero (`add $s, r` / `inc` / `sub` setting the flags of the branch) and set
  to an immediate before the loop header: trip = |start| / |step|;
- else unknown (0 in the features, so "unknown" is a value of its own; a trip of 1 encodes as 1).

From the trip counts, an estimate of what runs: every loop's own instructions (float ops, loads,
stores) times the product of the trip counts of the loops around it, itself included (an unknown
trip counts as 1), plus the code outside loops; and the share of loops whose trip was read.
Counts enter as log2(1 + n), like the rest of the code features. `NEST_FEATURE_NAMES` names them.

    block = nest_features(asm)                # (NEST_FEATURES,) float32
    stats = nest_stats(asm)                   # the per-loop table underneath (tests, diagnosis)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:
    from cost_model.learned.tile_code_features import Parsed

__all__ = ["NEST_FEATURES", "NEST_FEATURE_NAMES", "NEST_LEVELS", "LoopInfo", "LoopTables", "loop_table", "loop_tables", "natural_loops", "nest_features",
           "nest_stats"]

NEST_LEVELS = 4
_LEVEL_COUNTS = ("loops", "instructions", "flops", "loads", "stores", "trip")
_DYNAMIC = ("instructions", "flops", "loads", "stores")
NEST_FEATURE_NAMES: tuple[str, ...] = (
    *(f"log2_1p_nest{k}_{c}" for k in range(NEST_LEVELS) for c in _LEVEL_COUNTS),
    *(f"log2_1p_dynamic_{c}" for c in _DYNAMIC), "log2_1p_inner_chain_trip", "trip_known_share",
)
NEST_FEATURES = len(NEST_FEATURE_NAMES)

_IMM = re.compile(r"^\$(-?\d+)$")
_LEA_STEP = re.compile(r"^(-?\d+)\(%([a-z0-9]+)\)$")
_CONDITIONAL = re.compile(r"^j(?!mp)[a-z]{1,3}$")


@dataclass
class LoopInfo:
    """One natural loop of a compute function: its header's first instruction and its last
    back-edge branch (indices into the function's instructions; the branch may lie above the
    header), nesting depth (1 = outermost), the enclosing loop, its own body's counts (spill
    traffic: stack loads and stores; lanes: the widest float vector) and its trip count (0 = not read)."""

    first: int
    last: int
    depth: int
    parent: int | None
    instructions: float = 0.0
    flops: float = 0.0
    loads: float = 0.0
    stores: float = 0.0
    trip: int = 0
    spill_traffic: float = 0.0
    lanes: int = 0
    body: frozenset[int] = frozenset()  # the indices of every instruction the loop holds (its natural loop)


def _register_base(operand: str) -> str:
    """%r13d / %r13 / %r13w -> r13, %eax / %rax / %ax -> ax (one name per architectural register)."""
    name = operand.lstrip("%")
    if re.fullmatch(r"r\d+[dwb]?", name):
        return name.rstrip("dwb")
    if re.fullmatch(r"[re]?[a-d]x|[a-d][lh]", name):
        return name[-2] + "x"
    if re.fullmatch(r"[re]?(si|di|sp|bp)l?", name):
        return name.lstrip("re").rstrip("l") if len(name) > 2 else name
    return name


def _step(instrs: Sequence[object], first: int, last: int, register: str) -> int | None:
    """The immediate the loop adds to `register` once per iteration (inc = 1, dec = -1), if one."""
    for instr in instrs[first : last + 1]:
        m, ops = instr.mnemonic, instr.operands  # type: ignore[attr-defined]
        if not ops or _register_base(ops[-1]) != register:
            continue
        if m.startswith("inc") and len(ops) == 1:
            return 1
        if m.startswith("dec") and len(ops) == 1:
            return -1
        if m.startswith(("add", "sub")) and len(ops) == 2 and _IMM.match(ops[0]):
            value = int(_IMM.match(ops[0]).group(1))
            return value if m.startswith("add") else -value
        if m.startswith("lea") and len(ops) == 2:
            found = _LEA_STEP.match(ops[0])
            if found and _register_base("%" + found.group(2)) == register:
                return int(found.group(1))
    return None


def _compare_trip(instrs: Sequence[object], first: int, last: int, at: int, branch: str) -> int:
    """Trip count of a loop from `cmp $bound, %reg` at instruction `at` (0: unreadable)."""
    ops = instrs[at].operands  # type: ignore[attr-defined]
    bound = _IMM.match(ops[0]) if len(ops) == 2 else None
    if bound is None or not ops[1].startswith("%"):
        return 0
    step = _step(instrs, first, last, _register_base(ops[1]))
    if not step or step < 0:
        return 0
    limit = int(bound.group(1)) + (1 if branch in ("jle", "jbe", "jg", "ja") else 0)
    return max(0, math.ceil(limit / step))


def _trip(instrs: Sequence[object], first: int, last: int, *, header: int | None = None) -> int:
    """The trip count of the loop spanning instructions first..last (`header`: where its header
    block starts, default `first`; `last`: its last back-edge branch) where the code states it (see
    the module docstring), else 0."""
    header = first if header is None else header
    # the branch that decides another iteration: the latch if conditional, else the first conditional one near the header
    windows = [(max(header, last - 6) if header <= last else max(first, last - 6), last), (header, min(len(instrs) - 1, header + 6))]
    for lo, hi in windows:
        branch_at = next((i for i in range(hi, lo - 1, -1) if _CONDITIONAL.match(instrs[i].mnemonic)), None)  # type: ignore[attr-defined]
        if branch_at is None:
            continue
        branch = instrs[branch_at].mnemonic  # type: ignore[attr-defined]
        for i in range(branch_at - 1, max(first, branch_at - 4) - 1, -1):
            instr = instrs[i]
            m, ops = instr.mnemonic, instr.operands  # type: ignore[attr-defined]
            if m.startswith(("cmp", "vcmp")):
                return _compare_trip(instrs, first, last, i, branch) if m.startswith("cmp") else 0
            if m.startswith("test"):
                return 0
            if m.startswith(("add", "sub", "inc", "dec")) and ops and ops[-1].startswith("%") and i == branch_at - 1:
                # counted to zero: the register's start value is an immediate moved in before the header
                register = _register_base(ops[-1])
                step = _step(instrs, first, last, register)
                for j in range(header - 1, max(-1, header - 40), -1):
                    prior = instrs[j]
                    pops = prior.operands  # type: ignore[attr-defined]
                    if prior.mnemonic.startswith("mov") and len(pops) == 2 and _register_base(pops[1]) == register:  # type: ignore[attr-defined]
                        start = _IMM.match(pops[0])
                        return abs(int(start.group(1))) // abs(step) if start and step else 0
                return 0
    return 0


def _blocks(instrs: Sequence[object], labels: dict[str, int]) -> tuple[list[tuple[int, int]], list[list[int]]]:
    """Basic blocks (first, last instruction index) and their successors, from labels and branches."""
    from cost_model.learned.tile_code_features import _BRANCH

    leaders = {0} | {i for i in labels.values() if i < len(instrs)}
    for i, instr in enumerate(instrs):
        if (_BRANCH.match(instr.mnemonic) or instr.mnemonic.startswith(("ret", "ud2"))) and i + 1 < len(instrs):  # type: ignore[attr-defined]
            leaders.add(i + 1)
    starts = sorted(leaders) if instrs else []
    blocks = [(a, b - 1) for a, b in zip(starts, starts[1:] + [len(instrs)])]
    block_of = {a: k for k, (a, _) in enumerate(blocks)}
    successors: list[list[int]] = []
    for k, (_, last) in enumerate(blocks):
        instr = instrs[last]
        m, ops = instr.mnemonic, instr.operands  # type: ignore[attr-defined]
        out = []
        if _BRANCH.match(m) and ops and ops[0] in labels and labels[ops[0]] in block_of:
            out.append(block_of[labels[ops[0]]])
        if not (m.startswith(("jmp", "ret", "ud2"))) and k + 1 < len(blocks):
            out.append(k + 1)  # falls through
        successors.append(out)
    return blocks, successors


def _dominators(successors: list[list[int]]) -> list[int]:
    """Each block's dominators as a bit mask (entry = block 0; an unreachable block: 0, so it closes
    no loop), by the iterative data-flow algorithm in reverse post-order."""
    n = len(successors)
    if not n:
        return []
    order, seen, stack = [], {0}, [(0, iter(successors[0]))]
    while stack:  # post-order of a depth-first walk from the entry
        node, children = stack[-1]
        child = next((c for c in children if c not in seen), None)
        if child is None:
            order.append(node)
            stack.pop()
        else:
            seen.add(child)
            stack.append((child, iter(successors[child])))
    order.reverse()
    predecessors: list[list[int]] = [[] for _ in range(n)]
    for k, out in enumerate(successors):
        for t in out:
            predecessors[t].append(k)
    everything = (1 << n) - 1
    dom = [0] * n
    for k in order:
        dom[k] = everything
    dom[0] = 1
    changed = True
    while changed:
        changed = False
        for k in order[1:]:
            new = everything
            for q in predecessors[k]:
                if q in seen:
                    new &= dom[q]
            new |= 1 << k
            if new != dom[k]:
                dom[k], changed = new, True
    return dom


def natural_loops(instrs: Sequence[object], labels: dict[str, int]) -> list[tuple[int, int, frozenset[int]]]:
    """Natural loops of one function: (header's first instruction, last back-edge branch, the loop's
    instruction indices), one per header (its back edges' bodies merged). A back edge is a branch
    to a block that dominates it, so a loop is what the control flow says, not what the text
    layout brackets (LLVM places blocks of one loop around others)."""
    blocks, successors = _blocks(instrs, labels)
    dom = _dominators(successors)
    predecessors: list[list[int]] = [[] for _ in blocks]
    for k, out in enumerate(successors):
        for t in out:
            predecessors[t].append(k)
    bodies: dict[int, set[int]] = {}
    latches: dict[int, int] = {}
    for tail, out in enumerate(successors):
        for head in out:
            if dom[tail] >> head & 1:
                body = bodies.setdefault(head, {head})
                stack = [tail]
                while stack:
                    k = stack.pop()
                    if k not in body:
                        body.add(k)
                        stack.extend(predecessors[k])
                latches[head] = max(latches.get(head, -1), blocks[tail][1])
    loops = []
    for head, body in bodies.items():
        indices = frozenset(i for k in body for i in range(blocks[k][0], blocks[k][1] + 1))
        loops.append((blocks[head][0], latches[head], indices))
    return sorted(loops, key=lambda loop: (loop[0], loop[1]))


def loop_table(instrs: Sequence[object], labels: dict[str, int]) -> tuple[list[LoopInfo], set[int]]:
    """`LoopInfo` of each natural loop of one function (`tile_code_features._parse`'s instructions
    and labels), and the indices of the instructions inside any loop."""
    from cost_model.learned.tile_code_features import _LANES, _STACK

    loops = natural_loops(instrs, labels)
    table = []
    for k, (first, last, body) in enumerate(loops):
        around = [j for j, (_, _, other) in enumerate(loops) if j != k and body < other]
        parent = min(around, key=lambda j: len(loops[j][2])) if around else None
        span = (min(body), max(body))
        table.append(LoopInfo(first, last, len(around) + 1, parent, trip=_trip(instrs, span[0], last, header=first), body=body))
    owner: list[int | None] = [None] * len(instrs)  # each instruction's innermost loop
    for k, info in sorted(enumerate(table), key=lambda item: item[1].depth):
        for i in loops[k][2]:
            owner[i] = k
    for i, k in enumerate(owner):
        if k is None:
            continue
        instr, info = instrs[i], table[k]
        info.instructions += 1
        kind = instr.kind  # type: ignore[attr-defined]
        if kind is not None:
            lanes = _LANES[instr.width]  # type: ignore[attr-defined]
            info.flops += lanes * (2 if kind == "fma" else 1)
            info.lanes = max(info.lanes, lanes)
        loads, stores = instr.loads(), instr.stores()  # type: ignore[attr-defined]
        info.loads += len(loads)
        info.stores += len(stores)
        info.spill_traffic += sum(bool(_STACK.search(o)) for o in loads + stores)
    return table, {i for i, k in enumerate(owner) if k is not None}


LoopTables = list[tuple[list[LoopInfo], set[int]]]


def loop_tables(parsed: Parsed) -> LoopTables:
    """`loop_table` of each of `compute_functions`' functions: computed once per candidate for both
    the nest block and the natural-loop columns of `tile_code_features`."""
    return [loop_table(instrs, labels) for instrs, labels, _ in parsed]


def _nest(asm: str | Parsed, tables: LoopTables | None = None) -> tuple[list[LoopInfo], dict[str, float]]:
    """Every natural loop of the compute functions of `asm` (or of its `compute_functions`, whose
    `loop_tables` may be given; all functions' loops in one list, copies; `parent` indexes that
    list), and the counts of the instructions outside every loop."""
    from dataclasses import replace

    from cost_model.learned.tile_code_features import _LANES, compute_functions

    parsed = compute_functions(asm) if isinstance(asm, str) else asm
    out: list[LoopInfo] = []
    counts = dict.fromkeys(_DYNAMIC, 0.0)
    for (instrs, _, _), (table, inside) in zip(parsed, loop_tables(parsed) if tables is None else tables):
        base = len(out)
        out.extend(replace(info, parent=None if info.parent is None else info.parent + base) for info in table)
        for i, instr in enumerate(instrs):
            if i in inside:
                continue
            counts["instructions"] += 1
            if instr.kind is not None:
                counts["flops"] += _LANES[instr.width] * (2 if instr.kind == "fma" else 1)
            counts["loads"] += len(instr.loads())
            counts["stores"] += len(instr.stores())
    return out, counts


def nest_stats(asm: str | Parsed) -> list[LoopInfo]:
    """Every natural loop of the compute functions of `asm` (all functions' loops in one list;
    `parent` indexes that list)."""
    return _nest(asm)[0]


def nest_features(asm: str | Parsed, tables: LoopTables | None = None) -> np.ndarray:
    """(NEST_FEATURES,) float32 of a module's assembly text or its `compute_functions` (and their
    `loop_tables`, if computed already; see the module docstring)."""
    table, dynamic = _nest(asm, tables)
    levels = np.zeros((NEST_LEVELS, len(_LEVEL_COUNTS)))
    deepest = max((info.depth for info in table), default=0)
    for info in table:
        level = deepest - info.depth
        if level >= NEST_LEVELS:
            continue
        row = levels[level]
        row[0] += 1
        row[1] += info.instructions
        row[2] += info.flops
        row[3] += info.loads
        row[4] += info.stores
        row[5] = max(row[5], info.trip)
    chain = 0.0
    for k, info in enumerate(table):
        times, at = 1.0, k
        while at is not None:
            times *= max(table[at].trip, 1)
            at = table[at].parent
        for c in _DYNAMIC:
            dynamic[c] += getattr(info, c) * times
        if info.depth == deepest:
            chain = max(chain, times)
    known = float(np.mean([info.trip > 0 for info in table])) if table else 0.0
    values = [*np.log2(1.0 + levels).ravel(), *(math.log2(1.0 + dynamic[c]) for c in _DYNAMIC), math.log2(1.0 + chain), known]
    return np.array(values, dtype=np.float32)
