"""`compiler-opt train`: train or apply the GO policy (go-one, pretrain, zero-shot, fine-tune, imitate).

    compiler-opt train --mode pretrain --workloads rnnlm-2,gnmt-2:inference --devices 2xV100,4xV100 \\
        --iterations 200 --out runs/pretrain
    compiler-opt train --mode zero-shot --workloads inception-v3 --devices 4xV100   # the shipped checkpoint
    compiler-opt train --mode fine-tune --workloads model.onnx --devices 8xV100 --checkpoint default --iterations 20
    compiler-opt train --mode imitate --workloads rnnlm-2,resnet-50 --devices 2xV100 --iterations 300 --lr 1e-3 \
        --imitation-seconds 10 --checkpoint default --out runs/imitate

Checkpoints (`best.pt`, `latest.pt`) and scalars (TensorBoard, or `scalars.csv` without the
tensorboard package) go to `--out`; each checkpoint records the configuration and this command.
"""

from __future__ import annotations

import logging
import shlex
import sys
from typing import TYPE_CHECKING, Any, Sequence

from compiler_opt.cli._render import Table
from compiler_opt.cli.arg_types import finite_float

if TYPE_CHECKING:  # torch and the RL stack load only when `train` runs, not for --help
    from compiler_opt.rl.config import TrainConfig
    from compiler_opt.rl.trainer import TrainResult

__all__ = ["add_train_parser", "run_train", "train_tables"]

logger = logging.getLogger(__name__)


def _split(items: Sequence[str] | None) -> list[str]:
    return [part.strip() for item in items or [] for part in item.split(",") if part.strip()]


def _seeds(text: str) -> list[str] | None:
    """`--seeds`: None for auto (the mode's default), [] for off, else the methods."""
    return None if text == "auto" else [] if text == "off" else _split([text])


