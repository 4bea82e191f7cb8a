"""D4PG (Barth-Maron et al., 2018): a deterministic actor on a categorical (distributional) critic with
n-step returns (`system.n_step`, collapsed by the replay) and optional prioritized replay.

The actor, acting noise and targets are in deterministic_policy_gradient.py; this file holds only the
distributional critic's loss and the value the actor ascends (the critic's mean).
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
from omegaconf import DictConfig

from stoix_like.run import experiment
from stoix_like.learner.budget import Budget
from stoix_like.envs.environment import Environment
from stoix_like.ops import losses
from stoix_like.learner.replay import Transition
from stoix_like.systems.actor_critic import deterministic_policy_gradient as dpg
from stoix_like.learner.system_contract import SystemSetup
from stoix_like.systems.off_policy import LearnFromBatch
from stoix_like.types import ActorCriticUpdateFns


def expected_value(logits: jax.Array, atoms: jax.Array) -> jax.Array:
    """The mean of a categorical value distribution: logits `[B, N]`, atoms `[N]` -> `[B]`."""
    return jnp.sum(jax.nn.softmax(logits, axis=-1) * atoms, axis=-1)


def make_learn_from_batch(actor_apply: Callable, critic_apply: Callable, update_fns: ActorCriticUpdateFns,
                         config: DictConfig) -> LearnFromBatch:
    # critic_apply is an ensemble of one critic: it returns (logits [1, B, N], atoms [1, N])

    def critic_loss(critic_params, target_critic_params, batch: Transition, next_action, weights):
        next_logits, atoms = critic_apply(target_critic_params, batch.next_observation, next_action)
        logits, _ = critic_apply(critic_params, batch.observation, batch.action)
        cross_entropy = losses.categorical_td_learning_loss(
            logits[0], atoms[0], batch.reward, batch.discount, next_logits[0])
        metrics = {"critic_loss": jnp.mean(cross_entropy), "q_value": jnp.mean(expected_value(logits[0], atoms[0]))}
        return jnp.mean(weights * cross_entropy), (cross_entropy, metrics)

    def policy_value(critic_params, observation, action) -> jax.Array:
        logits, atoms = critic_apply(critic_params, observation, action)
        return expected_value(logits[0], atoms[0])

    return dpg.make_learn_from_batch(actor_apply, critic_loss, policy_value, update_fns, config.system)


def learner_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget) -> SystemSetup:
    return dpg.make_system_setup(env, key, config, budget, make_learn_from_batch=make_learn_from_batch, num_critics=1,
                             algorithm="D4PG")


def run_experiment(config: DictConfig) -> float:
    return experiment.run(config, learner_setup, algorithm=str(config.system.system_name))
