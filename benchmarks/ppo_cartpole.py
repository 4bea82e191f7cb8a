"""PPO on CartPole-v1 with PureJaxRL's published config: ours against a random-policy ceiling and rejax.

    python benchmarks/ppo_cartpole.py [--seed 42] [--eval-episodes 128] [--skip-rejax] [--rounds 3]
                                      [--return-seeds 8] [--cpu-threads N]

PureJaxRL's config: 4 envs × 128 steps, 4 epochs × 4 minibatches, 64×64 tanh MLPs, Adam 2.5e-4 annealed
linearly to 0, gamma 0.99, GAE lambda 0.95, clip 0.2, entropy 0.01, value 0.5, max grad norm 0.5, 5e5 steps.
Our budget is exact: 499,712 steps = 8 evaluations × 122 updates × 128 steps × 4 envs (PureJaxRL's
5e5 // 512 = 976 updates, the same number of steps).

For each contender it prints the compile seconds, the steady learning throughput (env steps per second of
learning alone: no compilation, no evaluation; the median of `--rounds` whole-budget runs, ours and rejax's
taken in turn, so that the machine's drift falls on both) and the final policy's mean return over
`--eval-episodes` episodes. Both share one XLA CPU pool: by default the one `arch.cpu_threads: null` picks for
this config (one thread for 4 envs on a CPU: what `python -m experiments.ppo` runs on); rejax's PPO measured the
same on one thread as on two (cpu_threads.py). The ceiling is the same 4 CartPoles stepped with random actions
in a `lax.scan`: what acting alone costs, with no network and no learning (raw gymnax, and again through our env
layer). rejax runs when it is installed (`pip install --no-deps rejax`). Figures depend on the machine and on its
load: compare ratios taken in one run.

One seed's final return is luck: XLA's CPU code differs between processors, and so does a seed's trajectory. With
`--return-seeds N` (8 by default) both contenders also train seeds --seed .. --seed + N - 1 (ours in one program,
rejax's `train` vmapped) and it prints each population's IQM with its 95% bootstrap interval and the seeds that
reach 475.
"""

from __future__ import annotations

import argparse
import tempfile
from typing import Dict

import jax
import jax.numpy as jnp
import numpy as np

# same directory; imported before anything is timed, for what it loads (loop_timing.py says what)
from loop_timing import OurLearning, compare_learning, random_acting_rate, start_backend_as_run_would, time_rollout
from rejax_peer import rejax_algorithm, rejax_learning


NUM_ENVS = 4
ROLLOUT_LENGTH = 128
EPOCHS = 4
NUM_MINIBATCHES = 4
LEARNING_RATE = 2.5e-4
NUM_EVALUATION = 8
TOTAL_TIMESTEPS = 499_712  # 976 updates × 512 steps
NUM_UPDATES = TOTAL_TIMESTEPS // (NUM_ENVS * ROLLOUT_LENGTH)

OURS_OVERRIDES = [
    "env=gymnax/cartpole",
    f"arch.total_timesteps={TOTAL_TIMESTEPS}",
    f"arch.total_num_envs={NUM_ENVS}",
    f"arch.num_evaluation={NUM_EVALUATION}",
    "arch.update_batch_size=1",
    f"system.rollout_length={ROLLOUT_LENGTH}",
    f"system.epochs={EPOCHS}",
    f"system.num_minibatches={NUM_MINIBATCHES}",
    f"system.actor_lr={LEARNING_RATE}",
    f"system.critic_lr={LEARNING_RATE}",
    "system.decay_learning_rates=true",
    "system.gamma=0.99",
    "system.gae_lambda=0.95",
    "system.clip_eps=0.2",
    "system.ent_coef=0.01",
    "system.vf_coef=0.5",
    "system.max_grad_norm=0.5",
    "system.standardize_advantages=true",
    "system.normalize_observations=false",
    "network.actor_network.pre_torso.layer_sizes=[64,64]",
    "network.actor_network.pre_torso.activation=tanh",
    "network.critic_network.pre_torso.layer_sizes=[64,64]",
    "network.critic_network.pre_torso.activation=tanh",
]


def ours_config(seed: int):
    """The config `python -m experiments.ppo` composes from OURS_OVERRIDES."""
    from hydra import compose, initialize_config_dir

    from stoix_like.config.compose import CONFIG_DIR

    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        return compose(config_name="ppo", overrides=OURS_OVERRIDES + [f"arch.seed={seed}"])


