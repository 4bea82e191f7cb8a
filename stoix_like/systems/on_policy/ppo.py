"""PPO (Schulman et al., 2017) with truncation-correct GAE, for discrete and continuous actions.

The clipped surrogate objective and PPO's clipped value loss on the shared actor-critic loop
(`policy_gradient.py`); the policy head follows the env's action space (categorical or tanh-Gaussian).
"""

from __future__ import annotations

import jax
from omegaconf import DictConfig

from stoix_like.learner import hyperparams
from stoix_like.run import experiment
from stoix_like.learner.budget import Budget
from stoix_like.envs.cpu_vector_env import CpuVectorEnv
from stoix_like.envs.environment import Environment
from stoix_like.ops.losses import ppo_clip_loss
from stoix_like.learner.system_contract import SebulbaSetup, SystemSetup
from stoix_like.systems.on_policy import policy_gradient
from stoix_like.systems.on_policy.policy_gradient import ActorObjective, PolicyLossInputs


def clipped_objective(system: DictConfig) -> ActorObjective:
    """The ratio π/π_old gains nothing beyond [1 - clip_eps, 1 + clip_eps] in the advantage's direction."""

    def policy_loss(inputs: PolicyLossInputs, objective_state: tuple) -> jax.Array:
        del objective_state
        return ppo_clip_loss(inputs.log_prob, inputs.behaviour_log_prob, inputs.advantages,
                             hyperparams.value(system, "clip_eps"))

    return ActorObjective(policy_loss)


def learner_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget) -> SystemSetup:
    return policy_gradient.make_system_setup(env, key, config, budget, clipped_objective(config.system),
                                  policy_gradient.ppo_critic(config.system))


def sebulba_setup(envs: CpuVectorEnv, key: jax.Array, config: DictConfig, budget: Budget, n_learner_devices: int
                  ) -> SebulbaSetup:
    """The same PPO update, fed by Sebulba's actor threads (arch=sebulba)."""
    return policy_gradient.make_sebulba_setup(envs, key, config, budget, n_learner_devices,
                                          clipped_objective(config.system),
                                          policy_gradient.ppo_critic(config.system))


def run_experiment(config: DictConfig) -> float:
    return experiment.run(config, learner_setup, algorithm=str(config.system.system_name), sebulba_setup=sebulba_setup)
