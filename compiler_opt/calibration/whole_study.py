"""One whole-graph calibration study: configurations run for real, profiled apart, simulated.

    study = run_study(suite_graph("bert-base"), host_topology(2, shared_executor=False), repeats=5)
    study.correlation["wall"]["profiled-shared"]["spearman"], study.correlation["wall"]["kernels"]

The order of work (see `whole_graph` for the configurations):
1. compile every kernel of every configuration (`GroupExecutor`, isomorphic groups share one
   executable);
2. the profiling pass: every node alone and every fused group of any configuration, each run
   alone on its own seeded inputs (`seed + 1`), interleaved, through fresh in-memory profile
   caches: the `profiled` cost tables (one per clock);
3. the scoring pass over the whole steps, interleaved in a new random order each round, on
   inputs from `seed`; every run is read with two clocks (wall time, this process's CPU time).
   Targets (`TARGETS`): the wall-time median (the step as a user waits for it), the wall-time
   minimum (the least disturbed run) and the CPU-time median. The odd and even rounds (A, B)
   saw the same load history; their agreement is the test-retest noise of each target;
4. simulate every configuration with the roofline of the measured host and with the profiled
   tables, each on independent devices and on one shared executor (`Topology.executors`); no
   kernel may be measured here (`StudyLog.profiled_after_scoring` stays 0); and compute the
   naive baselines.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from cost_model.devices.topology import Topology
from cost_model.profiling.cache import ProfileCache
from cost_model.profiling.calibration import GroupExecutor, correlations, kernel_groups
from cost_model.profiling.costs import ProfiledCosts
from cost_model.profiling.profiler import Profiler
from cost_model.profiling.timing import Measurement
from compiler_opt.calibration.whole_graph import WholeGraph, configurations, naive_baselines
from cost_model.profiling.xla_backend import XlaBackend
from cost_model.simulator.problem import SimulationProblem
from cost_model.simulator.simulate import simulate

__all__ = ["SIM_SOURCES", "BASELINES", "TARGETS", "PassWindow", "StudyLog", "WholeGraphStudy", "pooled_correlations", "run_study", "timed_pass"]

logger = logging.getLogger(__name__)

# What a configuration's step is scored by: (clock, statistic over the runs).
TARGETS = {"wall": ("wall", "median"), "wall-min": ("wall", "min"), "cpu": ("cpu", "median")}
# Simulated predictors: the roofline of the measured host, and the profiled kernel tables (one
# per clock and statistic, `profiled@<target>`), each on independent devices and on one shared
# executor (`-shared`). Every predictor is scored against every target.
SIM_SOURCES = ("roofline", "roofline-shared") + tuple(f"profiled{shared}@{t}" for t in TARGETS for shared in ("", "-shared"))
BASELINES = ("kernels", "flops", "bytes")


@dataclass(frozen=True)
class PassWindow:
    """One timed pass: its name, wall-clock window (perf_counter) and the seed of its inputs."""

    name: str
    began: float
    ended: float
    input_seed: int
    runs: int


@dataclass
class StudyLog:
    windows: list[PassWindow] = field(default_factory=list)
    profiled_after_scoring: int = 0  # kernels the simulation had to measure (must stay 0)

    def of(self, prefix: str) -> list[PassWindow]:
        return [w for w in self.windows if w.name.startswith(prefix)]

    def disjoint(self, a: str, b: str) -> bool:
        """No pass named `a...` overlaps in time or shares input seeds with a pass named `b...`."""
        for x in self.of(a):
            for y in self.of(b):
                if x.began < y.ended and y.began < x.ended:
                    return False
                if x.input_seed == y.input_seed:
                    return False
        return bool(self.of(a)) and bool(self.of(b))


def _time_two_clocks(
    runners: list[Callable[[], Any]], *, repeats: int, warmup: int, seed: int
) -> tuple[list[Measurement], list[Measurement]]:
    """`time_interleaved` with two clocks read around each run: wall time (perf_counter) and this
    process's CPU time (all its threads). On a machine whose cores are shared with other work, a
    run's wall time includes the time the scheduler gave to others; its CPU time does not."""
    for runner in runners:
        for _ in range(warmup):
            runner()
    wall: list[list[float]] = [[] for _ in runners]
    cpu: list[list[float]] = [[] for _ in runners]
    rng = np.random.default_rng(seed)
    for _ in range(repeats):
        for index in rng.permutation(len(runners)).tolist():
            w0, c0 = time.perf_counter(), time.process_time()
            runners[index]()
            c1, w1 = time.process_time(), time.perf_counter()
            wall[index].append(w1 - w0)
            cpu[index].append(c1 - c0)
    return [Measurement.from_samples(x) for x in wall], [Measurement.from_samples(x) for x in cpu]


