"""Ours against brax's own PPO trainer on a brax task: the same env, budget, update shape, hyperparameters and seeds.

    python benchmarks/brax_learning_peer.py --task ant [--first-seed 1000] [--num-seeds 4] [--side ours|brax|both]
    python benchmarks/brax_learning_peer.py --task ant --table     # print the comparison from the saved logs

Ours trains the seeds as one population in one program (`python -m experiments.ppo env=brax/<task>
arch.seed=S arch.num_seeds=N`, the task's tuned defaults composed by `env=`). brax's trainer
(`brax.training.agents.ppo.train`, patched for jax 0.10 as in `benchmarks/brax_ppo_peer.py`) runs each seed alone,
one after another, with the hyperparameters read from that same composed config:

- one update = every env unrolled `system.rollout_length` steps (brax: `num_envs` = `arch.total_num_envs`,
  `unroll_length` = `system.rollout_length`, `batch_size × num_minibatches` = `num_envs`), `system.epochs` passes
  (`num_updates_per_batch`) over `system.num_minibatches` minibatches;
- γ, λ, clip ε, learning rate, entropy and value-loss weights, gradient-norm clip, reward scaling, observation
  normalisation, network sizes and activation: the same numbers;
- what stays brax's own: its constant learning rate (ours decays linearly to 0), its advantage normalisation over
  the whole minibatch, its value loss without clipping, and its time-limit handling (`bootstrap_on_timeout`, on
  here, as ours always bootstraps a truncation).

Each side's per-seed returns go to `docs/results/brax_peer/<algo>/<task>/<side>_<first seed>.json` (ours also keeps
its full run logs beside them). "final" is the last evaluation of the final params; "absolute" is, for ours, the
best params re-evaluated over 10× the episodes, and for brax (which keeps no best params) its best evaluation,
which is if anything generous to brax. Wall time is the whole program: compilation, learning and evaluations.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from typing import Any, Dict, List

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)
RESULTS = os.path.join(REPO_ROOT, "docs", "results", "brax_peer")
TASKS = ("ant", "halfcheetah", "hopper", "walker2d", "humanoid")


def composed(task: str, first_seed: int, num_seeds: int, run_dir: str, overrides: List[str]):
    from stoix_like.entry import compose_config

    return compose_config("ppo", [f"env=brax/{task}", f"arch.seed={first_seed}", f"arch.num_seeds={num_seeds}",
                                  f"logger.base_exp_path={run_dir}", *overrides])


def run_ours(config) -> Dict[str, Any]:
    from stoix_like import experiment
    from stoix_like.systems import system_module

    start = time.perf_counter()
    result = experiment.train(config, system_module("ppo").learner_setup, "ppo")
    return {"final": [float(r) for r in result.final_returns], "absolute": [float(r) for r in result.absolute_returns],
            "wall_seconds": time.perf_counter() - start}


def _one_activation(config) -> str:
    actor = str(config.network.actor_network.pre_torso.activation)
    critic = str(config.network.critic_network.pre_torso.activation)
    if actor != critic:  # brax's network factory takes one activation for both networks
        sys.exit(f"brax's trainer takes one activation; the config's actor has {actor} and its critic {critic}")
    return actor


def brax_kwargs(config) -> Dict[str, Any]:
    """brax.training's PPO arguments for the same update as `config`'s (see the module's docstring)."""
    from brax.training.agents.ppo import networks as ppo_networks
    from flax import linen

    system, arch = config.system, config.arch
    steps_per_update = int(arch.total_num_envs) * int(system.rollout_length)
    return dict(
        num_timesteps=int(arch.total_timesteps),
        num_evals=int(arch.num_evaluation) + 1,  # brax also evaluates before training
        num_eval_envs=int(arch.num_eval_episodes),
        episode_length=int(config.env.max_episode_steps),
        num_envs=int(arch.total_num_envs),
        unroll_length=int(system.rollout_length),
        batch_size=int(arch.total_num_envs) // int(system.num_minibatches),
        num_minibatches=int(system.num_minibatches),
        num_updates_per_batch=int(system.epochs),
        learning_rate=float(system.actor_lr),
        entropy_cost=float(system.ent_coef),
        discounting=float(system.gamma),
        gae_lambda=float(system.gae_lambda),
        clipping_epsilon=float(system.clip_eps),
        vf_loss_coefficient=float(system.vf_coef),
        max_grad_norm=float(system.max_grad_norm),
        reward_scaling=float(system.reward_scale),
        normalize_observations=bool(system.normalize_observations),
        bootstrap_on_timeout=True,
        network_factory=functools.partial(
            ppo_networks.make_ppo_networks,
            policy_hidden_layer_sizes=tuple(config.network.actor_network.pre_torso.layer_sizes),
            value_hidden_layer_sizes=tuple(config.network.critic_network.pre_torso.layer_sizes),
            activation=getattr(linen, {"silu": "swish"}.get(_one_activation(config), _one_activation(config)))),
    ), steps_per_update


def run_brax(config, seeds: List[int]) -> Dict[str, Any]:
    import jax
    from brax import envs
    from brax.training.agents.ppo import train as ppo

    from benchmarks.brax_ppo_peer import _restore_device_put_replicated

    _restore_device_put_replicated(jax)
    kwargs, _ = brax_kwargs(config)
    env = envs.get_environment(str(config.env.scenario.name), **dict(config.env.kwargs))
    out = {"final": [], "absolute": [], "wall_seconds": 0.0, "evaluations": []}
    for seed in seeds:
        rewards = []
        progress = lambda step, metrics: rewards.append((int(step), float(metrics["eval/episode_reward"])))
        start = time.perf_counter()
        ppo.train(environment=env, seed=seed, progress_fn=progress, **kwargs)
        out["wall_seconds"] += time.perf_counter() - start
        out["final"].append(rewards[-1][1])
        out["absolute"].append(max(reward for step, reward in rewards[1:]))
        out["evaluations"].append(rewards)
        print(f"  brax seed {seed}: final {rewards[-1][1]:.1f}, best evaluation {out['absolute'][-1]:.1f}, "
              f"{time.perf_counter() - start:.0f}s", flush=True)
    return out


def describe(name: str, side: Dict[str, Any], seeds: List[int]) -> str:
    from stoix_like.population import summarize

    final, absolute = summarize(side["final"], seeds, None), summarize(side["absolute"], seeds, None)
    return (f"{name:5s} final IQM {final.describe(1)} | absolute IQM {absolute.describe(1)} | "
            f"wall {side['wall_seconds'] / 60:.1f} min")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=TASKS, required=True)
    parser.add_argument("--first-seed", type=int, default=1000)
    parser.add_argument("--num-seeds", type=int, default=4)
    parser.add_argument("--side", choices=("ours", "brax", "both"), default="both")
    parser.add_argument("--table", action="store_true", help="print the saved comparison, train nothing")
    parser.add_argument("overrides", nargs="*", help="config overrides for both sides (key=value)")
    args = parser.parse_args()
    if args.num_seeds < 1:
        parser.error("--num-seeds must be at least 1")
    out_dir = os.path.join(RESULTS, "ppo", args.task)
    seeds = list(range(args.first_seed, args.first_seed + args.num_seeds))
    config = composed(args.task, args.first_seed, args.num_seeds, os.path.relpath(out_dir), args.overrides)
    sides = ("ours", "brax") if args.side == "both" else (args.side,)
    if not args.table:
        os.makedirs(out_dir, exist_ok=True)
        for side in sides:
            result = run_ours(config) if side == "ours" else run_brax(config, seeds)
            result.update(seeds=seeds, total_timesteps=int(config.arch.total_timesteps), overrides=args.overrides,
                          date=time.strftime("%Y-%m-%d"))
            with open(os.path.join(out_dir, f"{side}_{args.first_seed}.json"), "w") as file:
                json.dump(result, file, indent=1)
    print(f"PPO on brax/{args.task}, {int(config.arch.total_timesteps):,} steps per seed, seeds {seeds[0]}..{seeds[-1]}")
    for side in ("ours", "brax"):
        path = os.path.join(out_dir, f"{side}_{args.first_seed}.json")
        if os.path.exists(path):
            with open(path) as file:
                print(describe(side, json.load(file), seeds))


if __name__ == "__main__":
    main()
