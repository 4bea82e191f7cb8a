"""What every Q-learning system on the off-policy skeleton shares; the systems differ only in their loss.

A Q-network's head decides the form of its output: scalar Q-values `[B, A]` (DQN), or a return distribution
with its expected Q-values in `.q_values` (C51's CategoricalQOutput, QR-DQN's QuantileQOutput). Acting
(ε-greedy, or noisy layers with ε = 0) and greedy evaluation go through the expected Q-values only, so they
are the same for every head. A system supplies one `QLoss`:

    q_loss(online, target, batch) -> (per_example_loss [B], priorities [B], metrics)

where `online(observation)` / `target(observation)` apply the online / target network (one sampled noise
per network and gradient step when the network is noisy). This file does the rest: the head check, the
gradient step with its device-and-batch averaging, the target update and the off-policy plumbing.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Dict, Tuple, Union

import jax
import jax.numpy as jnp
import optax
from omegaconf import DictConfig

from stoix_like.runtime import host_keys, parallel
from stoix_like.learner import hyperparams, normalization, replay, target_networks
from stoix_like.runtime.compilation_cache import jitted_init
from stoix_like.learner.budget import Budget
from stoix_like.envs.environment import DiscreteActionSpace, Environment, example_observation
from stoix_like.errors import ConfigError
from stoix_like.learner.exploration import epsilon_greedy, epsilon_schedule, evaluation_action
from stoix_like.networks.base import FeedForwardQNetwork
from stoix_like.networks.factory import build_q_network
from stoix_like.networks.heads import CategoricalQOutput, QuantileQOutput
from stoix_like.networks.noisy import NOISE_STREAM
from stoix_like.learner.optim import make_optimizer
from stoix_like.learner.replay import Transition
from stoix_like.learner.system_contract import SystemSetup
from stoix_like.systems import off_policy
from stoix_like.types import OnlineAndTarget

QLoss = Callable[[Callable, Callable, Transition], Tuple[jax.Array, jax.Array, Dict[str, jax.Array]]]

# What a head outputs, by output type; a system names the kind its loss needs.
HEAD_KINDS = {CategoricalQOutput: "categorical", QuantileQOutput: "quantile"}
SCALAR = "scalar"
# What a Q head outputs: scalar Q-values [B, A], or a return distribution around its expected Q-values
QOutput = Union[jax.Array, CategoricalQOutput, QuantileQOutput]


def head_kind(output: QOutput) -> str:
    return HEAD_KINDS.get(type(output), SCALAR)


def q_values_of(output: Any) -> jax.Array:
    """The expected Q-values `[B, A]` of any Q head's output."""
    return getattr(output, "q_values", output)


def make_apply(q_network: FeedForwardQNetwork) -> Callable:
    """`apply(params, observation, noise_key=None)`: with a key, noisy layers sample their noise from it;
    without one they use their mean weights (greedy evaluation). Networks without noisy layers ignore the key."""

    def apply(params, observation, noise_key=None):
        if noise_key is None:
            return q_network.apply(params, observation)
        return q_network.apply(params, observation, rngs={NOISE_STREAM: noise_key})

    return apply


def make_act(apply: Callable, system: DictConfig, total_timesteps: int):
    """ε-greedy on the expected Q-values over legal actions; noise (if any) sampled afresh every step."""
    def act(params: OnlineAndTarget, observation, key, global_env_steps):
        noise_key, explore_key = jax.random.split(key)
        q_values = q_values_of(apply(params.online, observation, noise_key))
        # the schedule built while the learner is traced, so that a sweep's members each decay their own ε
        epsilon_at = epsilon_schedule(hyperparams.value(system, "epsilon_start"),
                                      hyperparams.value(system, "epsilon_end"), system.epsilon_decay_fraction,
                                      total_timesteps)
        epsilon = epsilon_at(global_env_steps)
        action = epsilon_greedy(explore_key, q_values, observation.action_mask, epsilon)
        return action, action

    return act


def evaluation_policy(apply: Callable, epsilon: float = 0.0):
    """Eval policy: the best legal action under the mean (noise-free) network, or, with `epsilon` > 0
    (`system.evaluation_epsilon`), a uniformly random legal one with that probability, as evaluation protocols that
    judge a value-based agent slightly off-greedy do (rejax: 0.005), so that an agent stuck on one action is not
    judged stuck forever. Eval params: (q_params, obs_norm)."""

    def policy(eval_params, observation, key):
        q_params, obs_norm = eval_params
        q_values = q_values_of(apply(q_params, normalization.normalize(obs_norm, observation)))
        return evaluation_action(key, q_values, observation.action_mask, epsilon)

    return policy


