"""TD3 (Fujimoto et al., 2018): clipped double Q, target-policy smoothing and delayed actor updates.

With `num_critics=1`, `policy_frequency=1` and `target_policy_noise=0` the same learner is DDPG
(Lillicrap et al., 2016): config/system/ddpg.yaml, which the registry (stoix_like.systems.MODULE_OF) trains with this
module. The actor, acting noise, delays and targets are in deterministic_policy_gradient.py; this file holds only
the scalar critics' loss.
"""

from __future__ import annotations

from typing import Callable

import jax
from omegaconf import DictConfig

from stoix_like.run import experiment
from stoix_like.learner.budget import Budget
from stoix_like.envs.environment import Environment
from stoix_like.ops import losses
from stoix_like.learner.replay import Transition
from stoix_like.systems.actor_critic import continuous_control
from stoix_like.systems.actor_critic import deterministic_policy_gradient as dpg
from stoix_like.learner.system_contract import SystemSetup
from stoix_like.systems.off_policy import LearnFromBatch
from stoix_like.types import ActorCriticUpdateFns


def critic_target(critic_apply: Callable, target_critic_params, batch: Transition, next_action: jax.Array) -> jax.Array:
    """r + discount · min over target critics of Q(next_obs, next_action); `[B]`."""
    next_q = critic_apply(target_critic_params, batch.next_observation, next_action)
    return losses.clipped_double_q_target(batch.reward, batch.discount, next_q)


def make_learn_from_batch(actor_apply: Callable, critic_apply: Callable, update_fns: ActorCriticUpdateFns,
                         config: DictConfig) -> LearnFromBatch:
    def critic_loss(critic_params, target_critic_params, batch: Transition, next_action, weights):
        target = critic_target(critic_apply, target_critic_params, batch, next_action)
        return continuous_control.critic_regression_loss(critic_params, critic_apply, batch, target, weights)

    def policy_value(critic_params, observation, action) -> jax.Array:
        return critic_apply(critic_params, observation, action)[0]  # the actor follows the first critic

    return dpg.make_learn_from_batch(actor_apply, critic_loss, policy_value, update_fns, config.system)


def learner_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget) -> SystemSetup:
    return dpg.make_system_setup(env, key, config, budget, make_learn_from_batch=make_learn_from_batch,
                             num_critics=int(config.system.num_critics),
                             algorithm=str(config.system.system_name).upper())


def run_experiment(config: DictConfig) -> float:
    return experiment.run(config, learner_setup, algorithm=str(config.system.system_name))
