"""PPO at brax's own published budget on an accelerator: ours (the seeds in one program) and brax's trainer
(its notebook's recipe, one seed at a time), each evaluation stamped with the wall time it was reached at.

    python benchmarks/brax_published_budget.py --task ant --side ours --first-seed 1001 --num-seeds 8 --out DIR
    python benchmarks/brax_published_budget.py --task ant --side brax --first-seed 1001 --num-seeds 4 --out DIR

brax's side is `brax.training.agents.ppo.train` with the keyword arguments of brax's training notebook
(google/brax notebooks/training.ipynb, `train_fn` per env) and brax's default networks, on the spring backend our
`env=brax/<task>` composes (the notebook's own cell picks a backend per run; spring is the one both sides share).

Ours moves the same amount of data per update into our update shape: one update is every env unrolled
`system.rollout_length` steps, so brax's `batch_size × num_minibatches` sequences of `unroll_length` steps over
`num_envs` envs become `num_envs` envs × (that total / num_envs) steps, cut into the same number of minibatches
of the same size, with the same passes. The budget is the notebook's 50M rounded up to whole evaluation intervals.
Everything else is the shipped file's (`config/tuned/ppo/brax/<task>.yaml`, where there is one): a recipe tuned on
2 CPU cores at 5M steps, run here unchanged. A task with no tuned file takes ant's networks and the notebook's
discount, entropy and reward scaling.

Writes `<out>/<task>_<side>.json`: per seed, each evaluation's (step, return, seconds since the program started),
the final and best evaluations, and the wall time; ours also leaves its run logs in `<out>/ours_<task>/`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Dict, List, Tuple

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

# brax's training notebook, PPO: its `train_fn` for each env (all 50M steps, 10 evaluations, observation
# normalisation, episodes of 1,000 steps, no action repeat, learning rate 3e-4).
NOTEBOOK: Dict[str, Dict[str, Any]] = {
    "ant": dict(num_timesteps=50_000_000, num_evals=10, reward_scaling=10.0, episode_length=1000,
                normalize_observations=True, action_repeat=1, unroll_length=5, num_minibatches=32,
                num_updates_per_batch=4, discounting=0.97, learning_rate=3e-4, entropy_cost=1e-2, num_envs=4096,
                batch_size=2048),
    "humanoid": dict(num_timesteps=50_000_000, num_evals=10, reward_scaling=0.1, episode_length=1000,
                     normalize_observations=True, action_repeat=1, unroll_length=10, num_minibatches=32,
                     num_updates_per_batch=8, discounting=0.97, learning_rate=3e-4, entropy_cost=1e-3,
                     num_envs=2048, batch_size=1024),
}
TUNED_DIR = os.path.join(REPO_ROOT, "config", "tuned", "ppo", "brax")
# --smoke: the same code on a budget a CPU runs in seconds (its test; no claim rests on it).
SMOKE = dict(num_timesteps=2 * 16 * 4 * 8, num_evals=2, num_envs=16, batch_size=8, num_minibatches=4,
             unroll_length=4)


def our_shape(recipe: Dict[str, Any], num_evaluation: int) -> Tuple[int, int]:
    """(rollout_length, total_timesteps): brax's data per update as our rollout, the budget in whole intervals."""
    per_update = recipe["batch_size"] * recipe["num_minibatches"] * recipe["unroll_length"]
    rollout_length = per_update // recipe["num_envs"]
    updates = -(-recipe["num_timesteps"] // per_update)
    updates = -(-updates // num_evaluation) * num_evaluation
    return rollout_length, updates * per_update


def recipe_of(task: str, smoke: bool) -> Dict[str, Any]:
    return {**NOTEBOOK[task], **(SMOKE if smoke else {})}


def our_overrides(task: str, first_seed: int, num_seeds: int, log_dir: str, smoke: bool = False) -> List[str]:
    recipe = recipe_of(task, smoke)
    num_evaluation = recipe["num_evals"]
    rollout_length, total = our_shape(recipe, num_evaluation)
    overrides = [f"env=brax/{task}", f"arch.seed={first_seed}", f"arch.num_seeds={num_seeds}",
                 f"arch.total_num_envs={recipe['num_envs']}", f"arch.total_timesteps={total}",
                 f"arch.num_evaluation={num_evaluation}", "arch.seed_loop=vmap",
                 f"system.rollout_length={rollout_length}", f"system.num_minibatches={recipe['num_minibatches']}",
                 f"system.epochs={recipe['num_updates_per_batch']}", f"logger.base_exp_path={log_dir}"]
    if smoke:
        overrides.append("arch.num_eval_episodes=2")
    if not os.path.exists(os.path.join(TUNED_DIR, f"{task}.yaml")):
        overrides += [f"system.gamma={recipe['discounting']}", f"system.ent_coef={recipe['entropy_cost']}",
                      f"system.reward_scale={recipe['reward_scaling']}", "system.normalize_observations=True",
                      f"system.actor_lr={recipe['learning_rate']}", f"system.critic_lr={recipe['learning_rate']}",
                      "system.decay_learning_rates=False", "system.clip_value_loss=False",
                      "network.actor_network.pre_torso.activation=silu",
                      "network.actor_network.pre_torso.kernel_init=lecun_uniform",
                      "network.actor_network.action_head.kernel_init=lecun_uniform",
                      "network.critic_network.pre_torso.layer_sizes=[256,256,256]",
                      "network.critic_network.pre_torso.activation=silu",
                      "network.critic_network.pre_torso.kernel_init=lecun_uniform",
                      "network.critic_network.critic_head.kernel_init=lecun_uniform"]
    return overrides


class EvaluationClock:
    """Passes the console through, and notes the seconds since the program started at which each evaluation's
    first `[eval ...] step N` line is printed (the seeds of one program are evaluated together). Each new stamp is
    also written to `path` at once: a lease's limit can cut the program before its end (the 2026-11-29 lease cut
    ant's in the final re-evaluations and lost the stamps it held only in memory)."""

    def __init__(self, stream, start: float, path: str):
        self.stream, self.start, self.path, self._line = stream, start, path, ""
        self.seconds_at_step: Dict[int, float] = {}

    def write(self, text: str) -> int:
        self._line += text
        while "\n" in self._line:
            line, self._line = self._line.split("\n", 1)
            if line.startswith("[eval"):
                step = int(line.split("] step ", 1)[1].split()[0].replace(",", ""))
                if step not in self.seconds_at_step:
                    self.seconds_at_step[step] = round(time.perf_counter() - self.start, 2)
                    with open(self.path, "w") as file:
                        json.dump(self.seconds_at_step, file)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


def run_ours(task: str, first_seed: int, num_seeds: int, out: str, smoke: bool) -> Dict[str, Any]:
    start = time.perf_counter()
    from stoix_like.config.compose import compose_config
    from stoix_like.run import experiment
    from stoix_like.systems import system_module

    log_dir = os.path.join(out, f"ours_{task}")
    overrides = our_overrides(task, first_seed, num_seeds, log_dir, smoke)
    config = compose_config("ppo", overrides)
    clock = EvaluationClock(sys.stdout, start, os.path.join(out, f"{task}_ours_clock.json"))
    sys.stdout = clock
    try:
        experiment.train(config, system_module("ppo").learner_setup, "ppo")
    finally:
        sys.stdout = clock.stream
    with open(os.path.join(log_dir, "metrics.json")) as file:
        metrics = json.load(file)["brax"][task]["ppo"]
    seeds = list(range(first_seed, first_seed + num_seeds))
    evaluations, finals = [], []
    for seed in seeds:
        per_seed = metrics[f"seed_{seed}"]
        steps = sorted((key for key in per_seed if key.startswith("step_")), key=lambda key: int(key[5:]))
        curve = [(int(per_seed[key]["step_count"]), float(sum(per_seed[key]["episode_return"])
                                                           / len(per_seed[key]["episode_return"])))
                 for key in steps]
        evaluations.append([(step, value, clock.seconds_at_step.get(step)) for step, value in curve])
        final = per_seed["absolute_metrics"]["final_episode_return"]
        finals.append(sum(final) / len(final))
    return {"side": "ours", "task": task, "seeds": seeds, "overrides": overrides,
            "total_timesteps": int(config.arch.total_timesteps), "final": finals,
            "best_evaluation": [max(value for _, value, _ in curve) for curve in evaluations],
            "evaluations": evaluations, "wall_seconds": time.perf_counter() - start}


def run_brax(task: str, first_seed: int, num_seeds: int, out: str, smoke: bool) -> Dict[str, Any]:
    start = time.perf_counter()
    import jax
    from brax import envs
    from brax.training.agents.ppo import train as ppo

    from benchmarks.brax_ppo_peer import _restore_device_put_replicated
    from stoix_like.config.compose import compose_config

    _restore_device_put_replicated(jax)
    env_kwargs = dict(compose_config("ppo", [f"env=brax/{task}"]).env.kwargs)
    env = envs.get_environment(task, **env_kwargs)
    seeds = list(range(first_seed, first_seed + num_seeds))
    recipe = recipe_of(task, smoke)
    if smoke:
        recipe["num_eval_envs"] = 2
    result: Dict[str, Any] = {"side": "brax", "task": task, "seeds": [], "recipe": recipe,
                              "env_kwargs": env_kwargs, "final": [], "best_evaluation": [], "evaluations": [],
                              "wall_seconds_per_seed": []}
    path = os.path.join(out, f"{task}_brax.json")
    for seed in seeds:
        seed_start = time.perf_counter()
        curve: List[Tuple[int, float, float]] = []
        progress = lambda step, metrics: curve.append((int(step), float(metrics["eval/episode_reward"]),
                                                       round(time.perf_counter() - seed_start, 2)))
        ppo.train(environment=env, seed=seed, progress_fn=progress, **recipe)
        result["seeds"].append(seed)
        result["evaluations"].append(curve)
        result["final"].append(curve[-1][1])
        result["best_evaluation"].append(max(value for _, value, _ in curve[1:]))
        result["wall_seconds_per_seed"].append(time.perf_counter() - seed_start)
        result["total_timesteps"] = curve[-1][0]
        result["wall_seconds"] = time.perf_counter() - start
        print(f"brax {task} seed {seed}: final {curve[-1][1]:.1f} at step {curve[-1][0]:,} in "
              f"{result['wall_seconds_per_seed'][-1]:.0f}s", flush=True)
        with open(path, "w") as file:  # after every seed: a run cut short keeps the seeds it finished
            json.dump(result, file, indent=1)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=sorted(NOTEBOOK), required=True)
    parser.add_argument("--side", choices=("ours", "brax"), required=True)
    parser.add_argument("--first-seed", type=int, default=1001)
    parser.add_argument("--num-seeds", type=int, default=8)
    parser.add_argument("--out", required=True, help="folder for the result JSON (and our run logs)")
    parser.add_argument("--smoke", action="store_true", help="a budget of seconds, to test the code on a CPU")
    args = parser.parse_args()
    if args.num_seeds < 1:
        parser.error("--num-seeds must be at least 1")
    os.makedirs(args.out, exist_ok=True)
    import jax

    print(f"{args.side} {args.task} on {jax.devices()[0].device_kind} (jax {jax.__version__})", flush=True)
    if args.side == "ours":
        result = run_ours(args.task, args.first_seed, args.num_seeds, args.out, args.smoke)
        result["device"] = jax.devices()[0].device_kind
        with open(os.path.join(args.out, f"{args.task}_ours.json"), "w") as file:
            json.dump(result, file, indent=1)
    else:
        result = run_brax(args.task, args.first_seed, args.num_seeds, args.out, args.smoke)
    print(json.dumps({key: result[key] for key in ("side", "task", "seeds", "final", "best_evaluation")}))


if __name__ == "__main__":
    main()
