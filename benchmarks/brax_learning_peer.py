"""Ours against brax's own trainer (PPO or SAC) on a brax task or a MuJoCo Playground dm_control task: the same env,
budget, update shape, hyperparameters and seeds.

    python benchmarks/brax_learning_peer.py --task ant [--algorithm ppo|sac] [--first-seed 1000] [--num-seeds 4]
        [--side ours|brax|both] [--reuse docs/results/brax_peer/ppo/ant/brax_1000.json]
    python benchmarks/brax_learning_peer.py --task playground/cheetah_run --algorithm sac

A Playground task (`--task playground/<task>`, composed as `env=playground/<task>`) reaches brax's trainer as
Playground's own training notebooks hand it over: the task loaded from `mujoco_playground.dm_control_suite` with the
env config's overrides (`impl: jax`), wrapped by `mujoco_playground.wrapper.wrap_for_brax_training` (brax's trainer's
`wrap_env_fn`), which adds the time limit and the auto-reset that brax's own envs get from brax's wrapper.

Ours trains the seeds as one population in one program (`python -m experiments.<algorithm> env=brax/<task>
arch.seed=S arch.num_seeds=N`, the task's tuned defaults composed by `env=`). brax's trainer
(`brax.training.agents.<algorithm>.train`, patched for jax 0.10 as in `benchmarks/brax_ppo_peer.py`) runs each seed
alone, one after another, with the hyperparameters read from that same composed config.

PPO (`brax_ppo_kwargs`):
- one update = every env unrolled `system.rollout_length` steps (brax: `num_envs` = `arch.total_num_envs`,
  `unroll_length` = `system.rollout_length`, `batch_size × num_minibatches` = `num_envs`), `system.epochs` passes
  (`num_updates_per_batch`) over `system.num_minibatches` minibatches;
- γ, λ, clip ε, learning rate, entropy and value-loss weights, gradient-norm clip, reward scaling, observation
  normalisation and network sizes: the same numbers; brax takes one activation for both networks, the critic's;
- what stays brax's own: its learning rate is constant (ours follows `system.decay_learning_rates`), its init is
  lecun_uniform (ours follows `network.*.kernel_init`), one Adam (eps 1e-8) steps both networks after one
  gradient-norm clip over both (ours: one each, eps 1e-5), its observation normalisation is not clipped (ours at
  ±10), it recomputes advantages per minibatch (ours once per rollout unless `system.recompute_advantages`), its
  training envs restart from the state of their first reset (ours draw a fresh one), and its time-limit handling
  masks the truncated step out of the loss (ours bootstraps it; its `bootstrap_on_timeout` reads a `time_out`
  that brax's own episode wrapper does not set). Its policy is ours in form: a tanh-squashed Gaussian whose
  mean and softplus scale are both outputs of the network.

SAC (`brax_sac_kwargs`; what brax's trainer cannot express is refused, e.g. a rollout longer than one step):
- one env step of every env, then `system.gradient_steps_per_update` gradient steps (`grad_updates_per_step`) on
  batches of `system.total_batch_size`; the warm-up fills `min_replay_size` = warm-up steps × envs, the buffer
  holds `system.total_buffer_size`; both count in the budget, as ours do;
- one learning rate (ours must give the actor, the critics and the temperature the same), γ, τ, reward scaling,
  observation normalisation, network sizes and activation, LayerNorm in either network (`use_layer_norm`), two
  critics, temperature starting at 1, the greedy evaluation (`deterministic_eval`): the same;
- what stays brax's own: its temperature aims at an entropy of −|A|/2 (ours at −`system.target_entropy_scale`·|A|:
  the same on ant, hopper and walker2d, whose files set 0.5; halfcheetah's keeps the SAC paper's 1), its init
  lecun_uniform, its Adam's eps 1e-8 and no gradient clip (ours eps 1e-5 and `system.max_grad_norm`), its
  observation normalisation is not clipped, its training envs restart from the state of their first reset, it
  masks the truncated step out of the critics' loss (ours bootstraps it), its LayerNorm follows each hidden
  layer's activation (ours too where `layer_norm_after_activation` is set, as the Playground files set it; else
  ours precedes it), and its first 8,192-odd steps act with the initial policy, as ours do.

brax's side does not depend on our network's init or actor activation, so a change to those leaves its results
standing: `--reuse` reads the seeds an earlier brax file already holds (refused if that file records another
config; files written before the config was recorded are taken on trust) and runs only the others.

Ours logs its run into `docs/results/brax_peer/<algorithm>/<task>/ours_<first seed>/`; brax's per-seed returns go to
`docs/results/brax_peer/<algorithm>/<task>/brax_<first seed>.json`. README's "Continuous control" table is rendered
from both (`python benchmarks/learning_table.py --from-logs`). "final" is the final params' return (ours: over 10×
the evaluation episodes; brax: its last evaluation); "absolute" is, for ours, the best params re-evaluated over 10×
the episodes, and for brax (which keeps no best params) its best evaluation, which is if anything generous to brax.
Wall time is the whole program: compilation, learning and evaluations.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import shutil
import sys
import time
from typing import Any, Dict, List, Tuple

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)
RESULTS = os.path.join(REPO_ROOT, "docs", "results", "brax_peer")
TASKS = ("ant", "halfcheetah", "hopper", "walker2d", "humanoid",  # env=brax/<task>
         "playground/cheetah_run", "playground/walker_walk")  # env=playground/<task>, the tasks with tuned files
ALGORITHMS = ("ppo", "sac")


def env_choice(task: str) -> str:
    """`env=` for a `--task`: a bare name is a brax task, `playground/<task>` a Playground one."""
    return task if "/" in task else f"brax/{task}"


def composed(algorithm: str, task: str, first_seed: int, num_seeds: int, run_dir: str):
    """The shipped defaults `env=<suite>/<task>` composes (its tuned file), for these seeds, logging into run_dir."""
    from stoix_like.config.compose import compose_config

    return compose_config(algorithm, [f"env={env_choice(task)}", f"arch.seed={first_seed}",
                                      f"arch.num_seeds={num_seeds}", f"logger.base_exp_path={run_dir}"])


def run_ours(config, algorithm: str) -> None:
    """The population in one program; its run logs (final and absolute returns, wall time) are the record."""
    from stoix_like.run import experiment
    from stoix_like.systems import system_module

    experiment.train(config, system_module(algorithm).learner_setup, algorithm)


def brax_activation(torso) -> Any:
    """brax's network factories take one activation for every network: PPO's is the critic's, whose size and
    activation mattered most on ant (a 64x64 tanh critic plateaued near 1,600); SAC's is its critics'."""
    from flax import linen

    name = str(torso.activation)
    return getattr(linen, {"silu": "swish"}.get(name, name))


def brax_kwargs(config) -> Dict[str, Any]:
    """brax.training's arguments for the same training as `config`'s, by algorithm (see the module's docstring)."""
    return {"ppo": brax_ppo_kwargs, "sac": brax_sac_kwargs}[str(config.system.system_name)](config)


def brax_common_kwargs(config) -> Dict[str, Any]:
    """The arguments brax's PPO and SAC trainers share: budget, evaluations, envs, learning rate, discount, rewards and
    observations."""
    system, arch = config.system, config.arch
    return dict(
        num_timesteps=int(arch.total_timesteps),
        num_evals=int(arch.num_evaluation) + 1,  # brax also evaluates before training
        num_eval_envs=int(arch.num_eval_episodes),
        episode_length=int(config.env.max_episode_steps),
        num_envs=int(arch.total_num_envs),
        learning_rate=float(system.actor_lr),  # SAC: brax_sac_kwargs refuses a q_lr or alpha_lr that differs
        discounting=float(system.gamma),
        reward_scaling=float(system.reward_scale),
        normalize_observations=bool(system.normalize_observations),
    )


def brax_ppo_kwargs(config) -> Dict[str, Any]:
    """brax.training's PPO arguments for the same update as `config`'s."""
    from brax.training.agents.ppo import networks as ppo_networks

    system, arch = config.system, config.arch
    return dict(
        **brax_common_kwargs(config),
        unroll_length=int(system.rollout_length),
        batch_size=int(arch.total_num_envs) // int(system.num_minibatches),
        num_minibatches=int(system.num_minibatches),
        num_updates_per_batch=int(system.epochs),
        entropy_cost=float(system.ent_coef),
        gae_lambda=float(system.gae_lambda),
        clipping_epsilon=float(system.clip_eps),
        vf_loss_coefficient=float(system.vf_coef),
        max_grad_norm=float(system.max_grad_norm),
        network_factory=functools.partial(
            ppo_networks.make_ppo_networks,
            policy_hidden_layer_sizes=tuple(config.network.actor_network.pre_torso.layer_sizes),
            value_hidden_layer_sizes=tuple(config.network.critic_network.pre_torso.layer_sizes),
            activation=brax_activation(config.network.critic_network.pre_torso)),
    )


def brax_sac_kwargs(config) -> Dict[str, Any]:
    """brax.training's SAC arguments for the same training as `config`'s; what it cannot express exits in one line."""
    from brax.training.agents.sac import networks as sac_networks

    system, arch, network = config.system, config.arch, config.network
    actor_sizes = tuple(network.actor_network.pre_torso.layer_sizes)
    refusals = {
        "system.rollout_length must be 1 (brax's SAC steps every env once per round of gradient steps)":
            int(system.rollout_length) != 1,
        "system.actor_lr, q_lr and alpha_lr must be equal (brax's SAC has one learning rate)":
            len({float(system.actor_lr), float(system.q_lr), float(system.alpha_lr)}) != 1,
        "the actor's and the critics' torsos must be alike (brax's SAC builds both from one size and activation)":
            actor_sizes != tuple(network.q_network.pre_torso.layer_sizes)
            or str(network.actor_network.pre_torso.activation) != str(network.q_network.pre_torso.activation),
        "system.num_critics must be 2, init_alpha 1, target_update_period 1 and n_step 1 (brax's SAC fixes them)":
            (int(system.num_critics), float(system.init_alpha), int(system.target_update_period),
             int(system.n_step)) != (2, 1.0, 1, 1),
        "system.prioritized_replay must be False (brax's SAC samples uniformly)": bool(system.prioritized_replay),
        "system.decay_learning_rates must be False (brax's SAC keeps its learning rate)":
            bool(system.decay_learning_rates),
    }
    refused = [why for why, broken in refusals.items() if broken]
    if refused:
        sys.exit(f"brax's SAC trainer cannot run this config: {refused[0]}")
    # only where set, so that the record of a config without them (brax_record, --reuse) reads as it always has
    layer_norms = {f"{side}_network_layer_norm": True for side, torso in (
        ("policy", network.actor_network.pre_torso), ("q", network.q_network.pre_torso))
        if bool(torso.get("use_layer_norm", False))}
    return dict(
        **brax_common_kwargs(config),
        deterministic_eval=bool(arch.evaluation_greedy),
        grad_updates_per_step=int(system.gradient_steps_per_update),
        batch_size=int(system.total_batch_size),
        min_replay_size=int(system.warmup_rollout_length) * int(arch.total_num_envs),
        max_replay_size=int(system.total_buffer_size),
        tau=float(system.tau),
        network_factory=functools.partial(
            sac_networks.make_sac_networks, hidden_layer_sizes=actor_sizes,
            activation=brax_activation(network.q_network.pre_torso), **layer_norms),
    )


def brax_record(config) -> str:
    """What a brax result was trained on, to tell whether an older result file can stand for a seed today."""
    kwargs = brax_kwargs(config)
    network = kwargs.pop("network_factory")
    kwargs.update(network.keywords, activation=getattr(network.keywords["activation"], "__name__", "?"))
    return json.dumps({"env": str(config.env.scenario.name), "env_kwargs": dict(config.env.kwargs), **kwargs},
                      sort_keys=True, default=str)


def reused_seeds(path: str, config) -> Dict[int, Dict[str, Any]]:
    """Per seed, what brax's trainer gave in an earlier result file of the same config (`--reuse`)."""
    with open(path) as file:
        earlier = json.load(file)
    recorded = earlier.get("config")
    if recorded is not None and recorded != brax_record(config):
        sys.exit(f"--reuse {path}: brax's trainer ran another config there; run its seeds again")
    if earlier["total_timesteps"] != int(config.arch.total_timesteps):
        sys.exit(f"--reuse {path}: {earlier['total_timesteps']:,} steps per seed, not {config.arch.total_timesteps:,}")
    per_seed = earlier.get("wall_seconds_per_seed") or [earlier["wall_seconds"] / len(earlier["seeds"])] * len(
        earlier["seeds"])
    return {seed: {"final": earlier["final"][k], "absolute": earlier["absolute"][k],
                   "evaluations": earlier["evaluations"][k], "wall_seconds": per_seed[k],
                   "wall_estimated": "wall_seconds_per_seed" not in earlier, "from": os.path.basename(path)}
            for k, seed in enumerate(earlier["seeds"])}


def brax_environment(config) -> Tuple[Any, Dict[str, Any]]:
    """The env brax's trainer runs for `config`'s, and what else its `train` then needs: a brax env is wrapped by
    brax's trainer itself; a Playground task by Playground's wrapper for brax's trainers (its `wrap_env_fn`)."""
    name, overrides = str(config.env.scenario.name), dict(config.env.kwargs)
    if str(config.env.suite) == "playground":
        from mujoco_playground import dm_control_suite, wrapper

        return (dm_control_suite.load(name, config_overrides=overrides),
                {"wrap_env_fn": wrapper.wrap_for_brax_training})
    from brax import envs

    return envs.get_environment(name, **overrides), {}


def run_brax(config, seeds: List[int], reused: Dict[int, Dict[str, Any]]) -> Dict[str, Any]:
    import jax

    from benchmarks.brax_ppo_peer import _restore_device_put_replicated

    _restore_device_put_replicated(jax)
    kwargs = brax_kwargs(config)
    # the algorithm's own trainer module, as the kwargs above were built for it (ALGORITHMS names both)
    trainer = importlib.import_module(f"brax.training.agents.{config.system.system_name}.train")
    env, wrapping = brax_environment(config)
    out: Dict[str, Any] = {"final": [], "absolute": [], "wall_seconds": 0.0, "wall_seconds_per_seed": [],
                           "evaluations": [], "reused": {}, "config": brax_record(config)}
    for seed in seeds:
        if seed in reused:  # the same config's result for this seed, from an earlier file
            earlier = reused[seed]
            for key in ("final", "absolute", "evaluations"):
                out[key].append(earlier[key])
            out["wall_seconds_per_seed"].append(earlier["wall_seconds"])
            out["wall_seconds"] += earlier["wall_seconds"]
            out["reused"][str(seed)] = (f"from {earlier['from']}" + (
                " (wall time: that file's mean per seed, it kept no per-seed times)" if earlier["wall_estimated"]
                else ""))
            print(f"  brax seed {seed}: final {earlier['final']:.1f}, reused from {earlier['from']}", flush=True)
            continue
        rewards = []

        def progress(step, metrics, rewards=rewards):
            rewards.append((int(step), float(metrics["eval/episode_reward"])))

        start = time.perf_counter()
        trainer.train(environment=env, seed=seed, progress_fn=progress, **wrapping, **kwargs)
        seconds = time.perf_counter() - start
        out["wall_seconds"] += seconds
        out["wall_seconds_per_seed"].append(seconds)
        out["final"].append(rewards[-1][1])
        out["absolute"].append(max(reward for step, reward in rewards[1:]))
        out["evaluations"].append(rewards)
        print(f"  brax seed {seed}: final {rewards[-1][1]:.1f}, best evaluation {out['absolute'][-1]:.1f}, "
              f"{seconds:.0f}s", flush=True)
    return out


def argument_parser() -> argparse.ArgumentParser:
    """The command line, apart so that README's `checked by` commands can be checked against it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=TASKS, required=True)
    parser.add_argument("--algorithm", choices=ALGORITHMS, default="ppo")
    parser.add_argument("--first-seed", type=int, default=1000)
    parser.add_argument("--num-seeds", type=int, default=4)
    parser.add_argument("--side", choices=("ours", "brax", "both"), default="both")
    parser.add_argument("--reuse", metavar="BRAX_JSON",
                        help="an earlier brax_<seed>.json of the same config: its seeds are read, not run again")
    return parser


def main() -> None:
    parser = argument_parser()
    args = parser.parse_args()
    if args.num_seeds < 1:
        parser.error("--num-seeds must be at least 1")
    if args.reuse and not os.path.exists(args.reuse):
        parser.error(f"--reuse {args.reuse}: no such file")
    out_dir = os.path.join(RESULTS, args.algorithm, args.task.split("/")[-1])
    os.makedirs(out_dir, exist_ok=True)  # either side may be a task's first: brax's writes no folder of its own
    ours_dir = os.path.join(out_dir, f"ours_{args.first_seed}")
    seeds = list(range(args.first_seed, args.first_seed + args.num_seeds))
    config = composed(args.algorithm, args.task, args.first_seed, args.num_seeds, os.path.relpath(ours_dir))
    if args.side in ("brax", "both"):
        try:  # a config brax's trainer cannot express is refused before ours trains, not after
            brax_kwargs(config)
        except SystemExit as refusal:
            parser.error(str(refusal))
    if args.side in ("ours", "both"):
        shutil.rmtree(ours_dir, ignore_errors=True)  # a population is one program: never pooled with an older one
        run_ours(config, args.algorithm)
    if args.side in ("brax", "both"):
        reused = reused_seeds(args.reuse, config) if args.reuse else {}
        result = run_brax(config, seeds, reused)
        result.update(seeds=seeds, total_timesteps=int(config.arch.total_timesteps), date=time.strftime("%Y-%m-%d"))
        with open(os.path.join(out_dir, f"brax_{args.first_seed}.json"), "w") as file:
            json.dump(result, file, indent=1)
    from stoix_like.report.learning_table import continuous_control_table

    print(continuous_control_table(RESULTS))
    print("README.md's block: python benchmarks/learning_table.py --from-logs")


if __name__ == "__main__":
    main()
