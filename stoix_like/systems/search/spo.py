"""SPO, Sequential Monte Carlo Policy Optimisation (Macfarlane et al., 2024): AlphaZero's learner (alphazero.py)
planning with a particle filter instead of a tree, for discrete and continuous actions alike.

The plan at each env step, from each env's current state (the model is the env itself, as in AlphaZero's search:
a JAX env state is a model state):
  1. N particles start at the root; each draws its first action from the policy, a_0^i ~ π(·|s).
  2. For `system.search_depth` steps every particle steps its own env copy with its action and reweights by its TD
     error, log w_i += (r + γ·d·V(s') − V(s)) / η (η = `system.advantage_temperature`, AWR's name for the same
     idea), then draws its next action from the policy at s'. Where a particle's episode ends, s' is the true
     successor (`mcts.successor_observation`): a truncation bootstraps γ·V of it, a termination's zero discount
     drops it, and the particle is dead from then on (its weight no longer moves, its auto-reset env is ignored).
  3. Every `system.resample_period` steps (never after the last) the particles are resampled systematically
     (ops/smc.py) and their weights reset: a resampled particle keeps its ancestor's first action, so the
     population concentrates on first actions whose futures look best.
  4. The root's action distribution is the particles' first actions under their final weights, {(a_0^i, w_i)}:
     the env is stepped with one of them drawn by weight (exploration comes from the policy's own draws).
The policy is fitted to that distribution by weighted maximum likelihood, −Σ_i w_i log π(a_0^i|s), the E-step
target of an EM policy iteration (`sampled_actions.fit_to_weighted_draws`, a small entropy bonus beside it); the
value network regresses onto truncation-correct TD(λ) returns of the critic's own values (GAE-style, as the paper's
Stoix implementation; the SMC's return estimate is logged, not learnt from, as it is optimistic by construction).

Choices, and what the paper has that this leaves out: the temperature η is a fixed hyperparameter (the paper learns
it by MPO's temperature dual) and the policy update has no KL trust region (the paper's M-step has MPO's); the
continuous policy's scale is floored as Sampled AlphaZero's (network min_scale), for the same reason. Logged per
plan: the final weights' effective sample size (ops.smc), their entropy, the share of particles still alive, and
the SMC return estimate minus the network's root value.

Bad budgets (particles, depth, resample period < 1, temperature ≤ 0) are refused by the schema before compiling.
"""

from __future__ import annotations

from typing import Dict, NamedTuple, Tuple, TypeVar

import jax
import jax.numpy as jnp
from omegaconf import DictConfig

from stoix_like.run import experiment
from stoix_like.learner.budget import Budget
from stoix_like.envs.environment import Environment
from stoix_like.envs.wrappers import VmapWrapper
from stoix_like.networks.actor_critic import PolicyAndValue
from stoix_like.ops import smc
from stoix_like.learner.system_contract import SystemSetup
from stoix_like.systems.search import alphazero, mcts
from stoix_like.systems.search.sampled_actions import fit_to_weighted_draws
from stoix_like.types import Array, EnvState, Observation, PyTree, TimeStep

# the keys of each plan's statistics, logged as their means
SMC_STATISTICS = ("effective_sample_size", "particle_weight_entropy", "particles_alive",
                  "smc_value_minus_network_value")

T = TypeVar("T")


class Particles(NamedTuple):
    """N particles of one plan, every leaf `[N, ...]`."""

    env_state: EnvState  # each particle's env copy
    observation: Observation  # where the particle acts from next (where its episode ended: the true successor)
    value: Array  # V(observation), the TD error's baseline at the next step
    first_action: Array  # the action it took at the root (pre-tanh when continuous); a resampled one its ancestor's
    log_weight: Array
    alive: Array  # bool: its episode has not ended within the plan
    discounted_return: Array  # Σ_t γ^t r_t so far (and a truncation's bootstrap), for the SMC value estimate
    discount: Array  # γ^t while alive; 0 once ended


def _broadcast(tree: T, num_particles: int) -> T:
    return jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (num_particles,) + x.shape), tree)


