"""Polish: a short local search from GO's best answer and other starts, then joint variants.

GO's episodes sample whole-graph decisions; the last few percent usually hide in single-node
moves that a sampled episode rarely makes alone (RESULTS.md h5: every cell GO lost was lost to
fusion-aware local search, by 0.1-10.7%). So a search run (fine-tune, GO-one) ends with:
1. the project's own iterated local search (`passes.placement.local_search`, what `dp-ls` runs)
   on a `PlacementContext` over the environment's own simulation problem, every evaluation scored
   as `GraphEnvironment.score_decisions` scores a placement: the framework's default fusion kept
   within each device (a graph without a known default keeps the answer's groups that way) and
   the answer's priorities (`polish(priorities=)`: or the default ones, or each start under
   both). Re-deciding the policy's merges under every move would cost 20x a simulation (the
   decoder's legality checks), so they are not. Its moves carry whole fusion
   groups (the same groups, `local_search.fusion_units`), not single nodes: moving one member
   splits its group, which runs unfused, so most single-node moves are wasted simulations (1000
   simulations from single-device on 2xV100: wavenet training 243.3 ms with group moves vs 253.0
   with node moves, amoebanet inference 5.25 vs 5.92 ms);
2. the joint variants (rl/joint.py: merging beyond the default, critical-path-first priorities)
   of the searched placement, decoded as the policy's actions (none in the placement-only
   ablation).
Where the local optimum lands depends on the start (RESULTS.md h6: the three cells GO lost were
lost to the same search from dp's placement, at three seeds), so with `others` (the policy's
placements, then the warm start's distinct classical placements, fastest first as this search
scores them: `TrainConfig.polish_start_order`, RESULTS.md h22) the search tries several starts. Since the
forty-fourth session fine-tune, GO-one and the no-policy control (since the forty-fifth the zero-shot's short search
too) take them one after another (`race="sequential"`,
`TrainConfig.polish_race`, `_sequential`; RESULTS.md h): fastest first as the search scores them, each until its iterated local search stalls on
its own, so a search that keeps finding gains keeps every second (the race gave its winner about 7/12 of them). With
`race="halving"` (their default before; still `polish()`'s own default when called directly) it
races its starts by successive halving:
in each round every surviving start's search continues for an equal slice of what is left (split
equally between the rounds to come), is scored after steps 1 and 2, and the slower half drops out
(4 starts: 4, 2, then 1 search a round). The early leader is often not the final one (wavenet
training 2xV100: the answer's search leads after 250 simulations, single-device's is 5% ahead
after 1000), so no start is dropped after one short probe. Only as many starts are raced as can
get `MIN_SLICE` simulations each in the first round, estimated from one timed simulation. The
fastest of the answer and every searched result is kept. The search stops at its CPU seconds
(what the run's budget left, at least `TrainConfig.polish_min_fraction` of it) or evaluation cap.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from compiler_opt.rl.config import POLISH_PRIORITIES, POLISH_RACES, START_ORDERS
from cost_model.decisions import DecisionError, Decisions
from passes.placement.context import PlacementContext
from passes.placement.context_base import BudgetExhausted

if TYPE_CHECKING:
    from compiler_opt.rl.environment import EpisodeScore, GraphEnvironment
    from compiler_opt.rl.warm_start import Seed

__all__ = ["MIN_SLICE", "Polished", "SeedsAndPolish", "polish", "seeds_and_polish", "start_candidates", "start_placements"]

logger = logging.getLogger(__name__)

# Successive halving over the starts: the fewest evaluations a start's first-round slice may get
# (fewer starts are raced when the budget cannot give each that many).
MIN_SLICE = 100


@dataclass(frozen=True)
class Polished:
    decisions: Decisions  # the polished answer (the start's when nothing better was found)
    score: EpisodeScore
    start_step_s: float
    evaluations: int
    cpu_seconds: float
    starts: int = 1  # starts raced (the answer's first; with priorities="both" each placement twice, answer's then default priorities)
    winner: int = 0  # the start whose search continued (0: the answer's placement under the first priority source)
    cpu_budget: float = 0.0  # the CPU seconds it was given (0: an evaluation cap only)
    searches: int = 1  # local searches run (halving: one per start and round; sequential: one per start, then continuations)

    @property
    def improved(self) -> bool:
        return self.score.step_time_s < self.start_step_s


class _PolishContext(PlacementContext):
    """The environment's problem as a placement context with a CPU deadline; decisions the
    simulator rejects score +inf instead of raising (a search step, not a user error)."""

    def __init__(self, env: GraphEnvironment, base: Decisions, *, deadline: float, evaluations: int | None) -> None:
        super().__init__(env.problem, objective="latency", budget=evaluations, base=base, fuse_within_device=True)
        self.deadline = deadline

    def limit(self, deadline: float, evaluations: int | None, *, end: float, cap: int | None) -> None:
        """The next search's bounds: `deadline` and `evaluations` more, never past the whole
        polish's `end` and evaluation `cap`."""
        self.deadline = min(deadline, end)
        budget = [b for b in (None if evaluations is None else self.evaluations + evaluations, cap) if b is not None]
        self.budget = min(budget) if budget else None

    def _count(self) -> None:
        if time.process_time() >= self.deadline:
            raise BudgetExhausted("the polish's CPU seconds are spent", field="polish_fraction")
        super()._count()

    def evaluate_key(self, device: np.ndarray) -> tuple[float, ...]:
        try:
            return super().evaluate_key(device)
        except DecisionError:
            return (math.inf,)


