"""R2D2 (Kapturowski et al., 2019): recurrent Q-learning from replayed sequences.

Recurrence is the network's (`network=lstm_r2d2` or `gru_r2d2`, networks/recurrent.py); what this system adds to
the DQN family's pieces (the ε schedule, the gradient step with its target update: q_learning/value_based.py; the
replay and acting plumbing: off_policy.py) is how a Q-network with memory acts and is replayed:

* **Acting.** Each env carries its hidden state (reset where an episode starts) and stores, with every step, the
  state it entered the step with. ε-greedy per actor: env i of a slot explores at ε(t)^(1 + α·i/(N − 1)), ε(t) the
  family's linear schedule and α `system.epsilon_actor_exponent` (Ape-X's spread; α = 0: one ε for all).
* **Sequence replay.** Disjoint sequences of `sequence_length` stored steps, each one item of a prioritised
  flashbax trajectory buffer (`period = sequence_length`); `sequence_length` divides `rollout_length`, so every
  rollout stores whole sequences. A sequence is replayed from the hidden state stored at its first step (R2D2's
  "stored state"), with the reset flags of the episode ends inside it.
* **Burn-in.** Online and target networks unroll the first `burn_in` steps without gradient, only to warm the
  stored state up; the loss is on the remaining steps.
* **Targets.** n-step double Q-learning in value-rescaled space: h(Σ γ^k r + γ^n·d·h⁻¹(Q_target(s', argmax_a
  Q_online(s', a)))), each step's successor the true (pre-reset) one, read from the hidden state after that step:
  termination drops the bootstrap, truncation keeps it (`ops.losses.rescaled_n_step_double_q_td_errors`).
* **Priorities.** η·max|δ| + (1 − η)·mean|δ| over the learnt steps (`system.priority_max_weight`, η = 0.9).
* **Evaluation.** Greedy, each eval env carrying its hidden state through its episode (`evaluator.PolicyWithMemory`).
"""

from __future__ import annotations

import functools
from typing import Callable, Dict, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from omegaconf import DictConfig

from stoix_like.run import experiment
from stoix_like.runtime import host_keys
from stoix_like.learner import normalization, replay
from stoix_like.learner.budget import Budget
from stoix_like.runtime.compilation_cache import jitted_init
from stoix_like.envs.environment import Environment, example_observation
from stoix_like.errors import ConfigError
from stoix_like.learner.evaluator import PolicyWithMemory
from stoix_like.learner.exploration import epsilon_greedy, epsilon_schedule, evaluation_action, per_actor_epsilons
from stoix_like.networks.factory import build_recurrent_q_network
from stoix_like.networks.noisy import NOISE_STREAM
from stoix_like.networks.recurrent import Hidden, RecurrentQNetwork, reset_where
from stoix_like.ops import losses
from stoix_like.learner.replay import Transition
from stoix_like.learner.system_contract import SystemSetup
from stoix_like.systems import off_policy
from stoix_like.systems.q_learning import value_based
from stoix_like.types import Array, Observation, OnlineAndTarget, Params, PyTree

EXAMPLE_NETWORKS = "lstm_r2d2 or gru_r2d2"


def make_apply(q_network: RecurrentQNetwork) -> Callable:
    """`apply(params, hidden, observation (T, B, ...), reset (T, B), emit_hidden=False, noise_key=None)`: the
    network's call, with noisy layers (if any) sampling from `noise_key`, or at their mean without one."""

    def apply(params, hidden, observation, reset, emit_hidden=False, noise_key=None):
        rngs = {} if noise_key is None else {NOISE_STREAM: noise_key}
        return q_network.apply(params, hidden, observation, reset, emit_hidden, rngs=rngs)

    return apply


def _one_step(observation: Observation) -> Observation:
    """A batch of observations `(B, ...)` as a sequence of one step `(1, B, ...)`."""
    return jax.tree_util.tree_map(lambda x: x[None], observation)