def add_train_parser(sub: Any, common: Any) -> Any:
    p = sub.add_parser(
        "train", parents=[common], help="train or apply the GO policy (go-one, pretrain, zero-shot, fine-tune, imitate)",
        description="PPO training of the GO policy on suite workloads or model files, scored by the simulator.",
    )
    p.add_argument(
        "--mode", choices=("go-one", "pretrain", "zero-shot", "fine-tune", "imitate"), default="pretrain",
        help="imitate: pretrain by cloning the placements seeds + polish find (--iterations = gradient steps)",
    )
    p.add_argument("--imitation-seconds", type=finite_float, default=10.0, metavar="S", help="imitate: CPU seconds of search per graph for its target")
    p.add_argument(
        "--imitation-sampled", type=finite_float, default=0.0, metavar="F",
        help="imitate: fraction of steps whose second round is conditioned on a sampled first round, not the greedy one",
    )
    p.add_argument(
        "--imitation-by-gain", action="store_true",
        help="imitate: draw graphs in proportion to log(reference / target step), so targets the search barely improved are rarely cloned",
    )
    p.add_argument(
        # rl.config.IMITATION_HEADS, spelled out: importing compiler_opt.rl here would load torch for every command
        "--imitation-heads", choices=("placement", "all", "levels"), default="placement",
        help="imitate: clone the placement only, also the fusion and priority levels of the target's fastest joint variant (all), or those levels alone on the two heads' output layers (levels)",
    )
    p.add_argument(
        "--imitation-colocation", type=finite_float, default=0.0, metavar="W",
        help="imitate: add W x a co-location loss (per edge: are both ends on one device, as in the target; label-free)",
    )
    p.add_argument("--targets", default="", metavar="NPZ", help="imitate: reuse the targets of an earlier run (OUT/targets.npz)")
    p.add_argument("--workloads", action="append", required=True, metavar="W[,W...]", help="suite names[:mode] or model files (FILE#N: module N of a multi-module HLO file; repeatable, comma-separated)")
    p.add_argument("--paper-sizes", action="store_true", help="suite workloads at their paper sizes (see `workloads --json`)")
    p.add_argument(
        "--generated", type=int, default=0, metavar="N",
        help="add N generated graphs (random NASNet-space cell networks and RNN LMs, workloads/variants.py)",
    )
    p.add_argument("--generated-seed", type=int, default=0, metavar="S", help="the seed --generated draws its graphs with (independent of --seed)")
    p.add_argument("--devices", action="append", metavar="T[,T...]", help="topologies (default 4xV100)")
    p.add_argument("--iterations", type=int, default=100)
    p.add_argument("--graphs-per-iteration", type=int, default=4)
    p.add_argument("--samples", type=int, default=8, help="episodes per graph per iteration (zero-shot: samples beside the greedy answer)")
    p.add_argument("--epochs", type=int, default=4, help="PPO epochs per iteration")
    p.add_argument("--lr", type=finite_float, default=3e-3)
    p.add_argument("--ratio", choices=("decision", "episode"), default="decision", help="PPO importance ratio per decision (token-level) or per episode")
    p.add_argument("--replay-best", action="store_true", help="add each graph's best episode so far to its PPO batch (self-imitation)")
    p.add_argument("--entropy", type=finite_float, default=1e-3, help="entropy bonus coefficient (the start value with --entropy-target)")
    p.add_argument("--entropy-target", type=finite_float, default=0.0, help="per-node entropy target: the coefficient becomes a controller (0: fixed bonus)")
    p.add_argument(
        "--seeds", default="auto", metavar="M[,M...]|auto|off",
        help="warm start: classical placement methods whose best seeds the search (default auto: on for fine-tune and go-one)",
    )
    p.add_argument(
        "--polish", type=int, default=300, metavar="N",
        help="go-one and fine-tune end with N simulations of local search from the best answer (0: off)",
    )
    # POLISH_RACES / TrainConfig.polish_race spelled out: importing compiler_opt.rl.config loads torch (~3 s) on every
    # CLI start; tests/compiler_opt/rl/test_imitation.py keeps the two in step.
    p.add_argument(
        "--polish-race", choices=("halving", "sequential"), default="sequential",
        help="how the polish's starts share its seconds (fine-tune, go-one and imitate's targets): one after another "
        "(default since the forty-fourth session) or successive halving (the race `go_small.pt`'s imitation targets were made with)",
    )
    p.add_argument("--reference", default="human-expert", help="classical placement scaling the reward")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-minutes", type=finite_float, default=0.0, help="stop after this wall time (0: no limit)")
    p.add_argument("--checkpoint", default=None,
                   help="initial weights ('default': the shipped checkpoint, what zero-shot and fine-tune use without this option; "
                        "'': a fresh policy)")
    p.add_argument(
        "--policy", default="", metavar="K=V[,K=V...]",
        help="sizes of a fresh policy (no --checkpoint), e.g. hidden=64,sage_layers=3 (fields of policy.config.PolicyConfig)",
    )
    p.add_argument("--checkpoint-every", type=finite_float, default=300.0, metavar="S", help="save latest.pt every S seconds")
    p.add_argument("--out", default="runs/go", help="folder for checkpoints and scalars")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    return p


def _policy_sizes(text: str, checkpoint: str) -> dict[str, int]:
    """`--policy hidden=64,sage_layers=3` -> {"hidden": 64, "sage_layers": 3}; refused beside
    `--checkpoint`, whose own sizes would silently win."""
    from compiler_opt.rl.config import TrainConfigError

    if text and checkpoint:
        raise TrainConfigError("--policy sizes a fresh policy; the --checkpoint brings its own", field="policy")
    sizes: dict[str, int] = {}
    for item in _split([text]):
        key, _, value = item.partition("=")
        try:
            sizes[key.strip()] = int(value)  # an item without "=" has value "": refused here too
        except ValueError:
            raise TrainConfigError(f"--policy {item!r}: expected KEY=INTEGER", field="policy") from None
    return sizes


