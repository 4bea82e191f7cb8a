"""PQN (Gallici et al., 2024, "Simplifying Deep Temporal Difference Learning"): Q(λ) without a replay buffer.

Many parallel envs replace the buffer and LayerNorm in the Q-network replaces the target network, so PQN is an
on-policy loop like PPO's: an ε-greedy rollout → Q(λ) targets from the rollout's own Q-values → epochs ×
minibatches of regression onto those targets. Action masks are honoured when acting and in the target's max.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from omegaconf import DictConfig

from stoix_like.run import experiment
from stoix_like.runtime import host_keys, parallel
from stoix_like.learner import hyperparams, normalization
from stoix_like.runtime.compilation_cache import jitted_init
from stoix_like.learner.budget import Budget
from stoix_like.envs.environment import Environment, example_observation
from stoix_like.envs.wrappers import VmapWrapper
from stoix_like.learner.exploration import epsilon_greedy, epsilon_schedule
from stoix_like.networks.factory import build_q_network
from stoix_like.ops.indexing import taken_action_values
from stoix_like.ops.losses import l2_loss
from stoix_like.ops.masking import masked_max
from stoix_like.ops.returns import lambda_returns
from stoix_like.learner.optim import make_optimizer
from stoix_like.learner.system_contract import Learner, LearnerOutput, SystemSetup
from stoix_like.systems.on_policy import rollout
from stoix_like.systems.q_learning.value_based import evaluation_policy
from stoix_like.types import Array, EnvState, Observation, OptState, Params, PRNGKey, PyTree, RolloutStep, TimeStep


class PQNLearnerState(NamedTuple):
    """An on-policy learner state that also counts its updates, which drive PQN's epsilon schedule."""

    params: Params  # the Q-network's
    opt_states: OptState
    key: PRNGKey
    env_state: EnvState
    timestep: TimeStep
    obs_norm: PyTree  # normalization.RunningStatistics, or () when system.normalize_observations is off
    update_count: Array  # updates (rollout + learning) done so far


def get_learner_fn(env: VmapWrapper, q_apply: Callable, q_update: Callable, config: DictConfig, budget: Budget) -> Learner:
    system = config.system

    def epsilon_at(update_count: jax.Array) -> jax.Array:
        # measured in updates: with no warm-up, a fraction of the updates is the same fraction of the env-step
        # budget. Built while the learner is traced, so that a sweep's members each decay their own ε.
        return epsilon_schedule(hyperparams.value(system, "epsilon_start"), hyperparams.value(system, "epsilon_end"),
                                system.epsilon_decay_fraction, budget.num_updates)(update_count)

    def collect_trajectory(state: PQNLearnerState) -> Tuple[PQNLearnerState, RolloutStep, jax.Array]:
        epsilon = epsilon_at(state.update_count)  # one ε per rollout

        def act(q_params, observation: Observation, key: jax.Array):
            action = epsilon_greedy(key, q_apply(q_params, observation), observation.action_mask, epsilon)
            return action, action, ()

        state, traj = rollout.collect_rollout(env, act, state, system.rollout_length, config.arch.rollout_unroll)
        return state._replace(update_count=state.update_count + 1), traj, epsilon

    def q_lambda_targets(q_params, obs_norm, traj: RolloutStep) -> jax.Array:
        # Q of every step's true successor in one (T × envs) batched pass, under the params that acted
        next_q_values = q_apply(q_params, normalization.normalize(obs_norm, traj.next_observation))
        bootstrap_values = masked_max(next_q_values, traj.next_observation.action_mask)
        return lambda_returns(
            rewards=hyperparams.value(system, "reward_scale") * traj.reward,
            # 0 only on termination: truncations still bootstrap
            discounts=hyperparams.value(system, "gamma") * traj.discount,
            next_values=bootstrap_values,
            continuations=1.0 - traj.done.astype(traj.reward.dtype),  # the λ-recursion stops at any episode end
            lam=hyperparams.value(system, "q_lambda"),
        )

    def q_loss(q_params, obs_norm, observation: Observation, action: jax.Array, target: jax.Array):
        q_values = q_apply(q_params, normalization.normalize(obs_norm, observation))
        taken_q = taken_action_values(q_values, action)
        loss = jnp.mean(l2_loss(taken_q - target))
        return loss, {"q_loss": loss, "mean_q": jnp.mean(taken_q)}

    def update_minibatch(carry, minibatch, key: jax.Array):
        del key  # regression onto fixed targets needs no randomness
        q_params, opt_state, obs_norm = carry
        grads, metrics = jax.grad(q_loss, has_aux=True)(q_params, obs_norm, *minibatch)
        grads, metrics = parallel.pmean_batch_then_device((grads, metrics))
        updates, opt_state = q_update(grads, opt_state, q_params)
        return (optax.apply_updates(q_params, updates), opt_state, obs_norm), metrics

    def update_step(state: PQNLearnerState) -> Tuple[PQNLearnerState, LearnerOutput]:
        state, traj, epsilon = collect_trajectory(state)
        targets = q_lambda_targets(state.params, state.obs_norm, traj)
        state, train_metrics = rollout.learn_from_rollout(
            update_minibatch, state, (traj.observation, traj.action, targets), traj.observation, system)
        return state, LearnerOutput(episode_metrics=traj.episode_metrics,
                                    train_metrics={**train_metrics, "epsilon": epsilon})

    return parallel.scan_updates(update_step, budget.updates_per_evaluation)


def learner_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget) -> SystemSetup:
    system = config.system
    rollout.check_minibatches(system, budget)
    q_network = build_q_network(config.network, env.action_space)
    batched_env = VmapWrapper(env)

    key, q_key, env_key, step_key = host_keys.split(key, 4)
    q_params = jitted_init(q_network)(q_key, example_observation(env))

    optimizer = make_optimizer(hyperparams.learning_rate(system, "q_lr"), system.max_grad_norm,
                               rollout.optimizer_steps(system, budget), system.decay_learning_rates)
    # the counter in numpy: an eager jnp op would compile a program of its own
    learner_state = rollout.initial_learner_state(
        PQNLearnerState, env, env_key, step_key, system, budget,
        params=q_params, opt_states=optimizer.init(q_params), update_count=np.zeros((), np.int32))
    return SystemSetup(
        learner_fn=get_learner_fn(batched_env, q_network.apply, optimizer.update, config, budget),
        learner_state=learner_state,
        eval_policy=evaluation_policy(q_network.apply, float(system.evaluation_epsilon)),
        eval_params=lambda slot: (slot.params, slot.obs_norm),
    )


def run_experiment(config: DictConfig) -> float:
    return experiment.run(config, learner_setup, algorithm=str(config.system.system_name))