def make_acting(apply: Callable, q_network: RecurrentQNetwork, system: DictConfig, total_timesteps: int
                ) -> off_policy.RecurrentActing:
    """ε-greedy per actor on the online network, each env's hidden state carried from step to step."""
    epsilon_at = epsilon_schedule(system.epsilon_start, system.epsilon_end, system.epsilon_decay_fraction,
                                  total_timesteps)
    exponent = float(system.epsilon_actor_exponent)

    def act(params: OnlineAndTarget, observation: Observation, reset: Array, memory: Hidden, key: jax.Array,
            global_env_steps: Array):
        noise_key, explore_key = jax.random.split(key)
        entered = reset_where(reset, memory)  # what a replayed sequence starting here starts from
        memory, q_values = apply(params.online, entered, _one_step(observation), reset[None], noise_key=noise_key)
        epsilons = per_actor_epsilons(epsilon_at(global_env_steps), reset.shape[0], exponent)
        action = epsilon_greedy(explore_key, q_values[0], observation.action_mask, epsilons)
        return action, action, entered, memory

    return off_policy.RecurrentActing(initial_memory=q_network.recurrent_core.initial_hidden, act=act)


def evaluation_policy(apply: Callable, q_network: RecurrentQNetwork, epsilon: float = 0.0) -> PolicyWithMemory:
    """The eval policy: greedy under the mean network, or ε-greedy at `system.evaluation_epsilon` > 0 (as the
    feed-forward systems' `value_based.evaluation_policy`); eval params are `(online params, obs_norm)`."""

    def act(eval_params: Tuple[Params, PyTree], observation: Observation, reset: Array, hidden: Hidden, key: jax.Array):
        q_params, obs_norm = eval_params
        hidden, q_values = apply(q_params, hidden, _one_step(normalization.normalize(obs_norm, observation)),
                                 reset[None])
        return evaluation_action(key, q_values[0], observation.action_mask, epsilon), hidden

    return PolicyWithMemory(initial_memory=q_network.recurrent_core.initial_hidden, act=act)


def sequence_resets(last: Array) -> Array:
    """`(L, B)` reset flags of a replayed sequence: step t opens an episode where step t − 1 ended one. The first
    step's stored hidden state already has its reset applied, so it is never reset again."""
    return jnp.concatenate([jnp.zeros_like(last[:1], bool), last[:-1].astype(bool)], axis=0)


def unroll_after_burn_in(network: Callable, start: Hidden, observation: Observation, reset: Array, burn_in: int
                         ) -> Tuple[Array, Hidden]:
    """Q-values `(L − burn_in, B, A)` of the steps after the burn-in and the hidden state after each of them.

    The first `burn_in` steps only warm the stored hidden state up: no gradient flows through them, so the loss
    trains the network on the steps it is applied to, from a state close to the one it acted from."""
    hidden = start
    if burn_in:
        head = jax.tree_util.tree_map(lambda x: x[:burn_in], observation)
        hidden, _ = network(hidden, head, reset[:burn_in])
        hidden = jax.lax.stop_gradient(hidden)
    rest = jax.tree_util.tree_map(lambda x: x[burn_in:], observation)
    _, (q_values, per_step_hidden) = network(hidden, rest, reset[burn_in:], emit_hidden=True)
    return q_values, per_step_hidden


def successor_q_values(network: Callable, per_step_hidden: Hidden, next_observation: Observation) -> Array:
    """Q `(T, B, A)` of each step's true successor, read from the hidden state after that step (never a reset: the
    successor belongs to the same episode, also at a time limit), in one pass over the T · B steps."""
    steps, batch = next_observation.step_count.shape[:2]
    hidden = jax.tree_util.tree_map(lambda h: h.reshape((-1,) + h.shape[2:]), per_step_hidden)
    flat = jax.tree_util.tree_map(lambda x: x.reshape((1, steps * batch) + x.shape[2:]), next_observation)
    _, q_values = network(hidden, flat, jnp.zeros((1, steps * batch), bool))
    return q_values.reshape((steps, batch) + q_values.shape[2:])