def timed_pass(
    log: StudyLog, name: str, runners: list[Callable[[], Any]], *, input_seed: int, repeats: int, warmup: int, seed: int
) -> tuple[list[Measurement], list[Measurement]]:
    """One logged pass: (wall-time, CPU-time) measurements of each runner."""
    began = time.perf_counter()
    measured = _time_two_clocks(runners, repeats=repeats, warmup=warmup, seed=seed)
    log.windows.append(PassWindow(name, began, time.perf_counter(), input_seed, len(runners) * (repeats + warmup)))
    return measured


@dataclass
class WholeGraphStudy:
    name: str
    origin: str
    num_nodes: int
    default_fusion: str
    configs: list[dict[str, Any]] = field(default_factory=list)
    correlation: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)  # target -> predictor -> spearman, pearson
    retest: dict[str, dict[str, float]] = field(default_factory=dict)  # target -> rounds A vs rounds B
    log: StudyLog = field(default_factory=StudyLog)
    seconds: dict[str, float] = field(default_factory=dict)

    def measured(self, target: str = "wall") -> np.ndarray:
        return np.array([c["measured_s"][target] for c in self.configs])

    def predictor(self, name: str) -> np.ndarray:
        """A simulated source (`SIM_SOURCES`) or a naive baseline, one value per configuration."""
        if name in BASELINES:
            return np.array([c["baselines"][name] for c in self.configs])
        return np.array([c["simulated_s"][name] for c in self.configs])

    def score(self) -> None:
        """Correlations of every predictor and the test-retest noise, for every target."""
        for target in TARGETS:
            measured = self.measured(target)
            self.correlation[target] = {name: correlations(self.predictor(name), measured) for name in SIM_SOURCES + BASELINES}
            self.retest[target] = correlations([c["measured_a_s"][target] for c in self.configs], [c["measured_b_s"][target] for c in self.configs])

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WholeGraphStudy:
        """A study back from `to_json` (its configurations' rows; correlations recomputed)."""
        study = cls(data["name"], data["origin"], int(data["nodes"]), data["default_fusion"], configs=list(data["configs"]))
        study.seconds = dict(data.get("seconds", {}))
        study.log = StudyLog([PassWindow(**w) for w in data.get("passes", [])], int(data.get("profiled_after_scoring", 0)))
        study.score()
        return study

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "origin": self.origin,
            "nodes": self.num_nodes,
            "default_fusion": self.default_fusion,
            "correlation": self.correlation,
            "retest": self.retest,
            "seconds": self.seconds,
            "passes": [w.__dict__ for w in self.log.windows],
            "profiled_after_scoring": self.log.profiled_after_scoring,
            "configs": self.configs,
        }


