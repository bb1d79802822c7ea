"""The `go` pass: the learned GO policy as a pipeline pass.

    run_pipeline(graph, "go{mode=zero-shot}", target=Target.resolve(devices="4xV100"))
    run_pipeline(graph, "go{mode=zero-shot,devices=4xV100}")     # the same, the target from the pass
    run_pipeline(graph, "go{mode=fine-tune,budget=20,checkpoint=runs/pretrain/best.pt}")

Modes: `zero-shot` (the checkpoint's greedy decision and `budget` samples, best kept), `fine-tune`
(`budget` PPO iterations from the checkpoint; its greedy decision is a candidate too when there is
no warm start or no budget), `one` (GO-one: `budget` PPO iterations from fresh
weights on this graph alone). `seeds`: the warm start's classical placement methods,
`+`-separated (`seeds=metis+critical-path`), `auto` (fine-tune, one: the default list
`rl/warm_start.DEFAULT_SEEDS`; zero-shot: none), `default` (that list in every mode) or `off`; the search edits the best of them and
the answer is never worse than the best seed (rl/warm_start.py). `polish`: fine-tune and one end
with that many simulations of local search from the best answer (rl/polish.py);
`polish-seconds`: zero-shot ends with that many CPU seconds of it (off by default: the policy's answer alone);
`seed-seconds`: the CPU budget of a zero-shot's seeds (0: all run). `decodings=off`:
the greedy answer is not decoded again (smoothed, coarsened, partitioned, joint variants: rl/trainer.zero_shot),
for graphs so large that each extra fusion decode and simulation counts. Zero-shot with seeds samples
edits of the best seed without training. The best decisions the simulator saw are written onto the nodes'
`device`, `fusion_group` and `priority`; if no episode fit in memory the reference placement
(human-expert with default fusion) is written instead and a warning says so.

`passes/` never imports `compiler_opt`: the pass is registered by importing this module and,
for installed copies, through the `compiler_opt.passes` entry point in pyproject.toml.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from passes.infra.base import Pass, PassError, PassResult, option
from passes.infra.registry import register_pass

if TYPE_CHECKING:
    from graph_ir.graph import Graph
    from passes.infra.context import PassContext

__all__ = ["GoPass", "GO_MODES"]

logger = logging.getLogger(__name__)

GO_MODES = ("zero-shot", "fine-tune", "one")


@register_pass
@dataclass(frozen=True)
class GoPass(Pass):
    """Joint placement, fusion and scheduling by the learned GO policy."""

    name = "go"
    mode: str = option("zero-shot", "zero-shot | fine-tune | one")
    checkpoint: str = option("", "policy checkpoint (empty: the one shipped in the package)")
    budget: int = option(8, "zero-shot: samples beside the greedy answer; fine-tune/one: PPO iterations")
    devices: str = option("", "override the target's topology (a preset, NxGPU, or a YAML/JSON file); empty: the target's")
    samples: int = option(8, "episodes per PPO iteration (fine-tune, one)")
    seed: int = option(0, "random seed")
    seeds: str = option("auto", "warm start: placement methods joined by '+'; auto (fine-tune/one: the default list; zero-shot: none), default (the default list in every mode) or off")
    polish: int = option(300, "fine-tune/one: simulations of the final local search from the best answer (rl/polish.py); 0: off")
    polish_seconds: float = option(0.0, "zero-shot: CPU seconds of local search from the policy's answer, no training (rl/polish.py; 5 made held-out answers' steps 7% faster); 0: the answer alone")
    seed_seconds: float = option(0.0, "zero-shot with seeds: CPU seconds the warm start's seeds may take (no seed starts past them); 0: every seed runs")
    decodings: str = option("all", "the greedy answer's extra decodings (smoothed, coarsened, partitioned, joint variants; each one more fusion decode and simulation, ~1 CPU min in all at 100k nodes): all or off")

    def __post_init__(self) -> None:
        if self.mode not in GO_MODES:
            raise PassError(f"go: mode must be one of {', '.join(GO_MODES)}, got {self.mode!r}", pass_name=self.name, field="mode")
        if self.polish < 0:
            raise PassError(f"go: polish must be >= 0 simulations, got {self.polish}", pass_name=self.name, field="polish")
        if not self.polish_seconds >= 0:
            raise PassError(f"go: polish_seconds must be >= 0 CPU seconds, got {self.polish_seconds}", pass_name=self.name, field="polish_seconds")
        if self.polish_seconds > 0 and self.mode != "zero-shot":
            raise PassError(f"go: polish_seconds is zero-shot's (mode={self.mode} ends with `polish` simulations instead)", pass_name=self.name, field="polish_seconds")
        if not self.seed_seconds >= 0:
            raise PassError(f"go: seed_seconds must be >= 0 CPU seconds, got {self.seed_seconds}", pass_name=self.name, field="seed_seconds")
        if self.seed_seconds > 0 and self.mode != "zero-shot":
            raise PassError(f"go: seed_seconds is zero-shot's (mode={self.mode} gives its seeds a share of the training budget)", pass_name=self.name, field="seed_seconds")
        if self.budget < 0 or self.samples < 2:
            raise PassError("go: budget must be >= 0 and samples >= 2", pass_name=self.name, field="budget")
        if self.decodings not in ("all", "off"):
            raise PassError(f"go: decodings must be all or off, got {self.decodings!r}", pass_name=self.name, field="decodings")
        if self.seeds not in ("auto", "off", "default"):
            from compiler_opt.rl.config import unknown_placement_methods
            from passes.placement import METHODS

            unknown = unknown_placement_methods(self.seeds.split("+"))
            if unknown:
                raise PassError(f"go: unknown warm-start methods {unknown} in seeds={self.seeds}; known: {', '.join(METHODS)}", pass_name=self.name, field="seeds")

    def _warm_start(self) -> list[str] | None:
        """`TrainConfig.warm_start` for the `seeds` option (None: the mode's default)."""
        if self.seeds == "auto":
            return None
        if self.seeds == "default":
            from compiler_opt.rl.warm_start import DEFAULT_SEEDS

            return list(DEFAULT_SEEDS)
        return [] if self.seeds == "off" else self.seeds.split("+")

    def call(self, graph: Graph, context: PassContext) -> PassResult:
        import torch

        from compiler_opt.rl.config import TrainConfig
        from compiler_opt.rl.environment import GraphEnvironment
        from compiler_opt.rl.trainer import make_policy, run_training, zero_shot

        target = context.target
        topology = target.topology
        # Rollouts are scored through the cost door: the target's devices and kernel cost source.
        env = GraphEnvironment(graph.name or "graph", graph, topology, problem=target.problem(graph))
        mode = {"one": "go-one"}.get(self.mode, self.mode)
        config = TrainConfig(
            mode=mode,
            workloads=[env.name],
            devices=[target.devices_label],
            iterations=max(self.budget, 1),
            graphs_per_iteration=1,
            samples_per_graph=self.samples,
            zero_shot_samples=self.budget,
            seed=self.seed,
            init_checkpoint="" if mode == "go-one" else (self.checkpoint or "default"),
            out_dir="",
            warm_start=self._warm_start(),
            polish_evaluations=self.polish,
        )
        policy = make_policy(config)
        with torch.random.fork_rng():
            # zero-shot warm-starts only when asked (seeds=...; auto means off for zero-shot)
            seeds = config.seed_methods() if mode == "zero-shot" else []
            # a fine-tune starts from the policy's greedy answer only without a warm start (the seeds, the reference first, come sooner and better)
            greedy = mode == "zero-shot" or (mode == "fine-tune" and (not config.seed_methods() or self.budget == 0))
            extra = {} if self.decodings == "all" else {"smoothing": (), "coarsen": False, "partition": (), "joint": 0}
            candidates = [zero_shot(policy, env, self.budget if mode == "zero-shot" else 1, seed=self.seed, seeds=seeds, polish_seconds=self.polish_seconds,
                                     seed_seconds=self.seed_seconds, **extra)] if greedy else []
            if mode != "zero-shot" and self.budget > 0:
                result = run_training(config, envs=[env], policy=policy, progress=False, save=False)
                candidates.extend(result.best.values())
        fitting = [c for c in candidates if not (c.score.oom or c.score.invalid)]
        if fitting:
            best = min(fitting, key=lambda c: c.score.step_time_s)
            decisions = best.decisions
            logger.info("go (%s): simulated step %.4g s", self.mode, best.score.step_time_s)
        else:
            logger.warning("go (%s): no decision fit in memory; writing the reference placement", self.mode)
            decisions = env.reference_decisions
        decisions.apply(graph, topology, nodes=env.problem.nodes)
        return PassResult(graph, True)
