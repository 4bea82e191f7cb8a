"""IMPALA (Espeholt et al., 2018): an actor-critic whose actors act with params that lag the learner's, the gap
corrected by V-trace, for discrete and continuous actions.

Under arch=sebulba the actor threads record each action's log-probability under the params they acted with (μ);
the learner, as its update starts, reads the same actions under its current policy π and critic, and V-trace
(ops/returns.vtrace, ρ̄ = `rho_clip`, c̄ = `c_clip`, λ = `gae_lambda`) turns the rollout into value targets v_s and
policy-gradient advantages ρ_s (r_s + γ v_{s+1} − V(s)). The actor follows −A · log π(a|s) plus the entropy bonus;
the critic regresses onto v_s. Everything else (rollout, minibatches, optimisers, Sebulba's threads) is the shared
actor-critic loop of `policy_gradient.py`. Under arch=anakin the rollout is on-policy (ρ = 1), so V-trace's targets
are TD(λ) returns: the same learner, with nothing to correct.

A shared torso is a network, not a system: `network=mlp_impala_shared`.
"""

from __future__ import annotations

from typing import Tuple

import jax
from omegaconf import DictConfig

from stoix_like.run import experiment
from stoix_like.learner import normalization
from stoix_like.learner.budget import Budget
from stoix_like.envs.cpu_vector_env import CpuVectorEnv
from stoix_like.envs.environment import Environment
from stoix_like.networks.actor_critic import PolicyAndValue
from stoix_like.ops.losses import policy_gradient_loss
from stoix_like.ops.returns import vtrace
from stoix_like.learner.system_contract import SebulbaSetup, SystemSetup
from stoix_like.systems.on_policy import policy_gradient
from stoix_like.systems.on_policy.policy_gradient import ActorObjective, PolicyLossInputs, RolloutTargets
from stoix_like.types import ActorCriticParams, ActorCriticTransition, Array, PyTree


def vtrace_targets(system: DictConfig) -> RolloutTargets:
    """(V-trace policy-gradient advantages, V-trace value targets), `(T, envs)` each, under the learner's params."""

    def targets(networks: PolicyAndValue, params: ActorCriticParams, obs_norm: PyTree, traj: ActorCriticTransition
                ) -> Tuple[Array, Array]:
        observation = normalization.normalize(obs_norm, traj.observation)
        log_rhos = networks.policy(params, observation).log_prob(traj.action) - traj.log_prob
        # V(s) under the learner's critic, not the one the actors recorded: V-trace corrects toward π's value
        values = networks.value(params, observation)
        value_targets, advantages = vtrace(
            traj.reward, values, traj.next_value, traj.done, traj.truncated, log_rhos, system.gamma,
            clip_rho_threshold=system.rho_clip, clip_c_threshold=system.c_clip,
            clip_pg_rho_threshold=system.rho_clip, lam=system.gae_lambda)
        return advantages, value_targets

    return targets


def vtrace_objective(system: DictConfig) -> ActorObjective:
    """−mean(A_vtrace · log π(a|s)): the importance weights are already inside the advantages."""

    def policy_loss(inputs: PolicyLossInputs, objective_state: tuple) -> jax.Array:
        del objective_state
        return policy_gradient_loss(inputs.log_prob, inputs.advantages)

    return ActorObjective(policy_loss, targets=vtrace_targets(system))


def learner_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget) -> SystemSetup:
    return policy_gradient.make_system_setup(env, key, config, budget, vtrace_objective(config.system),
                                  policy_gradient.regression_critic)


def sebulba_setup(envs: CpuVectorEnv, key: jax.Array, config: DictConfig, budget: Budget, n_learner_devices: int
                  ) -> SebulbaSetup:
    """The learner fed by Sebulba's actor threads (arch=sebulba), where the policy lag V-trace corrects is real."""
    return policy_gradient.make_sebulba_setup(envs, key, config, budget, n_learner_devices,
                                          vtrace_objective(config.system), policy_gradient.regression_critic)


def run_experiment(config: DictConfig) -> float:
    return experiment.run(config, learner_setup, algorithm=str(config.system.system_name), sebulba_setup=sebulba_setup)
