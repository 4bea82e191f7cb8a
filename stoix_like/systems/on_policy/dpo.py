"""DPO, Discovered Policy Optimisation (Lu et al., 2022), for discrete and continuous actions.

PPO's loop and critic with the drift function the paper distilled from a meta-learnt one in place of clipping the
ratio: the surrogate π/π_old · A minus a penalty that stays near zero for small moves of the ratio in the
advantage's direction and grows linearly for large ones (`ops.losses.dpo_loss`; scales `drift_alpha`,
`drift_beta`).
"""

from __future__ import annotations

import jax
from omegaconf import DictConfig

from stoix_like.run import experiment
from stoix_like.learner.budget import Budget
from stoix_like.envs.environment import Environment
from stoix_like.ops.losses import dpo_loss
from stoix_like.learner.system_contract import SystemSetup
from stoix_like.systems.on_policy import policy_gradient
from stoix_like.systems.on_policy.policy_gradient import ActorObjective, PolicyLossInputs


def drift_objective(system: DictConfig) -> ActorObjective:
    def policy_loss(inputs: PolicyLossInputs, objective_state: tuple) -> jax.Array:
        del objective_state
        return dpo_loss(inputs.log_prob, inputs.behaviour_log_prob, inputs.advantages, system.drift_alpha,
                        system.drift_beta)

    return ActorObjective(policy_loss)


def learner_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget) -> SystemSetup:
    return policy_gradient.make_system_setup(env, key, config, budget, drift_objective(config.system),
                                  policy_gradient.ppo_critic(config.system))


def run_experiment(config: DictConfig) -> float:
    return experiment.run(config, learner_setup, algorithm=str(config.system.system_name))