def run_study(
    whole: WholeGraph,
    topology: Topology,
    *,
    num_random: int = 3,
    placements: tuple[str, ...] = ("one", "split", "random"),
    repeats: int = 7,
    warmup: int = 1,
    profile_repeats: int = 7,
    seed: int = 0,
    backend: XlaBackend | None = None,
) -> WholeGraphStudy:
    """Measure, profile (apart) and simulate the configurations of `whole` (module docstring)."""
    began = time.perf_counter()
    graph, nodes = whole.graph, whole.nodes
    roofline = SimulationProblem.from_graph(graph, topology)
    if [n for n in roofline.nodes] != nodes:
        raise ValueError(f"{whole.name}: the simulator's node order differs from the prepared graph's")
    rng = np.random.default_rng(seed)
    configs = configurations(whole, roofline, rng, num_random=num_random, num_devices=topology.num_devices, kinds=placements)
    backend = backend if backend is not None else XlaBackend()
    executor = GroupExecutor(graph, nodes, seed=seed, backend=backend)
    plans = [executor.plan(c.decisions) for c in configs]
    compiled = time.perf_counter()

    log = StudyLog()
    # Profiling pass: its own runners and inputs (seed + 1), before and apart from any scored run;
    # one table per clock (wall, CPU), from the same runs.
    profilers = {clock: Profiler(backend, cache=ProfileCache(":memory:"), repeats=profile_repeats, warmup=warmup, seed=seed + 1) for clock in ("wall", "cpu")}
    groups: dict[tuple[int, ...], None] = {(i,): None for i in range(len(nodes))}
    for config in configs:
        for members in kernel_groups(config.decisions)[0]:
            groups.setdefault(tuple(members))
    todo = profilers["wall"].pending(graph, [[nodes[i] for i in g] for g in groups])
    runners = profilers["wall"].prepare(graph, todo)
    wall, cpu = timed_pass(log, "profile", runners, input_seed=seed + 1, repeats=profile_repeats, warmup=warmup, seed=seed + 2)
    profilers["wall"].store(todo, wall)
    profilers["cpu"].store(todo, cpu)
    profiled_at = time.perf_counter()

    # The scoring pass over whole steps (inputs from `seed`); its odd and even rounds (A, B) see
    # the same load history, so their agreement is the test-retest noise of the ranking.
    steps = [p.run for p in plans]
    wall_steps, cpu_steps = timed_pass(log, "score", steps, input_seed=seed, repeats=2 * repeats, warmup=warmup, seed=seed + 3)
    scored_at = time.perf_counter()

    before = {clock: p.measured for clock, p in profilers.items()}
    if topology.shares_executors:
        raise ValueError(f"run_study wants independent devices (it scores the shared-executor twin itself); {topology.name} shares executors")
    shared = Topology(f"{topology.name}-shared", topology.devices, topology.links, executors=[0] * topology.num_devices)
    problems = {"roofline": roofline, "roofline-shared": SimulationProblem.from_graph(graph, shared)}
    for target, (clock, statistic) in TARGETS.items():
        costs = ProfiledCosts(profilers[clock], statistic=statistic)
        problems[f"profiled@{target}"] = SimulationProblem.from_graph(graph, topology, kernel_costs=costs)
        problems[f"profiled-shared@{target}"] = SimulationProblem.from_graph(graph, shared, kernel_costs=costs)
    study = WholeGraphStudy(whole.name, whole.origin, len(nodes), whole.default_fusion, log=log)
    for config, mw, mc in zip(configs, wall_steps, cpu_steps):
        kernels, kernel_device = kernel_groups(config.decisions)
        by_clock = {"wall": mw, "cpu": mc}
        row: dict[str, Any] = {
            "label": config.label,
            "fusion": config.fusion,
            "placement": config.placement,
            "params": config.extra,
            "devices_used": len(set(kernel_device)),
            "measured_s": {}, "measured_a_s": {}, "measured_b_s": {},
            "samples_s": {clock: list(m.samples) for clock, m in by_clock.items()},
            "simulated_s": {name: simulate(p, config.decisions).step_time_s for name, p in problems.items()},
            "baselines": naive_baselines(roofline, config.decisions),
        }
        for target, (clock, statistic) in TARGETS.items():
            stat = np.min if statistic == "min" else np.median
            samples = np.asarray(by_clock[clock].samples)
            row["measured_s"][target] = float(stat(samples))
            row["measured_a_s"][target] = float(stat(samples[0::2]))
            row["measured_b_s"][target] = float(stat(samples[1::2]))
        study.configs.append(row)
    log.profiled_after_scoring = sum(p.measured - before[clock] for clock, p in profilers.items())
    study.score()
    study.seconds = {
        "compile": compiled - began,
        "profile": profiled_at - compiled,
        "score": scored_at - profiled_at,
        "simulate": time.perf_counter() - scored_at,
        "executables_compiled": float(backend.compiled),
        "kernels_shared": float(backend.shared),
        "profiled_signatures": float(len(runners)),
    }
    logger.info("%s: %d configs, %s", whole.name, len(configs), study.seconds)
    return study


def pooled_correlations(studies: list[WholeGraphStudy], name: str, *, target: str = "wall", normalise: bool = True) -> dict[str, float]:
    """Spearman/Pearson of predictor `name` against the measured step over every configuration
    of every study. `normalise` divides both by their median within each graph first, so the
    pooled ranking asks "which configuration of this graph is faster", not "which graph is
    bigger"; a predictor constant within every graph (total FLOPs) then has no correlation (NaN)."""
    xs, ys = [], []
    for study in studies:
        x, y = study.predictor(name), study.measured(target)
        if normalise:
            x = x / np.median(x) if np.median(x) > 0 else x
            y = y / np.median(y)
        xs.append(x)
        ys.append(y)
    if not xs:
        return {"spearman": float("nan"), "pearson": float("nan")}
    return correlations(np.concatenate(xs), np.concatenate(ys))
