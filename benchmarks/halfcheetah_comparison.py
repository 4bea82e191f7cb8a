"""The continuous-action systems on brax/halfcheetah for the same wall-clock budget each, against PPO and SAC;
prints the return each reached and its learning steps/s.

    python benchmarks/halfcheetah_comparison.py                          # every system below, 60 s of learning each
    python benchmarks/halfcheetah_comparison.py --algorithms sac mpo --seconds 120

The budget counts learning only: building, warm-up and compilation are timed apart. Each system runs through
the experiment loop's own steps (`experiment.set_up`, `compile_learner`, `learn_once`), so exactly what
`python -m experiments.<algo> env=brax/halfcheetah` trains with that seed, in chunks of updates until the budget
is spent; then the final policy is evaluated on `EVAL_EPISODES` episodes with the run's own first eval key.
"""

from __future__ import annotations

import argparse
import time
from typing import Sequence

import jax
import numpy as np
from hydra import compose, initialize_config_dir

from stoix_like import envs, systems
from stoix_like.run import experiment, shared
from stoix_like.learner import budget as budget_lib
from stoix_like.config.compose import CONFIG_DIR

EVAL_EPISODES = 16
# Far more evaluations than the wall budget will reach: the loop below stops early, one chunk at a time.
CHUNKS = 10_000

# CPU-sized settings for a running budget of a minute or two (the defaults are for Pendulum / CartPole). A family
# shares its settings, so the comparison is of the algorithms, not of their tuning: the replay learners act 2 steps
# of 16 envs between 4 gradient steps, the on-policy ones learn from 32 steps of 64 envs (REINFORCE in one pass).
REPLAY = ["arch.total_num_envs=16", "system.rollout_length=2", "system.warmup_rollout_length=64",
          "system.gradient_steps_per_update=4", "system.normalize_observations=True",
          "network.actor_network.pre_torso.layer_sizes=[256,256]"]
ON_POLICY = ["arch.total_num_envs=64", "system.rollout_length=32", "system.actor_lr=3e-4", "system.critic_lr=3e-4",
             "system.decay_learning_rates=False", "system.normalize_observations=True"]
PPO_EPOCHS = ["system.epochs=4", "system.num_minibatches=8", "system.ent_coef=0.001"]
# V-MPO's defaults are CartPole's: continuous actions take its Gaussian KL bounds (those tuned on Pendulum)
GAUSSIAN_KL_BOUNDS = ["system.categorical_kl_bound=null", "system.mean_kl_bound=0.01", "system.scale_kl_bound=1e-4"]
OVERRIDES = {
    "sac": [*REPLAY, "network.q_network.pre_torso.layer_sizes=[256,256]"],
    "mpo": [*REPLAY, "network.q_network.pre_torso.layer_sizes=[256,256]"],
    "awr": [*REPLAY, "network.critic_network.pre_torso.layer_sizes=[256,256]", "system.sequence_length=16"],
    "ppo": [*ON_POLICY, *PPO_EPOCHS],
    "ppo_penalty": [*ON_POLICY, *PPO_EPOCHS],
    "dpo": [*ON_POLICY, *PPO_EPOCHS],
    "reinforce": [*ON_POLICY, "system.ent_coef=0.001"],
    "vmpo": [*ON_POLICY, "system.epochs=4", "system.num_minibatches=8", "system.target_update_period=32",
             *GAUSSIAN_KL_BOUNDS],
}
# updates per learn call: a call of a few seconds keeps the budget's overshoot small
UPDATES_PER_CHUNK = {"sac": 100, "mpo": 100, "awr": 100, "ppo": 2, "ppo_penalty": 2, "dpo": 2, "reinforce": 2,
                     "vmpo": 2}


def config_for(algorithm: str, episode_length: int, seed: int):
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        config = compose(config_name=algorithm, overrides=[
            "env=brax/halfcheetah", f"env.max_episode_steps={episode_length}", f"arch.seed={seed}",
            "arch.evaluation_greedy=True", f"arch.num_evaluation={CHUNKS}", *OVERRIDES[algorithm]])
    system = config.system
    envs_total = int(config.arch.total_num_envs)
    warmup = int(system.get("warmup_rollout_length", 0) or 0) * envs_total
    per_chunk = UPDATES_PER_CHUNK[algorithm] * int(system.rollout_length) * envs_total
    config.arch.total_timesteps = warmup + per_chunk * CHUNKS
    return config


def train_for(algorithm: str, seconds: float, episode_length: int, seed: int) -> dict:
    config = config_for(algorithm, episode_length, seed)
    budget = budget_lib.make_budget(config)
    train_env, eval_env = envs.make(config.env)
    # the experiment loop's own steps: setup (warm-up included) and compile, then learn calls until time is up
    start = time.perf_counter()
    prepared = experiment.set_up(systems.system_module(algorithm).learner_setup, train_env, config, budget, [seed])
    learn, _ = experiment.compile_learner(prepared.system, prepared.fresh_state, num_seeds=1)
    setup_seconds = time.perf_counter() - start

    state, steps, train_returns, learn_seconds = prepared.fresh_state, budget.warmup_steps, [], 0.0
    while learn_seconds < seconds:
        learned = experiment.learn_once(learn, state)
        state, learn_seconds = learned.learner_state, learn_seconds + learned.seconds
        steps += budget.steps_per_evaluation
        episodes = learned.outputs.episode_metrics
        ended = episodes["is_terminal_step"]
        if ended.any():
            train_returns.append(float(episodes["episode_return"][ended].mean()))

    evaluate = experiment.make_evaluate(eval_env, prepared.system.eval_policy, EVAL_EPISODES)
    returns = evaluate(shared.eval_params_of(prepared.system, state, 0, num_seeds=1), prepared.eval_keys[0])
    return {"algorithm": algorithm, "steps": steps, "warmup_steps": budget.warmup_steps,
            "setup_s": setup_seconds, "learn_s": learn_seconds,
            "last_train_return": train_returns[-1] if train_returns else float("nan"),
            "eval_return": float(np.mean(returns["episode_return"])),
            "eval_std": float(np.std(returns["episode_return"]))}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="learning wall budget per algorithm")
    parser.add_argument("--episode-length", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--algorithms", nargs="+", default=list(OVERRIDES), choices=list(OVERRIDES))
    args = parser.parse_args(argv)
    print(f"brax/halfcheetah (spring), episode_length {args.episode_length}, {args.seconds:.0f}s of learning each, "
          f"{jax.device_count()} {jax.default_backend()} device(s)", flush=True)
    for algorithm in args.algorithms:
        r = train_for(algorithm, args.seconds, args.episode_length, args.seed)
        print(f"{r['algorithm']:>11}: {r['steps']:>9,} env steps ({r['warmup_steps']:,} of them warm-up), "
              f"{r['learn_s']:.0f}s learning at {(r['steps'] - r['warmup_steps']) / r['learn_s']:,.0f} steps/s "
              f"(setup, warm-up and compile {r['setup_s']:.0f}s) | "
              f"last train return {r['last_train_return']:8.1f} | "
              f"eval return {r['eval_return']:8.1f} ± {r['eval_std']:.1f} ({EVAL_EPISODES} episodes)", flush=True)


if __name__ == "__main__":
    main()
