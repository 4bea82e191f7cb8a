"""Scalar-Q systems: DQN (Mnih et al., 2015) and the variants that change only its regression target or loss.

`system.td_target` picks the target: `q_learning` (DQN), `double_q_learning` (Double DQN; van Hasselt et al.,
2016) or `munchausen` (M-DQN; Vieillard et al., 2020). `system.regularization_weight > 0` adds w·Q(s, a) to the
loss of any of them (DQN-Reg; Co-Reyes et al., 2021). A dueling or noisy network is a network config
(`network=mlp_dqn_dueling`), not a system. Acting, evaluation, the gradient step and the replay machinery are
shared (stoix_like/systems/q_learning/value_based.py, off_policy.py); this file holds only what the scalar losses regress on.
"""

from __future__ import annotations

from typing import Callable, Dict

import jax
import jax.numpy as jnp
from omegaconf import DictConfig

from stoix_like.run import experiment
from stoix_like.learner.budget import Budget
from stoix_like.envs.environment import Environment
from stoix_like.errors import ConfigError
from stoix_like.ops import losses
from stoix_like.ops.indexing import taken_action_values
from stoix_like.learner.replay import Transition
from stoix_like.learner.system_contract import SystemSetup
from stoix_like.systems.q_learning import value_based


def _q_learning(q_tm1, online, target, batch: Transition, system) -> jax.Array:
    return losses.q_learning_td_error(q_tm1, batch.action, batch.reward, batch.discount,
                                      target(batch.next_observation), batch.next_observation.action_mask)


def _double_q_learning(q_tm1, online, target, batch: Transition, system) -> jax.Array:
    return losses.double_q_learning_td_error(q_tm1, batch.action, batch.reward, batch.discount,
                                             target(batch.next_observation), online(batch.next_observation),
                                             batch.next_observation.action_mask)


def _munchausen(q_tm1, online, target, batch: Transition, system) -> jax.Array:
    # the bonus needs the target network's policy at s_tm1 as well as at s_t
    munchausen_target = losses.munchausen_q_target(
        target(batch.next_observation), target(batch.observation), batch.action, batch.reward, batch.discount,
        entropy_temperature=float(system.entropy_temperature),
        munchausen_coefficient=float(system.munchausen_coefficient),
        clip_value_min=float(system.munchausen_clip_value_min),
        action_mask_t=batch.next_observation.action_mask, action_mask_tm1=batch.observation.action_mask)
    return munchausen_target - taken_action_values(q_tm1, batch.action)


# td_target name -> fn(q_tm1, online, target, batch, system_config) -> td errors [B]; q_tm1 = online(obs_tm1)
TD_ERRORS: Dict[str, Callable] = {
    "q_learning": _q_learning,
    "double_q_learning": _double_q_learning,
    "munchausen": _munchausen,
}
# the keys a target reads beyond config/system/dqn.yaml, and the system config that sets them
EXTRA_KEYS = {"munchausen": (("entropy_temperature", "munchausen_coefficient", "munchausen_clip_value_min"), "mdqn")}


def scalar_q_loss(system: DictConfig) -> value_based.QLoss:
    """TD loss (squared, or Huber when `huber_delta` > 0) on the chosen target, plus w·Q(s, a) when
    `regularization_weight` > 0."""
    td_error_fn = TD_ERRORS[system.td_target]
    huber_delta = float(system.huber_delta)
    regularization_weight = float(system.regularization_weight)

    def q_loss(online, target, batch: Transition):
        q_tm1 = online(batch.observation)
        td = td_error_fn(q_tm1, online, target, batch, system)
        per_example = losses.huber_loss(td, huber_delta) if huber_delta > 0 else losses.l2_loss(td)
        metrics = {"q_loss": jnp.mean(per_example)}
        if regularization_weight:
            q_taken = taken_action_values(q_tm1, batch.action)
            per_example = per_example + regularization_weight * q_taken
            metrics["q_taken"] = jnp.mean(q_taken)
        return per_example, jnp.abs(td), metrics

    return q_loss


def learner_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget) -> SystemSetup:
    system = config.system
    if system.td_target not in TD_ERRORS:
        raise ConfigError(f"system.td_target={system.td_target!r} is unknown; choose one of {sorted(TD_ERRORS)}.")
    keys, system_config = EXTRA_KEYS.get(system.td_target, ((), None))
    missing = [name for name in keys if name not in system]
    if missing:
        raise ConfigError(f"system.td_target={system.td_target} needs system.{', system.'.join(missing)}; "
                          f"use system={system_config} (python -m experiments.{system_config}).")
    return value_based.make_system_setup(env, key, config, budget, q_loss=scalar_q_loss(system),
                                     needs_head=value_based.SCALAR, example_networks="mlp_dqn or mlp_dqn_dueling")


def run_experiment(config: DictConfig) -> float:
    return experiment.run(config, learner_setup, algorithm=str(config.system.system_name))
