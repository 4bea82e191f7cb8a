"""REINFORCE with a learned baseline (Williams, 1992), for discrete and continuous actions.

The likelihood-ratio policy gradient on the shared actor-critic loop (`policy_gradient.py`), with its defaults a
true on-policy gradient: one epoch of one minibatch per rollout. Advantages are GAE with `gae_lambda` 1 by default:
the Monte-Carlo return minus the baseline V(s), cut at every episode end and bootstrapped only where the return
is unfinished (a time-limit truncation, the rollout's last step). The baseline is a plain regression onto those
returns.
"""

from __future__ import annotations

import jax
from omegaconf import DictConfig

from stoix_like.run import experiment
from stoix_like.learner.budget import Budget
from stoix_like.envs.environment import Environment
from stoix_like.ops.losses import policy_gradient_loss
from stoix_like.learner.system_contract import SystemSetup
from stoix_like.systems.on_policy import policy_gradient
from stoix_like.systems.on_policy.policy_gradient import ActorObjective, PolicyLossInputs


def likelihood_ratio_objective() -> ActorObjective:
    """-mean(A · log π(a|s)): the behaviour's log-probabilities are not needed, the data being on-policy."""

    def policy_loss(inputs: PolicyLossInputs, objective_state: tuple) -> jax.Array:
        del objective_state
        return policy_gradient_loss(inputs.log_prob, inputs.advantages)

    return ActorObjective(policy_loss)


def learner_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget) -> SystemSetup:
    return policy_gradient.make_system_setup(env, key, config, budget, likelihood_ratio_objective(),
                                  policy_gradient.regression_critic)


def run_experiment(config: DictConfig) -> float:
    return experiment.run(config, learner_setup, algorithm=str(config.system.system_name))
