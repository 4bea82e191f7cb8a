"""Sampled AlphaZero (Hubert et al., 2021, "Learning and Planning in Complex Action Spaces") for continuous actions:
AlphaZero's learner (alphazero.py), its search over K actions drawn from the policy at every node.

At each node K actions are sampled from the tanh-Gaussian policy (β = π) and the search sees a K-way discrete
problem: search action k steps the env with the node's k-th draw, which the node's embedding carries beside its
env state. The prior over the draws is the sampled-policy correction β̂/β·π (ops/sampled_policy.py), which with
β = π is the draws' empirical distribution: the search's improvement over the draws is, in expectation, one over
the whole action space. The policy is fitted to the search's weights over the root's draws, −Σ_k w_k log π(a_k|s),
with a small entropy bonus (`system.ent_coef`); the value network as AlphaZero's. The fit pulls the policy's scale
towards the spread of the draws the search weighted most, a little narrower each update, so the shipped network
floors it (`network.actor_network.action_head.min_scale`): without the floor the draws soon stop differing and the
search has nothing to compare (config/sampled_az.yaml). Evaluation plays the policy network alone (its mean with
`arch.evaluation_greedy`).

A discrete env is refused (plain AlphaZero searches every action); so is `system.num_sampled_actions=null`.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Tuple

import jax
import jax.numpy as jnp
from omegaconf import DictConfig

from stoix_like import experiment
from stoix_like.budget import Budget
from stoix_like.envs.environment import ContinuousActionSpace, Environment
from stoix_like.errors import ConfigError
from stoix_like.networks.distributions import unit_box_to_bounds
from stoix_like.ops.sampled_policy import empirical_distribution, sampled_prior_logits
from stoix_like.system_contract import SystemSetup
from stoix_like.systems.search import alphazero, mcts
from stoix_like.types import Array, Observation


def log_probs_of_draws(dist: Any, draws: Array) -> Array:
    """`[B, K]` log π(a_k|s) of each state's K draws `[B, K, D]` (pre-tanh; `[B, K]` for discrete actions) under
    the policy `[B]`."""
    return jax.vmap(dist.log_prob, in_axes=1, out_axes=1)(draws)


def fit_to_weighted_draws(ent_coef: float) -> Callable[[Any, Tuple[Array, Array], jax.Array],
                                                         Tuple[Array, Dict[str, Array]]]:
    """The policy loss of a search that weighs draws: −Σ_k w_k log π(a_k|s) over each state's draws `[B, K, ...]`
    (pre-tanh when continuous, indices when discrete) with their weights `[B, K]`, minus `ent_coef` × entropy.
    Sampled AlphaZero's draws are the root's, SPO's its particles' first actions."""

    def policy_loss(dist: Any, target: Tuple[Array, Array], key: jax.Array) -> Tuple[Array, Dict[str, Array]]:
        draws, search_weights = target
        weights = jax.lax.stop_gradient(search_weights)
        loss = -jnp.mean(jnp.sum(weights * log_probs_of_draws(dist, draws), axis=-1))
        entropy = jnp.mean(dist.entropy(key))
        return loss - ent_coef * entropy, {"actor_loss": loss, "entropy": entropy}

    return policy_loss


def sampled_policy(num_sampled_actions: int, action_space: ContinuousActionSpace, ent_coef: float
                   ) -> alphazero.SearchedPolicy:
    """K draws from the policy at every node, and the policy fitted to the search's weights over the root's."""
    low = jnp.asarray(action_space.low, jnp.float32)
    high = jnp.asarray(action_space.high, jnp.float32)

    def expand(dist: Any, value: Array, observation: Observation, key: jax.Array) -> mcts.Expansion:
        del observation  # continuous actions have no mask; a node's search actions are its draws
        draws = jax.vmap(dist.sample, out_axes=1)(jax.random.split(key, num_sampled_actions))  # [B, K, D] pre-tanh
        log_probs = log_probs_of_draws(dist, draws)
        empirical = empirical_distribution(draws)
        # β = π: the correction's log β and log π cancel, leaving the draws' empirical distribution
        logits = sampled_prior_logits(log_probs, log_probs, empirical)
        return mcts.Expansion(logits, value, empirical > 0, draws)

    def env_action(draws: Array, index: Array) -> Array:
        chosen = jnp.take_along_axis(draws, index[:, None, None], axis=1)[:, 0]
        return unit_box_to_bounds(jnp.tanh(chosen), low, high)

    def policy_target(root, output) -> Tuple[Array, Array]:
        return root.embedding.actions, output.action_weights

    return alphazero.SearchedPolicy(expand=expand, env_action=env_action, policy_target=policy_target,
                                    policy_loss=fit_to_weighted_draws(ent_coef))


def learner_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget) -> SystemSetup:
    action_space = mcts.require_continuous_actions(env, config)
    system = config.system
    if system.num_sampled_actions is None:
        raise ConfigError(f"system.num_sampled_actions=null: {system.system_name} draws that many actions at every "
                          f"search node; give a positive integer (e.g. 8).")
    searched = sampled_policy(int(system.num_sampled_actions), action_space, float(system.ent_coef))
    return alphazero.set_up(env, key, config, budget, alphazero.tree_search(searched))


def run_experiment(config: DictConfig) -> float:
    return experiment.run(config, learner_setup, algorithm=str(config.system.system_name))
