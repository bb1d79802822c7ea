"""Can the GO policy guide the polish's local search? A study of move scoring (ninth session).

    PYTHONPATH=. python benchmarks/bench_move_guide.py collect --workloads transformer-xl:inference \\
        transformer-xl:train inception-v3:train resnet-50:train bert-base:train wavenet-4x36:train --out TRACES/train
    PYTHONPATH=. python benchmarks/bench_move_guide.py collect --workloads inception-v3:inference \\
        amoebanet:inference rnnlm-8:inference --out TRACES/held
    PYTHONPATH=. python benchmarks/bench_move_guide.py train --train 'TRACES/train/*.pkl' \\
        --test 'TRACES/held/[ia]*.pkl' --steps 150 --json benchmarks/results/move_guide.json

`collect`: per cell (paper size, 2/4/8 x V100) the polish's local search (fusion-group moves,
fused scoring, `--evaluations` each) from the three fastest distinct warm-start seeds, recording
every state a descent starts from and every move tried there with whether it improved (the
polish's first-improvement descent tries moves one by one until one improves).
`train`: the shipped policy's seeded placement logits as a move score (unit mean of
logit[new device] - logit[current device]); AUC of that score against "improved" per cell, before
and after `--steps` Adam steps of class-balanced logistic loss on the training cells' moves
(encoder and heads trained; 4 states of one trace per step). An AUC well above 0.5 on held-out
cells would let the polish try the policy's favourite moves first; RESULTS.md (h8) has the answer.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import pickle
import sys
import time
from pathlib import Path

import numpy as np
import torch
from scipy.stats import rankdata

from compiler_opt.policy import load_checkpoint, save_checkpoint
from compiler_opt.policy.context import context_features
from compiler_opt.rl import GraphEnvironment, load_graph
from compiler_opt.rl.polish import _base, _distinct, _PolishContext
from compiler_opt.rl.warm_start import fitting_seeds, warm_start_seeds
from cost_model.devices.loader import load_topology
from graph_ir._gc import gc_frozen
from passes.placement.context_base import BudgetExhausted
from passes.placement.local_search import _Search, fusion_units

SEEDS = ("human-expert", "single-device", "metis", "critical-path", "m-topo", "dp")


def collect(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for spec in args.workloads:
        name, graph = load_graph(spec, paper=True)
        for devices in args.devices:
            env = GraphEnvironment(name, graph, load_topology(devices))
            env.reference_step_s
            began = time.process_time()
            with gc_frozen():
                seeds = fitting_seeds(warm_start_seeds(env, SEEDS, fusion_levels=4))
                base = _base(env, seeds[0].decisions)
                units = fusion_units(base.fusion_group)
                starts = _distinct([np.asarray(s.decisions.device, dtype=np.int64) for s in seeds])[:3]
                traces = [_trace(env, base, units, start, k, args.evaluations) for k, start in enumerate(starts)]
            with open(out / f"{name.replace(':', '_')}@{devices}.pkl", "wb") as f:
                pickle.dump({"workload": name, "devices": devices, "units": units, "traces": traces}, f)
            moves = np.concatenate([t["moves"] for t in traces])
            print(f"{name}@{devices}: {len(traces)} traces, {sum(len(t['states']) for t in traces)} states, {len(moves)} moves, "
                  f"{moves[:, 3].mean():.2f} improving, {time.process_time() - began:.1f} CPU s", flush=True)


def _trace(env: GraphEnvironment, base, units: np.ndarray, start: np.ndarray, seed: int, evaluations: int) -> dict:
    """The polish's iterated descent from `start`, every descent state and tried move recorded."""
    ctx = _PolishContext(env, base, deadline=math.inf, evaluations=evaluations)
    search = _Search(ctx, start, seed, units)
    states, moves = [], []  # moves: (state index, unit, device, improved)
    try:
        while True:
            improved = True
            while improved:
                improved = False
                states.append(search.current.astype(np.int8).copy())
                for change in search.candidates():
                    ok = search.try_change(change)
                    moves.extend((len(states) - 1, g, d, ok) for g, d in change)
                    if ok:
                        improved = True
                        break
            search.kick()
    except BudgetExhausted:
        pass
    return {"states": np.stack(states), "moves": np.array(moves, dtype=np.int64), "best_s": search.best_key[0]}


def _cells(pattern: str, graphs: dict) -> list[tuple[GraphEnvironment, dict]]:
    cells = []
    for path in sorted(glob.glob(pattern)):
        with open(path, "rb") as f:
            data = pickle.load(f)
        if data["workload"] not in graphs:
            graphs[data["workload"]] = load_graph(data["workload"], paper=True)[1]
        cells.append((GraphEnvironment(data["workload"], graphs[data["workload"]], load_topology(data["devices"])), data))
    return cells