def smc_planner(env: Environment, networks: PolicyAndValue, system: DictConfig) -> alphazero.Plan:
    """The SMC plan (module docstring) for a batch of roots `[B]`, one particle filter of `system.num_particles`
    each, `system.search_depth` steps deep."""
    num_particles, depth = int(system.num_particles), int(system.search_depth)
    resample_period = int(system.resample_period)
    temperature, gamma = float(system.advantage_temperature), float(system.gamma)
    particle_env = VmapWrapper(env)

    def advance(search_params: PyTree, particles: Particles, policy: mcts.Policy, action: Array) -> Particles:
        """Every particle takes `action` (its draw from `policy`, the policy at its observation) and reweights."""
        env_state, timestep = particle_env.step(particles.env_state, policy.to_env_action(action))
        ended = timestep.last()
        observation = mcts.successor_observation(timestep)
        value = networks.value(search_params, observation)
        discount = gamma * timestep.discount  # 0 on termination: a terminal state's value is 0
        td_error = timestep.reward + discount * value - particles.value
        alive = particles.alive
        step_return = timestep.reward + jnp.where(ended, discount * value, 0.0)  # a truncation's bootstrap
        return Particles(
            env_state=env_state, observation=observation, value=value, first_action=particles.first_action,
            log_weight=particles.log_weight + jnp.where(alive, td_error / temperature, 0.0),
            alive=alive & ~ended,
            discounted_return=particles.discounted_return + jnp.where(alive, particles.discount * step_return, 0.0),
            discount=jnp.where(alive & ~ended, particles.discount * discount, 0.0))

    def resample_if_due(particles: Particles, step: Array, key: jax.Array) -> Particles:
        """Systematic resampling after every `resample_period`-th step but the last; weights reset to uniform."""
        ancestors = smc.systematic_resample(key, particles.log_weight)
        resampled = jax.tree_util.tree_map(lambda leaf: leaf[ancestors], particles)
        resampled = resampled._replace(log_weight=jnp.zeros_like(particles.log_weight))
        due = ((step + 1) % resample_period == 0) & (step + 1 < depth)
        return jax.tree_util.tree_map(lambda new, old: jnp.where(due, new, old), resampled, particles)

    def plan_one(search_params: PyTree, key: jax.Array, env_state: EnvState, timestep: TimeStep):
        root_observation = jax.tree_util.tree_map(lambda x: x[None], timestep.observation)
        root_value = networks.value(search_params, root_observation)[0]
        observation = _broadcast(timestep.observation, num_particles)
        root_policy = networks.policy(search_params, observation)
        first_key, step_keys, choice_key = jax.random.split(key, 3)
        first_action = root_policy.sample(first_key)
        particles = Particles(
            env_state=_broadcast(env_state, num_particles), observation=observation,
            value=jnp.full((num_particles,), root_value), first_action=first_action,
            log_weight=jnp.zeros((num_particles,)), alive=jnp.ones((num_particles,), bool),
            discounted_return=jnp.zeros((num_particles,)), discount=jnp.ones((num_particles,)))
        particles = advance(search_params, particles, root_policy, first_action)

        def smc_step(particles: Particles, step_and_key: Tuple[Array, jax.Array]) -> Tuple[Particles, None]:
            step, key = step_and_key
            resample_key, action_key = jax.random.split(key)
            particles = resample_if_due(particles, step - 1, resample_key)  # after the previous step
            policy = networks.policy(search_params, particles.observation)
            return advance(search_params, particles, policy, policy.sample(action_key)), None

        steps = jnp.arange(1, depth)
        particles, _ = jax.lax.scan(smc_step, particles, (steps, jax.random.split(step_keys, depth - 1)))

        weights = smc.normalized_weights(particles.log_weight)
        chosen = jax.random.categorical(choice_key, particles.log_weight)
        action = particles.first_action[chosen]
        smc_value = jnp.sum(weights * (particles.discounted_return + particles.discount * particles.value))
        statistics = {"effective_sample_size": smc.effective_sample_size(particles.log_weight),
                      "particle_weight_entropy": smc.weight_entropy(particles.log_weight),
                      "particles_alive": jnp.mean(particles.alive.astype(jnp.float32)),
                      "smc_value_minus_network_value": smc_value - root_value}
        # the value targets bootstrap from the critic (TD(λ) of its own values), not from the SMC's estimate
        recorded = {"policy_target": (particles.first_action, weights), "search_value": root_value,
                    "statistics": statistics}
        return action, root_policy.to_env_action(action), recorded

    def plan(search_params: PyTree, key: jax.Array, env_state: EnvState, timestep: TimeStep
             ) -> Tuple[Array, Array, Dict[str, PyTree]]:
        num_roots = timestep.reward.shape[0]
        return jax.vmap(plan_one, in_axes=(None, 0, 0, 0))(search_params, jax.random.split(key, num_roots),
                                                           env_state, timestep)

    return plan


def learner_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget) -> SystemSetup:
    search = alphazero.Search(planner=smc_planner, policy_loss=fit_to_weighted_draws(float(config.system.ent_coef)))
    return alphazero.make_system_setup(env, key, config, budget, search)


def run_experiment(config: DictConfig) -> float:
    return experiment.run(config, learner_setup, algorithm=str(config.system.system_name))