def make_learn_from_batch(apply: Callable, q_update: Callable, q_loss: QLoss, system: DictConfig
                          ) -> off_policy.LearnFromBatch:
    """The skeleton's `learn_from_batch`: one importance-weighted gradient step, then the target update."""

    def loss_fn(online_params, target_params, batch: Transition, weights: jax.Array, key: jax.Array):
        online_key, target_key = jax.random.split(key)
        online = functools.partial(apply, online_params, noise_key=online_key)
        target = functools.partial(apply, target_params, noise_key=target_key)
        per_example, priorities, metrics = q_loss(online, target, batch)
        return jnp.mean(weights * per_example), (jax.lax.stop_gradient(priorities), metrics)

    def learn_from_batch(params: OnlineAndTarget, opt_state, batch: Transition, weights, key, update_count):
        grads, (priorities, metrics) = jax.grad(loss_fn, has_aux=True)(
            params.online, params.target, batch, weights, key)
        grads, metrics = parallel.pmean_batch_then_device((grads, metrics))
        updates, opt_state = q_update(grads, opt_state, params.online)
        online = optax.apply_updates(params.online, updates)
        # the period counts gradient steps taken, this one included: a copy lands at the end of each period
        target = target_networks.update_target(online, params.target, update_count + 1,
                                               hyperparams.value(system, "tau"), int(system.target_update_period))
        return off_policy.BatchUpdate(OnlineAndTarget(online, target), opt_state, metrics, priorities)

    return learn_from_batch


def check_discrete_q_network(env: Environment, config: DictConfig, example_networks: str) -> None:
    """Refuses continuous actions, and a network without a q_network of one value per action."""
    name = str(config.system.system_name)
    if not isinstance(env.action_space, DiscreteActionSpace):
        raise ConfigError(f"{config.env.scenario.name} has continuous actions; {name} needs discrete ones "
                          f"(use experiments.sac / td3 / ddpg for continuous control).")
    if "q_network" not in config.network or "actor_network" in config.network:
        # an actor-critic network (SAC's, TD3's) has a q_network too, but of Q(s, a): not one value per action
        raise ConfigError(f"the network config has no q_network of one value per action, which {name} needs; "
                          f"use e.g. network={example_networks}.")


def make_system_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget, *, q_loss: QLoss,
                  needs_head: str, example_networks: str) -> SystemSetup:
    """A value-based system's setup. `needs_head` is the head kind `q_loss` reads (see HEAD_KINDS);
    a network whose head outputs anything else is refused, naming `example_networks` that fit."""
    system = config.system
    name = str(system.system_name)
    check_discrete_q_network(env, config, example_networks)
    q_network = build_q_network(config.network, env.action_space)
    observation = example_observation(env)
    # shapes only: nothing is compiled or run to find out what the head outputs
    example_output, _ = jax.eval_shape(q_network.init_with_output, host_keys.seed_key(0), observation)
    if head_kind(example_output) != needs_head:
        raise ConfigError(
            f"the network's Q head ({config.network.q_network.q_head._target_}) outputs {head_kind(example_output)} "
            f"Q-values but {name} needs a {needs_head} head; use e.g. network={example_networks}.")

    init_key, key = host_keys.split(key)
    online = jitted_init(q_network)(init_key, observation)  # one compile, not one per op
    apply = make_apply(q_network)
    optimizer = q_optimizer(system, budget)
    return off_policy.make_system_setup(
        env, key, config, budget,
        params=OnlineAndTarget(online, online), opt_states=optimizer.init(online),
        act=make_act(apply, system, budget.total_timesteps),
        learn_from_batch=make_learn_from_batch(apply, optimizer.update, q_loss, system),
        batches=replay.n_step_batches(system),
        eval_policy=evaluation_policy(apply, float(system.evaluation_epsilon)),
        eval_params=lambda slot: (slot.params.online, slot.obs_norm),
        prioritized=bool(system.prioritized_replay),
    )


def q_optimizer(system: DictConfig, budget: Budget):
    """The Q-network's optimiser (`q_lr`, clipped at `max_grad_norm`, decayed over the run's gradient steps), shared by
    every value-based learner; on one vector, since their gradient steps on small sampled batches are kernel-bound
    (optim.on_one_vector has the figures)."""
    return make_optimizer(hyperparams.learning_rate(system, "q_lr"), system.max_grad_norm,
                          budget.num_updates * int(system.gradient_steps_per_update), system.decay_learning_rates,
                          one_vector=True)