def ours(seed: int) -> OurLearning:
    """The real stoix_like PPO: config composed as `python -m experiments.ppo` would, learner compiled apart."""
    from stoix_like.systems.on_policy import ppo

    learning = OurLearning(ppo.learner_setup, ours_config(seed), seed)
    assert learning.budget.num_updates == NUM_UPDATES and learning.budget.total_timesteps == TOTAL_TIMESTEPS
    return learning


def random_ceiling(seed: int) -> Dict[str, float]:
    """gymnax CartPole-v1 (its own auto-reset), vmapped over the same envs, random actions, the same steps."""
    import gymnax

    env, env_params = gymnax.make("CartPole-v1")
    num_steps = TOTAL_TIMESTEPS // NUM_ENVS
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def rollout(key):
        reset_key, key = jax.random.split(key)
        _, env_state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(reset_key, NUM_ENVS), env_params)

        def random_step(carry, _):
            env_state, key = carry
            key, action_key, step_key = jax.random.split(key, 3)
            actions = jax.random.randint(action_key, (NUM_ENVS,), 0, 2)
            # gymnax 1.0: (obs, state, reward, terminated, truncated, info), auto-reset inside
            _, env_state, _, terminated, truncated, _ = step(
                jax.random.split(step_key, NUM_ENVS), env_state, actions, env_params)
            return (env_state, key), (terminated | truncated).sum()

        _, episodes_ended = jax.lax.scan(random_step, (env_state, key), None, length=num_steps)
        return episodes_ended.sum()

    compile_seconds, seconds, episodes = time_rollout(rollout, seed)
    # CartPole pays 1 per step, so a random policy's mean return is its mean episode length
    return {"compile_s": compile_seconds, "steps_per_s": TOTAL_TIMESTEPS / seconds,
            "final_return": TOTAL_TIMESTEPS / max(int(episodes), 1)}