def _move_scores(
    policy, env: GraphEnvironment, data: dict, trace: dict, rng: np.random.Generator, states_per_batch: int, enc=None, heuristic: bool = False
):
    """(score, improved) of the moves tried from up to `states_per_batch` random states of `trace`.
    `heuristic`: the placement context's byte shares instead of the policy (in_gain + out_gain:
    the fraction of the node's input and output bytes that the move makes local, minus what it
    makes remote), the hand-written baseline a learned score must beat."""
    states, moves = trace["states"], trace["moves"]
    pick = rng.choice(len(states), size=min(states_per_batch, len(states)), replace=False)
    moves = moves[np.isin(moves[:, 0], pick)]
    row = {s: i for i, s in enumerate(pick.tolist())}
    index = torch.as_tensor([row[s] for s in moves[:, 0].tolist()], dtype=torch.int64)
    picked = states[pick].astype(np.int64)
    device = torch.as_tensor(picked)
    fused = torch.as_tensor(np.stack([env.default_fusion(s) >= 0 for s in picked])).long() if env.default_groups is not None else torch.zeros_like(device)
    previous = torch.stack([device, fused, torch.zeros_like(device)], -1)
    enc = enc if enc is not None else policy.encode(env.inputs)
    if heuristic:
        pair, _ = context_features(enc.context, device, env.inputs.num_devices)
        place = pair[..., 2] + pair[..., 3]
    else:
        place = torch.nan_to_num(policy._logits(enc, previous, previous.shape[0], True)[0], neginf=-30.0)  # (B, N, D)
    units = torch.as_tensor(data["units"])
    count = int(units.max()) + 1
    per_unit = torch.zeros(place.shape[0], count, place.shape[2]).index_add_(1, units, place)
    per_unit = per_unit / torch.zeros(count).index_add_(0, units, torch.ones(len(units)))[None, :, None]
    first = torch.as_tensor(np.unique(data["units"], return_index=True)[1])
    unit, target = torch.as_tensor(moves[:, 1]), torch.as_tensor(moves[:, 2])
    current = device[:, first][index, unit]
    score = per_unit[index, unit, target] - per_unit[index, unit, current]
    return score, torch.as_tensor(moves[:, 3], dtype=torch.float32)


def _auc(labels: np.ndarray, scores: np.ndarray) -> float:
    positive = labels > 0
    n1, n0 = int(positive.sum()), int((~positive).sum())
    if not n1 or not n0:
        return math.nan
    return float((rankdata(scores)[positive].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def _report(policy, cells, tag: str, heuristic: bool = False) -> dict[str, float]:
    rng, out = np.random.default_rng(0), {}
    with torch.no_grad():
        for env, data in cells:
            enc = policy.encode(env.inputs)
            pairs = [_move_scores(policy, env, data, trace, rng, 12, enc, heuristic) for trace in data["traces"]]
            scores, labels = (np.concatenate([p[i].numpy() for p in pairs]) for i in (0, 1))
            out[env.label] = _auc(labels, scores)
            print(f"  {tag} {env.label}: {len(labels)} moves, {labels.mean():.2f} improving, AUC {out[env.label]:.3f}", flush=True)
    print(f"{tag}: mean AUC {np.nanmean(list(out.values())):.3f}", flush=True)
    return out


def train(args: argparse.Namespace) -> None:
    torch.manual_seed(args.seed)
    graphs: dict = {}
    train_cells, test_cells = _cells(args.train, graphs), _cells(args.test, graphs)
    policy, meta = load_checkpoint(args.checkpoint or None)
    result = {
        "argv": vars(args),
        "test_heuristic": _report(policy, test_cells, "held out, byte-share heuristic", heuristic=True),
        "test_before": _report(policy, test_cells, "held out, before"),
    }
    optimizer = torch.optim.Adam(policy.parameters(), lr=args.lr)
    rng = np.random.default_rng(args.seed)
    began = time.process_time()
    for step in range(args.steps):
        env, data = train_cells[rng.integers(len(train_cells))]
        score, label = _move_scores(policy, env, data, data["traces"][rng.integers(len(data["traces"]))], rng, 4)
        positive = label.mean().clamp(0.02, 0.98)
        weight = torch.where(label > 0, 0.5 / positive, 0.5 / (1 - positive))
        # + keep: the seeded logits' keep bonus on the current device is a constant offset of every score.
        loss = (torch.nn.functional.binary_cross_entropy_with_logits(score + policy.heads.keep[0], label, reduction="none") * weight).mean()
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        optimizer.step()
        if step % 25 == 0:
            print(f"step {step}: loss {loss.item():.4f} ({time.process_time() - began:.0f} CPU s)", flush=True)
    result["train_after"] = _report(policy, train_cells, "training cells, after")
    result["test_after"] = _report(policy, test_cells, "held out, after")
    if args.save:
        save_checkpoint(args.save, policy, command="python benchmarks/bench_move_guide.py " + " ".join(sys.argv[1:]), extra={"move_guide": vars(args)})
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--workloads", nargs="+", required=True)
    c.add_argument("--devices", nargs="+", default=["2xV100", "4xV100", "8xV100"])
    c.add_argument("--evaluations", type=int, default=600, help="simulations per traced search")
    c.add_argument("--out", required=True)
    t = sub.add_parser("train")
    t.add_argument("--train", required=True, help="glob of collected training cells")
    t.add_argument("--test", required=True, help="glob of collected held-out cells")
    t.add_argument("--steps", type=int, default=150)
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--json", default="")
    t.add_argument("--checkpoint", default="", help="policy to start from (default: the shipped one)")
    t.add_argument("--save", default="", help="write the trained policy here")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    collect(args) if args.command == "collect" else train(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