def sequence_q_loss(system: DictConfig) -> value_based.QLoss:
    """The QLoss of a batch of time-major sequences `(L, B, ...)`: per-sequence mean squared TD error after the
    burn-in (`[B]`), and its mixed priority."""
    burn_in, n_step, gamma = int(system.burn_in), int(system.n_step), float(system.gamma)
    max_weight = float(system.priority_max_weight)

    def q_loss(online: Callable, target: Callable, batch: Transition) -> Tuple[Array, Array, Dict[str, Array]]:
        start = jax.tree_util.tree_map(lambda x: x[0], batch.memory)
        reset = sequence_resets(batch.last)
        q_tm1, online_hidden = unroll_after_burn_in(online, start, batch.observation, reset, burn_in)
        _, target_hidden = unroll_after_burn_in(target, start, batch.observation, reset, burn_in)
        learnt = jax.tree_util.tree_map(lambda x: x[burn_in:], batch)
        # the online network only chooses the successor's action: no gradient through the choice
        q_t_selector = successor_q_values(online, jax.lax.stop_gradient(online_hidden), learnt.next_observation)
        q_t_value = successor_q_values(target, target_hidden, learnt.next_observation)
        td_errors = losses.rescaled_n_step_double_q_td_errors(
            q_tm1, learnt.action, learnt.reward, learnt.discount, learnt.last, q_t_value, q_t_selector,
            learnt.next_observation.action_mask, n_step, gamma)
        per_sequence = jnp.mean(losses.l2_loss(td_errors), axis=0)
        priorities = losses.sequence_priorities(td_errors, max_weight)
        return per_sequence, priorities, {"q_loss": jnp.mean(per_sequence), "mean_abs_td": jnp.mean(jnp.abs(td_errors))}

    return q_loss


def check_sequences(system: DictConfig, budget: Budget) -> None:
    """What the config checks also refuse (config_schema), repeated here for configs built in code."""
    length, burn_in = int(system.sequence_length), int(system.burn_in)
    if burn_in >= length:
        raise ConfigError(f"system.burn_in={burn_in} is not below system.sequence_length={length}: the loss is on "
                          f"the steps after the burn-in; lower system.burn_in or raise system.sequence_length.")
    if budget.rollout_length % length:
        raise ConfigError(f"system.sequence_length={length} does not divide system.rollout_length="
                          f"{budget.rollout_length}: each rollout is stored as whole sequences; choose a divisor.")


def learner_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget) -> SystemSetup:
    system = config.system
    value_based.check_discrete_q_network(env, config, EXAMPLE_NETWORKS)
    if "recurrent_core" not in config.network.q_network:
        raise ConfigError(f"r2d2 needs a recurrent q_network (with a recurrent_core); use network={EXAMPLE_NETWORKS}.")
    check_sequences(system, budget)
    q_network = build_recurrent_q_network(config.network, env.action_space)
    observation, reset = _one_step(example_observation(env)), np.ones((1, 1), bool)
    hidden = q_network.recurrent_core.initial_hidden(1, on_host=True)
    # shapes only: a distributional head's output is no array of Q-values
    (_, example_q_values), _ = jax.eval_shape(
        functools.partial(q_network.init_with_output, host_keys.seed_key(0)), hidden, observation, reset)
    if value_based.head_kind(example_q_values) != value_based.SCALAR:
        raise ConfigError(f"r2d2 needs a scalar Q head (stoix_like.networks.heads.q_head); use network="
                          f"{EXAMPLE_NETWORKS}.")

    init_key, key = host_keys.split(key)
    online = jitted_init(q_network)(init_key, hidden, observation, reset)
    apply = make_apply(q_network)
    optimizer = value_based.q_optimizer(system, budget)
    return off_policy.make_system_setup(
        env, key, config, budget,
        params=OnlineAndTarget(online, online), opt_states=optimizer.init(online),
        act=make_acting(apply, q_network, system, budget.total_timesteps),
        learn_from_batch=value_based.make_learn_from_batch(apply, optimizer.update, sequence_q_loss(system), system),
        batches=replay.sequence_batches(system, disjoint=True),
        eval_policy=evaluation_policy(apply, q_network, float(system.evaluation_epsilon)),
        eval_params=lambda slot: (slot.params.online, slot.obs_norm),
        prioritized=bool(system.prioritized_replay),
    )


def run_experiment(config: DictConfig) -> float:
    return experiment.run(config, learner_setup, algorithm=str(config.system.system_name))
