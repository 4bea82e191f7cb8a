"""Distributional Q-learning: C51 (Bellemare et al., 2017) and QR-DQN (Dabney et al., 2018).

`system.distribution` picks how the return distribution is represented and regressed: `categorical` (fixed
atoms, cross-entropy to the projected target) or `quantile` (learnt quantiles, quantile Huber loss). The next
action is greedy in expected Q-values, picked by the target network (`td_target: q_learning`) or the online
one (`double_q_learning`). Rainbow is this system with a noisy dueling categorical network, prioritized replay
and n-step returns (config/rainbow.yaml). Everything else is shared (q_learning/value_based.py, systems/off_policy.py).
"""

from __future__ import annotations

from typing import Callable, Dict, NamedTuple

import jax
import jax.numpy as jnp
from omegaconf import DictConfig

from stoix_like.run import experiment
from stoix_like.learner.budget import Budget
from stoix_like.envs.environment import Environment
from stoix_like.errors import ConfigError
from stoix_like.ops import losses
from stoix_like.learner.replay import Transition
from stoix_like.learner.system_contract import SystemSetup
from stoix_like.systems.q_learning import value_based

# how the next action is chosen: fn(online, target, batch, target_output_t) -> Q-values [B, A]
NEXT_ACTION_SELECTORS: Dict[str, Callable] = {
    "q_learning": lambda online, target, batch, target_t: target_t.q_values,
    "double_q_learning": lambda online, target, batch, target_t: online(batch.next_observation).q_values,
}


def _categorical_loss(system: DictConfig, select_next_action: Callable) -> value_based.QLoss:
    def q_loss(online, target, batch: Transition):
        online_tm1, target_t = online(batch.observation), target(batch.next_observation)
        per_example = losses.categorical_q_learning_loss(
            online_tm1.logits, online_tm1.atoms, batch.action, batch.reward, batch.discount, target_t.logits,
            select_next_action(online, target, batch, target_t), batch.next_observation.action_mask)
        # the cross-entropy to the projected target is also the priority (Dopamine's Rainbow; the paper's KL
        # differs from it by the target's entropy)
        return per_example, per_example, {"q_loss": jnp.mean(per_example)}

    return q_loss


def _quantile_loss(system: DictConfig, select_next_action: Callable) -> value_based.QLoss:
    huber_delta = float(system.huber_delta)  # 0: plain quantile regression

    def q_loss(online, target, batch: Transition):
        online_tm1, target_t = online(batch.observation), target(batch.next_observation)
        num_quantiles = online_tm1.quantiles.shape[-1]
        taus = (jnp.arange(num_quantiles, dtype=jnp.float32) + 0.5) / num_quantiles
        per_example = losses.quantile_q_learning_loss(
            online_tm1.quantiles, taus, batch.action, batch.reward, batch.discount, target_t.quantiles,
            select_next_action(online, target, batch, target_t), batch.next_observation.action_mask, huber_delta)
        return per_example, per_example, {"q_loss": jnp.mean(per_example)}

    return q_loss


class Distribution(NamedTuple):
    make_loss: Callable[[DictConfig, Callable], value_based.QLoss]
    head: str  # the head kind the loss reads (value_based.HEAD_KINDS)
    example_networks: str


DISTRIBUTIONS: Dict[str, Distribution] = {
    "categorical": Distribution(_categorical_loss, "categorical", "mlp_c51 or mlp_rainbow"),
    "quantile": Distribution(_quantile_loss, "quantile", "mlp_qr_dqn"),
}


def learner_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget) -> SystemSetup:
    system = config.system
    if system.distribution not in DISTRIBUTIONS:
        raise ConfigError(f"system.distribution={system.distribution!r} is unknown; "
                          f"choose one of {sorted(DISTRIBUTIONS)}.")
    if system.td_target not in NEXT_ACTION_SELECTORS:
        raise ConfigError(f"system.td_target={system.td_target!r} is not available to distributional systems; "
                          f"choose one of {sorted(NEXT_ACTION_SELECTORS)}.")
    distribution = DISTRIBUTIONS[system.distribution]
    q_loss = distribution.make_loss(system, NEXT_ACTION_SELECTORS[system.td_target])
    return value_based.make_system_setup(env, key, config, budget, q_loss=q_loss, needs_head=distribution.head,
                                     example_networks=distribution.example_networks)


def run_experiment(config: DictConfig) -> float:
    return experiment.run(config, learner_setup, algorithm=str(config.system.system_name))