def random_through_our_env_stack(seed: int) -> Dict[str, float]:
    """The same random rollout through stoix_like's env layer (adapter, episode metrics, auto-reset, vmap):
    the difference from the raw gymnax ceiling is what our wrappers cost."""
    rate = random_acting_rate({"suite": "gymnax", "scenario": {"name": "CartPole-v1"}, "kwargs": {}}, NUM_ENVS,
                              TOTAL_TIMESTEPS // NUM_ENVS, seed)
    return {"compile_s": rate["compile_s"], "steps_per_s": rate["steps_per_s"],
            "final_return": TOTAL_TIMESTEPS / max(rate["episodes"], 1)}


def rejax_ppo_config() -> Dict:
    """PureJaxRL's config in rejax's PPO terms. Differences rejax does not let us remove: its `max_grad_norm`
    clips each gradient element (`optax.clip`), not the global norm; its time-limit ends are treated as
    terminations (no bootstrap). The annealed rate is passed as an optax schedule over the same 976 × 16 optimiser
    steps."""
    import optax

    return dict(
        num_envs=NUM_ENVS, num_steps=ROLLOUT_LENGTH, num_epochs=EPOCHS, num_minibatches=NUM_MINIBATCHES,
        learning_rate=optax.linear_schedule(LEARNING_RATE, 0.0, NUM_UPDATES * EPOCHS * NUM_MINIBATCHES),
        max_grad_norm=0.5, total_timesteps=TOTAL_TIMESTEPS, eval_freq=TOTAL_TIMESTEPS // NUM_EVALUATION,
        gamma=0.99, gae_lambda=0.95, clip_eps=0.2, ent_coef=0.01, vf_coef=0.5,
        agent_kwargs={"activation": "tanh", "hidden_layer_sizes": (64, 64)},
    )


def ours_population(first_seed: int, num_seeds: int):
    """Our final returns on seeds first_seed .. first_seed + num_seeds - 1, one program (arch.num_seeds), judged
    as the learning table judges a population (IQM with its 95% bootstrap interval, seeds solved)."""
    from learning_table import compose_into  # same directory

    from stoix_like.claims.learning_population import train_population

    with tempfile.TemporaryDirectory() as run_dir:  # the run's logs are not kept
        overrides = [o for o in OURS_OVERRIDES if not o.startswith("env=")]
        return train_population("ppo", compose_into(run_dir), first_seed, num_seeds, overrides,
                                env="gymnax/cartpole").summary


def rejax_population(first_seed: int, num_seeds: int, eval_episodes: int):
    """rejax's final returns on the same seeds (its `train` vmapped over their keys), each evaluated as its
    single run is, or None where rejax is not installed."""
    try:
        from rejax.evaluate import evaluate
    except ImportError:
        return None
    from stoix_like.claims.learning_targets import target_of
    from stoix_like.claims.population import summarize

    algo = rejax_algorithm("PPO", rejax_ppo_config())
    seeds = list(range(first_seed, first_seed + num_seeds))
    train_states, _ = jax.jit(jax.vmap(algo.train))(jnp.stack([jax.random.PRNGKey(seed) for seed in seeds]))
    returns = []
    for index, seed in enumerate(seeds):
        train_state = jax.tree_util.tree_map(lambda leaf: leaf[index], train_states)
        _, episode_returns = evaluate(algo.make_act(train_state), jax.random.PRNGKey(seed + 1), algo.env,
                                      algo.env_params, eval_episodes, algo.env_params.max_steps_in_episode)
        returns.append(float(np.mean(episode_returns)))
    return summarize(returns, seeds, target_of("ppo", "gymnax/cartpole").solved_return)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--eval-episodes", type=int, default=128)
    parser.add_argument("--skip-rejax", action="store_true")
    parser.add_argument("--rounds", type=int, default=3,
                        help="whole-budget runs per contender, taken in turn; throughput is their median")
    parser.add_argument("--return-seeds", type=int, default=8,
                        help="final returns of a population of seeds --seed .. --seed + N - 1 (0: skip)")
    parser.add_argument("--cpu-threads", type=int, default=None,
                        help="XLA's CPU thread pool for every contender, as arch.cpu_threads sizes it (default: what "
                             "null picks for this config, as `python -m experiments.ppo` would: one thread for 4 envs "
                             "on a CPU); both share this process's pool, so the comparison stays even")
    args = parser.parse_args()
    pool = start_backend_as_run_would(ours_config(args.seed).arch, args.cpu_threads)

    print(f"PPO CartPole-v1, PureJaxRL config: {TOTAL_TIMESTEPS:,} steps = {NUM_UPDATES} updates × "
          f"{ROLLOUT_LENGTH} steps × {NUM_ENVS} envs | jax {jax.__version__} on {jax.devices()[0].platform} "
          f"({jax.device_count()} device, XLA CPU pool: {pool})")
    results = {"random policy (ceiling)": random_ceiling(args.seed),
               "random, our env stack": random_through_our_env_stack(args.seed)}
    learners = {"ours": ours(args.seed)}
    peer = None if args.skip_rejax else rejax_learning("PPO", rejax_ppo_config(), args.seed)
    if peer is not None:
        learners["rejax"] = peer
    elif not args.skip_rejax:
        print("rejax is not installed: `pip install --no-deps rejax` to compare with it")
    results.update(compare_learning(learners, args.rounds, args.eval_episodes))

    print(f"{'':<24}{'compile s':>10}{'steps/s':>12}{'final return':>14}")
    for name, row in results.items():
        print(f"{name:<24}{row['compile_s']:>10.1f}{row['steps_per_s']:>12,.0f}{row['final_return']:>14.1f}")
    print(f"(steps/s of learning: the median of {args.rounds} whole-budget runs per contender, taken in turn; "
          f"ours: learner_setup {results['ours']['setup_s']:.1f}s before compiling; a random policy's 'return' is its "
          f"mean episode length; final returns over {args.eval_episodes} episodes)")
    ours_speed = results["ours"]["steps_per_s"]
    ceiling = results["random policy (ceiling)"]["steps_per_s"]
    print(f"ours / random policy: {ours_speed / ceiling:.3f} of the acting-only ceiling (our env stack alone: "
          f"{results['random, our env stack']['steps_per_s'] / ceiling:.2f} of it)")
    if "rejax" in results:
        ours_start = results["ours"]["compile_s"] + results["ours"]["setup_s"]
        print(f"ours / rejax: {ours_speed / results['rejax']['steps_per_s']:.2f}× the throughput, "
              f"compile {results['ours']['compile_s'] / results['rejax']['compile_s']:.2f}× the time, "
              f"compile + setup ({ours_start:.1f}s) {ours_start / results['rejax']['compile_s']:.2f}× rejax's compile")
    if args.return_seeds:
        # one seed's final return is luck (its trajectory differs between CPUs): the claim is the population's
        print(f"final returns, {args.return_seeds} seeds from {args.seed} ({args.eval_episodes} episodes each for "
              f"rejax, the absolute metric for ours):")
        print(f"  ours:  {ours_population(args.seed, args.return_seeds).describe()}")
        rejax_summary = None if args.skip_rejax else rejax_population(
            args.seed, args.return_seeds, args.eval_episodes)
        if rejax_summary is not None:
            print(f"  rejax: {rejax_summary.describe()}")


if __name__ == "__main__":
    main()
