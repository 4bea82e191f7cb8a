"""PPO-penalty (Schulman et al., 2017, section 4): an adaptive KL penalty in place of clipping the ratio.

PPO's loop and critic; the actor maximises π/π_old · A − β · KL(π_old ‖ π), the KL exact from the acting
distribution's recorded parameters. After each update the KL the update actually made, d, is measured over the
rollout's states and β adapts: halved when d < kl_target / 1.5, doubled when d > 1.5 · kl_target. β lives in the
learner state (`PPOPenaltyLearnerState.kl_coef`), so a resumed run continues with the β it had.
"""

from __future__ import annotations

from typing import NamedTuple, Tuple

import jax
import jax.numpy as jnp
from omegaconf import DictConfig

from stoix_like.run import experiment
from stoix_like.learner.budget import Budget
from stoix_like.envs.environment import Environment
from stoix_like.ops.losses import adapt_kl_coef, ppo_penalty_loss
from stoix_like.learner.system_contract import SystemSetup
from stoix_like.systems.on_policy import policy_gradient
from stoix_like.systems.on_policy.policy_gradient import ActorObjective, PolicyLossInputs
from stoix_like.types import ActorCriticOptStates, ActorCriticParams, Array, EnvState, Metrics, PRNGKey, PyTree, TimeStep


class PPOPenaltyLearnerState(NamedTuple):
    """PPO-penalty's learner state: an on-policy state that also carries the KL penalty's weight β, which adapts
    after every update (and so must survive a checkpoint)."""

    params: ActorCriticParams
    opt_states: ActorCriticOptStates
    key: PRNGKey
    env_state: EnvState
    timestep: TimeStep
    obs_norm: PyTree  # normalization.RunningStatistics, or () when system.normalize_observations is off
    kl_coef: Array  # β, the same in every (device, batch) slot: it adapts to the KL averaged over all of them


def kl_penalty_objective(system: DictConfig) -> ActorObjective:
    def policy_loss(inputs: PolicyLossInputs, kl_coef: jax.Array) -> jax.Array:
        return ppo_penalty_loss(inputs.log_prob, inputs.behaviour_log_prob, inputs.advantages, inputs.kl, kl_coef)

    def adapt(state: PPOPenaltyLearnerState, measured_kl: jax.Array) -> Tuple[PPOPenaltyLearnerState, Metrics]:
        kl_coef = adapt_kl_coef(state.kl_coef, measured_kl, system.kl_target)
        # β as it stands for the next update, and the KL this update made (what β adapted to)
        return state._replace(kl_coef=kl_coef), {"kl_coef": kl_coef, "kl_after_update": measured_kl}

    return ActorObjective(policy_loss, state_of=lambda state: state.kl_coef, adapt=adapt)


def learner_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget) -> SystemSetup:
    system = config.system
    return policy_gradient.make_system_setup(env, key, config, budget, kl_penalty_objective(system),
                                  policy_gradient.ppo_critic(system), state_type=PPOPenaltyLearnerState,
                                  kl_coef=jnp.asarray(system.init_kl_coef, jnp.float32))


def run_experiment(config: DictConfig) -> float:
    return experiment.run(config, learner_setup, algorithm=str(config.system.system_name))
