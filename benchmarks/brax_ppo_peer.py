"""Brax's own PPO trainer on the config that `benchmarks/scaling.py --env brax/ant` gives ours: its steady steps/s.

    python benchmarks/brax_ppo_peer.py [--envs 2048] [--epochs 3] [--updates-per-epoch 4] [--seed 0]

The same work per update as ours with its shipped defaults: N ant envs (spring backend, 1,000-step episodes)
each unrolled 125 steps, 4 epochs × 4 minibatches over those N × 125 transitions, 64×64 tanh MLPs for the
policy and the value, a tanh-squashed Gaussian policy, no observation normalisation, gradient norm clipped at
0.5. brax's trainer times each of its training epochs itself (`training/sps`); the first two include
compilation (the second call compiles again: its inputs come placed differently from the first's), so the script
prints the last. Its evaluations are off, so what is timed is acting and learning alone, as in
`scaling.py`. `brax.training` needs a jax that its release supports: on this repo's pinned CPU stack it may not
run, and the script says so in one line.

Differences that remain: brax's GAE and losses are its own (value bootstrapping on truncation, advantage
normalisation per batch), and it keeps its env state in its own wrappers. The comparison is of throughput on
the same amount of work, not of learning.
"""

from __future__ import annotations

import argparse
import functools
import sys

ROLLOUT_LENGTH = 125  # config/system/ppo.yaml
EPOCHS = 4
NUM_MINIBATCHES = 4
HIDDEN = (64, 64)  # config/network/mlp_ppo.yaml


def _restore_device_put_replicated(jax) -> None:
    """brax 0.14's trainer still calls `jax.device_put_replicated`, which jax 0.10 removed. pmap takes an array
    whose leading axis is the device count from anywhere, so a stacked copy per device does the same job."""
    try:
        jax.device_put_replicated  # noqa: B018 (the attribute raises once removed)
    except AttributeError:
        import jax.numpy as jnp

        jax.device_put_replicated = lambda tree, devices: jax.tree.map(
            lambda leaf: jnp.stack([jnp.asarray(leaf)] * len(devices)), tree)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", type=int, default=2048)
    parser.add_argument("--epochs", type=int, default=3, help="brax training epochs; the first two compile")
    parser.add_argument("--updates-per-epoch", type=int, default=4, help="PPO updates (N × 125 steps each) per epoch")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.envs % NUM_MINIBATCHES or args.epochs < 3:
        parser.error(f"--envs must be a multiple of {NUM_MINIBATCHES} and --epochs at least 3 (two compile)")

    try:
        import jax
        from brax import envs
        from brax.training.agents.ppo import networks as ppo_networks
        from brax.training.agents.ppo import train as ppo
        from flax import linen
    except Exception as error:  # brax.training pins its own jax range
        sys.exit(f"brax's PPO trainer does not import here: {type(error).__name__}: {error}")
    _restore_device_put_replicated(jax)

    steps_per_update = args.envs * ROLLOUT_LENGTH
    sps = []

    def record(step: int, metrics) -> None:
        sps.append(float(metrics["training/sps"]))
        print(f"  brax PPO epoch {len(sps)}: {step:,} steps, {sps[-1]:,.0f} steps/s", flush=True)

    ppo.train(
        environment=envs.get_environment("ant", backend="spring"),
        num_timesteps=args.epochs * args.updates_per_epoch * steps_per_update,
        num_evals=args.epochs + 1,  # brax: one call before training, then one per epoch
        run_evals=False,
        episode_length=1000,
        num_envs=args.envs,
        unroll_length=ROLLOUT_LENGTH,
        batch_size=args.envs // NUM_MINIBATCHES,  # trajectories per minibatch: one rollout of N envs per update
        num_minibatches=NUM_MINIBATCHES,
        num_updates_per_batch=EPOCHS,
        learning_rate=2.5e-4,
        entropy_cost=0.01,
        discounting=0.99,
        gae_lambda=0.95,
        clipping_epsilon=0.2,
        max_grad_norm=0.5,
        normalize_observations=False,
        network_factory=functools.partial(ppo_networks.make_ppo_networks, policy_hidden_layer_sizes=HIDDEN,
                                          value_hidden_layer_sizes=HIDDEN, activation=linen.tanh),
        seed=args.seed,
        progress_fn=record,
    )
    print(f"brax PPO on ant, {args.envs} envs | jax {jax.__version__} on {jax.devices()[0].platform}: "
          f"steady {sps[-1]:,.0f} steps/s (last of {len(sps)} epochs; the first two, with compilation, "
          f"{sps[0]:,.0f} and {sps[1]:,.0f})")


if __name__ == "__main__":
    main()