def _generated(count: int, seed: int) -> list[str]:
    """The specs of `--generated`, written out so the config and the checkpoint name each graph."""
    from compiler_opt.workloads.variants import random_variants

    return random_variants(count, seed=seed) if count else []


def _checkpoint(args: Any) -> str:
    """`--checkpoint`, or where it is not given the shipped checkpoint for the modes that apply a
    pretrained policy (zero-shot works right after install) and a fresh policy for the others."""
    if args.checkpoint is not None:
        return str(args.checkpoint)
    return "default" if args.mode in ("zero-shot", "fine-tune") and not getattr(args, "policy", "") else ""


def config_from_args(args: Any) -> TrainConfig:
    from compiler_opt.rl.config import TrainConfig

    checkpoint = _checkpoint(args)
    return TrainConfig(
        mode=args.mode,
        workloads=_split(args.workloads) + _generated(getattr(args, "generated", 0), getattr(args, "generated_seed", 0)),
        paper_sizes=args.paper_sizes,
        devices=_split(args.devices) or ["4xV100"],
        iterations=args.iterations,
        graphs_per_iteration=args.graphs_per_iteration,
        samples_per_graph=args.samples,
        zero_shot_samples=args.samples,
        ppo_epochs=args.epochs,
        learning_rate=args.lr,
        ratio=args.ratio,
        replay_best=args.replay_best,
        warm_start=_seeds(getattr(args, "seeds", "auto")),
        entropy_coef=args.entropy,
        entropy_target=getattr(args, "entropy_target", 0.0),
        polish_evaluations=getattr(args, "polish", 300),
        polish_fraction=TrainConfig.polish_fraction if getattr(args, "polish", 300) else 0.0,
        polish_race=getattr(args, "polish_race", TrainConfig.polish_race),
        reference=args.reference,
        seed=args.seed,
        max_seconds=args.max_minutes * 60.0,
        checkpoint_every_s=args.checkpoint_every,
        out_dir=args.out,
        init_checkpoint=checkpoint,
        policy=_policy_sizes(getattr(args, "policy", ""), checkpoint),
        imitation_seconds=getattr(args, "imitation_seconds", 10.0),
        imitation_targets=getattr(args, "targets", ""),
        imitation_sampled=getattr(args, "imitation_sampled", 0.0),
        imitation_by_gain=getattr(args, "imitation_by_gain", False),
        imitation_heads=getattr(args, "imitation_heads", "placement"),
        imitation_colocation=getattr(args, "imitation_colocation", 0.0),
    )


def run_train(args: Any, argv: Sequence[str] | None = None) -> TrainResult:
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    config = config_from_args(args)
    command = shlex.join(["compiler-opt", *(sys.argv[1:] if argv is None else argv)])
    from compiler_opt.rl.trainer import run_training

    return run_training(config, command=command)


def train_tables(result: TrainResult, out_dir: str) -> list[Table]:
    table = Table(
        f"GO: best found ({result.iterations} iterations, {result.seconds:.1f} s)",
        ["environment", "reference (ms)", "best (ms)", "ratio to reference"],
        numeric=frozenset({1, 2, 3}),
    )
    for label, best in sorted(result.best.items()):
        table.rows.append([label, f"{best.reference_step_s * 1e3:.4g}", f"{best.score.step_time_s * 1e3:.4g}", f"{best.ratio:.3f}"])
    if result.iterations:
        table.title += f"; checkpoints in {out_dir}; scalars: {result.scalar_backend}"
    tables = [table]
    if result.polished:
        polish = Table("polish: local search and joint variants from the best answer (rl/polish.py)", ["environment", "before (ms)", "after (ms)", "simulations", "CPU s"], numeric=frozenset({1, 2, 3, 4}))
        for label, done in sorted(result.polished.items()):
            polish.rows.append([label, f"{done.start_step_s * 1e3:.4g}", f"{done.score.step_time_s * 1e3:.4g}", str(done.evaluations), f"{done.cpu_seconds:.1f}"])
        tables.append(polish)
    return tables