def _base(env: GraphEnvironment, start: Decisions, priorities: str = "answer") -> Decisions:
    """What every moved placement keeps within each device: the framework's whole default groups
    (a group the placement split fuses again once its members share a device), or the answer's
    own groups on a graph without a known default; the answer's priorities, or with `priorities="default"` the
    default ones (what a classical placement is scored with)."""
    groups = env.default_groups if env.default_groups is not None else np.asarray(start.fusion_group)
    order = Decisions.default(len(start.device)).priority if priorities == "default" else start.priority
    return Decisions(np.asarray(start.device), np.asarray(groups, dtype=np.int32), np.asarray(order, dtype=np.float64))


def polish(
    env: GraphEnvironment,
    start: Decisions,
    start_score: EpisodeScore,
    *,
    cpu_seconds: float,
    evaluations: int | None = None,
    seed: int = 0,
    fusion_levels: int = 0,
    priority_levels: int = 0,
    others: Sequence[np.ndarray] = (),
    pool: Sequence[np.ndarray] = (),
    max_starts: int | None = None,
    group_moves: bool = True,
    move_order: str = "random",
    priorities: str = "answer",
    race: str = "halving",
) -> Polished:
    """Local search from `start` for at most `cpu_seconds` (0: no time limit) and `evaluations`
    simulations (None: no cap; one of the two must bound it), then the joint variants of its
    placement when `fusion_levels` (the policy's levels; 0: none) is given. `others`: more start
    placements ((N,) device arrays) raced against `start`'s, as given; `pool`: more candidates,
    of which the fastest under this search's own scoring fill the race up to `max_starts` starts
    (one simulation each; `_fill_from_pool`); `group_moves`: the search moves whole fusion groups,
    else single nodes (module docstring); `move_order`: the local search's (`local_search.MOVE_ORDERS`);
    `priorities` (`POLISH_PRIORITIES`): the priorities the search scores with, the answer's, the default ones, or
    both (each start raced under each, the answer's first); `race` (`POLISH_RACES`): how the starts share the seconds,
    "halving" (successive halving, module docstring) or "sequential" (`_sequential`)."""
    if cpu_seconds <= 0 and evaluations is None:
        raise ValueError("polish needs a CPU-second or an evaluation bound")
    if priorities not in POLISH_PRIORITIES:
        raise ValueError(f"polish priorities {priorities!r}: expected one of {', '.join(POLISH_PRIORITIES)}")
    if race not in POLISH_RACES:
        raise ValueError(f"polish race {race!r}: expected one of {', '.join(POLISH_RACES)}")
    began = time.process_time()
    end = began + cpu_seconds if cpu_seconds > 0 else math.inf
    starts = _distinct([np.asarray(start.device, dtype=np.int64), *(np.asarray(o, dtype=np.int64) for o in others)])
    from passes.placement.local_search import fusion_units

    sources = ["answer", "default"] if priorities == "both" else [priorities]
    bases = {source: _base(env, start, source) for source in sources}
    ctxs = {source: _PolishContext(env, bases[source], deadline=end, evaluations=evaluations) for source in sources}
    ctx = ctxs[sources[0]]  # orders the pool and times the affordable starts
    if pool:
        starts = _fill_from_pool(ctx, starts, pool, len(starts) + len(pool) if max_starts is None else max_starts)
    entries = [(placement, source) for placement in starts for source in sources]  # a start under each priority source
    if len(entries) > 1 and race == "halving":
        entries = entries[: _affordable_starts(ctx, entries[0][0], len(entries), cpu_seconds, evaluations)]
    searches = _Race(env, fusion_levels, priority_levels, fusion_units(bases[sources[0]].fusion_group) if group_moves else None, move_order)
    current = [placement for placement, _ in entries]  # per entry: where its search stands
    scores: list[EpisodeScore | None] = [None] * len(entries)
    alive = list(range(len(entries)))

    def spent_evaluations() -> int:
        return sum(c.evaluations for c in ctxs.values())

    if race == "sequential":
        alive = _sequential(searches, [ctxs[source] for _, source in entries], current, scores, end=end, evaluations=evaluations,
                            spent=spent_evaluations, seed=seed)
    else:  # successive halving
        rounds = _rounds(len(entries))
        for r in range(rounds):
            left = rounds - r  # this round and the ones after share what is left equally
            cpu_left = end - time.process_time()
            evals_left = None if evaluations is None else evaluations - spent_evaluations()
            if (cpu_seconds > 0 and cpu_left <= 0) or (evals_left is not None and evals_left <= 0):
                break
            for i in alive:
                entry_ctx = ctxs[entries[i][1]]
                entry_ctx.limit(
                    time.process_time() + cpu_left / left / len(alive) if cpu_seconds > 0 else math.inf,
                    None if evals_left is None else max(1, evals_left // left // len(alive)),
                    end=end, cap=None if evaluations is None else entry_ctx.evaluations + evaluations - spent_evaluations(),
                )
                current[i], scores[i] = searches.run(entry_ctx, current[i], seed + i + r * len(entries))
            alive = sorted(alive, key=lambda i: _key(scores[i]))[: max(1, (len(alive) + 1) // 2)]
    best = (start, start_score)
    for candidate, moved in searches.results:
        if _key(moved) < _key(best[1]):
            best = (candidate, moved)
    spent = time.process_time() - began
    logger.info(
        "%s: polish %.4g -> %.4g s from %d start(s) in %d evaluations and %d variants (%.1f CPU s)",
        env.label, start_score.step_time_s, best[1].step_time_s, len(entries), spent_evaluations(), searches.variants, spent,
    )
    return Polished(best[0], best[1], start_score.step_time_s, spent_evaluations(), spent, len(entries), alive[0], max(cpu_seconds, 0.0),
                    len(searches.results))


@dataclass(frozen=True)
class SeedsAndPolish:
    seeds: list[Seed]  # every warm-start seed run
    head: Seed  # the best fitting one: the polish's first start
    polished: Polished
    seed_cpu_seconds: float  # CPU seconds of the seeds (the polish had the rest)


def seeds_and_polish(
    env: GraphEnvironment,
    seconds: float,
    *,
    seed: int = 0,
    fusion_levels: int = 4,
    priority_levels: int = 8,
    joint: bool = True,
    starts: int | None = None,
    group_moves: bool = True,
    move_order: str = "random",
    seed_seconds: float | None = None,
    first_seeds: Sequence[str] | None = None,
    start_order: str | None = None,
    priorities: str | None = None,
    race: str | None = None,
) -> SeedsAndPolish:
    """The search without a policy, in `seconds` CPU seconds: fine-tune's warm start (its seeds
    and joint seeds, within its share of the budget, or `seed_seconds` when given: 0 runs every
    seed, as a warm zero-shot with `seed_seconds=0` does) and the polish from the best fitting seed,
    raced against the other seeds' placements, on every second left. `fusion_levels` /
    `priority_levels`: the levels the joint seeds are expressed in; `joint`: the polish scores
    each result's joint variants in those levels too; `starts`: the starts raced (default
    `TrainConfig.polish_starts`), `first_seeds` the seeds raced first (default
    `TrainConfig.polish_first_seeds`), `start_order` how the other seeds are picked (default
    `TrainConfig.polish_start_order`), `priorities` the priorities its search scores with (default
    `TrainConfig.polish_priorities`), `race` how its starts share the seconds (default `TrainConfig.polish_race`). `bench_go`'s `seeds+polish` control and imitation targets."""
    from compiler_opt.rl.config import TrainConfig
    from compiler_opt.rl.warm_start import fitting_seeds, warm_start_seeds
    from graph_ir._gc import gc_frozen

    began = time.process_time()
    config = TrainConfig(mode="fine-tune", workloads=[env.name], max_cpu_seconds=seconds)
    with gc_frozen():
        seeds = warm_start_seeds(
            env, config.seed_methods(), fusion_levels=fusion_levels, priority_levels=priority_levels,
            cpu_budget=seconds * config.warm_start_fraction if seed_seconds is None else seed_seconds,
        )
        fitting = fitting_seeds(seeds)
        if not fitting:
            raise ValueError(f"{env.label}: no warm-start seed fits in memory")
        seed_cpu = time.process_time() - began
        head = fitting[0]
        count = config.polish_starts if starts is None else starts
        others, pool = start_candidates(
            head.decisions.device, seeds, count - 1, prefer=config.polish_first_seeds if first_seeds is None else first_seeds,
            order=config.polish_start_order if start_order is None else start_order,
        )
        done = polish(
            env, head.decisions, head.score, cpu_seconds=max(seconds - seed_cpu, 1e-3), seed=seed,
            fusion_levels=fusion_levels if joint else 0, priority_levels=priority_levels if joint else 0,
            others=others, pool=pool, max_starts=count, group_moves=group_moves, move_order=move_order,
            priorities=config.polish_priorities if priorities is None else priorities,
            race=config.polish_race if race is None else race,
        )
    return SeedsAndPolish(seeds, head, done, seed_cpu)


def start_placements(
    answer: np.ndarray, seeds: Sequence[Seed], count: int, first: Sequence[np.ndarray] = (), prefer: Sequence[str] = ()
) -> list[np.ndarray]:
    """Up to `count` distinct placements other than `answer`: the polish's other starts. `first`
    (the policy's decodings) come before the fitting warm-start seeds': those of the methods in
    `prefer` (in that order), then the rest, fastest first."""
    fitting, preferred = _fitting_and_preferred(seeds, prefer)
    placements = _distinct([np.asarray(answer), *(np.asarray(p) for p in first), *(np.asarray(s.decisions.device) for s in preferred + fitting)])
    return placements[1 : count + 1]


def _fitting_and_preferred(seeds: Sequence[Seed], prefer: Sequence[str]) -> tuple[list[Seed], list[Seed]]:
    """The fitting seeds fastest first, and those of the methods in `prefer` (in that order)."""
    from compiler_opt.rl.warm_start import fitting_seeds

    fitting = fitting_seeds(seeds)
    return fitting, [s for method in prefer for s in fitting if s.method == method]


def start_candidates(
    answer: np.ndarray, seeds: Sequence[Seed], count: int, first: Sequence[np.ndarray] = (), prefer: Sequence[str] = (), *, order: str = "seed"
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The polish's other starts as (`others`, `pool`) for `polish`, up to `count` in all.
    `order="seed"`: `start_placements`' list, no pool (the fitting seeds fastest by their own
    scores). `order="polish"`: `first` and the `prefer` seeds raced as given, the other fitting
    seeds' placements a pool that `polish` orders by its own scoring (`_fill_from_pool`)."""
    if order == "seed":
        return start_placements(answer, seeds, count, first, prefer), []
    if order != "polish":
        raise ValueError(f"start order {order!r}: expected one of {', '.join(START_ORDERS)}")
    fitting, preferred = _fitting_and_preferred(seeds, prefer)
    raced = _distinct([np.asarray(answer), *(np.asarray(p) for p in first), *(np.asarray(s.decisions.device) for s in preferred)])[1 : count + 1]
    return raced, [np.asarray(s.decisions.device) for s in fitting]


def _key(score: EpisodeScore) -> tuple[bool, float]:
    """Fitting answers first, then the faster."""
    return (bool(score.oom or score.invalid), score.step_time_s)


def _rounds(starts: int) -> int:
    """Successive halving's rounds for `starts` starts (4 -> 2 -> 1: three)."""
    return math.ceil(math.log2(starts)) + 1 if starts > 1 else 1


def _sequential(searches: _Race, ctxs: list[_PolishContext], current: list[np.ndarray], scores: list[EpisodeScore | None], *, end: float,
                evaluations: int | None, spent: Callable[[], int], seed: int) -> list[int]:
    """The starts one after another instead of raced (forty-fourth session): the fastest as the search scores them first,
    each searched until its iterated local search stops on its own (`local_search`'s `max_rounds` kicks in a row without
    a gain) or the polish's bounds end it; then, while seconds are left, the best search continues from where it
    ended with fresh kicks, as long as a continuation still finds something. Where every start's search converges alike
    (RESULTS.md (h), fortieth session: amoebanet 2xV100) the first start gets every second, as one long search does;
    where a search stalls early the next start gets the rest. Fills `current` / `scores`; returns [the winner]."""

    def left() -> bool:
        return time.process_time() < end and (evaluations is None or spent() < evaluations)

    def bound(ctx: _PolishContext) -> None:
        ctx.limit(end, None, end=end, cap=None if evaluations is None else ctx.evaluations + evaluations - spent())

    keys: list[tuple[float, ...]] = []
    for placement, ctx in zip(current, ctxs):
        try:
            keys.append(ctx.evaluate_key(placement))
        except BudgetExhausted:
            keys.append((math.inf,))
    order = sorted(range(len(current)), key=lambda i: keys[i])
    searched: list[int] = []
    for k, i in enumerate(order):
        if not left():
            break
        bound(ctxs[i])
        current[i], scores[i] = searches.run(ctxs[i], current[i], seed + k)
        searched.append(i)
    if not searched:
        return [order[0]]
    best = min(searched, key=lambda i: _key(scores[i]))  # type: ignore[arg-type]
    turn = len(order)
    while left():
        bound(ctxs[best])
        before = _key(scores[best])  # type: ignore[arg-type]
        current[best], scores[best] = searches.run(ctxs[best], current[best], seed + turn)
        turn += 1
        if not _key(scores[best]) < before:
            break
    return [best]


def _fill_from_pool(ctx: _PolishContext, starts: list[np.ndarray], pool: Sequence[np.ndarray], cap: int) -> list[np.ndarray]:
    """`starts` and, up to `cap` starts in all, the pool's distinct placements fastest first as the
    search itself scores them: the framework's default groups kept within each device and the
    answer's priorities. A seed's own score uses its own fusion and priorities, which can rank a
    placement the search would start well from last (gnmt-2 inference 8xV100: single-device,
    slowest seed of six by its own score and fastest of six here; RESULTS.md h22)."""
    extra = [p for p in _distinct([np.asarray(p, dtype=np.int64) for p in pool]) if not any(np.array_equal(p, s) for s in starts)]
    room = cap - len(starts)
    if room <= 0 or not extra:
        return starts
    try:
        keys = [ctx.evaluate_key(p) for p in extra]
    except BudgetExhausted:
        return starts
    order = sorted(range(len(extra)), key=lambda i: keys[i])
    return [*starts, *(extra[i] for i in order[:room])]


def _affordable_starts(ctx: _PolishContext, first: np.ndarray, count: int, cpu_seconds: float, evaluations: int | None) -> int:
    """The most of `count` starts whose first-round slices get `MIN_SLICE` evaluations each, the
    polish's evaluations estimated from one timed evaluation (at most `evaluations`)."""
    began = time.process_time()
    ctx.evaluate_key(first)
    per = max(time.process_time() - began, 1e-6)
    total = cpu_seconds / per if cpu_seconds > 0 else math.inf
    if evaluations is not None:
        total = min(total, evaluations)
    fits = [k for k in range(1, count + 1) if total / _rounds(k) / k >= MIN_SLICE]
    return max(fits, default=1)


class _Race:
    """Searches from several starts, each on its priority source's context; each result scored after its joint variants."""

    def __init__(self, env: GraphEnvironment, fusion_levels: int, priority_levels: int, units: np.ndarray | None, order: str = "random") -> None:
        self.env, self.units, self.order = env, units, order
        self.fusion_levels, self.priority_levels = fusion_levels, priority_levels
        self.results: list[tuple[Decisions, EpisodeScore]] = []  # per run: its best joint variant
        self.variants = 0

    def run(self, ctx: _PolishContext, device: np.ndarray, seed: int) -> tuple[np.ndarray, EpisodeScore]:
        """Search from `device` on `ctx` within its current limits: where the search ended and
        the score of its best joint variant."""
        from compiler_opt.rl.joint import best_joint_variant
        from passes.placement.local_search import local_search

        found = local_search(ctx, device, seed=seed, units=self.units, order=self.order)
        searched = ctx.decisions(found)
        candidate = Decisions(np.asarray(found, dtype=np.int32), searched.fusion_group, searched.priority)
        moved = self.env.score_decisions(candidate)
        if self.fusion_levels:
            _, candidate, moved, tried = best_joint_variant(
                self.env, candidate, moved, fusion_levels=self.fusion_levels, priority_levels=self.priority_levels
            )
            self.variants += tried
        self.results.append((candidate, moved))
        return found, moved


def _distinct(devices: list[np.ndarray]) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    for device in devices:
        if not any(np.array_equal(device, d) for d in out):
            out.append(device)
    return out
