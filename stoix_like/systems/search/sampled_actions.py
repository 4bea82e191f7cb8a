"""What the sampled search systems share (Hubert et al., 2021, "Learning and Planning in Complex Action Spaces"):
K continuous actions drawn from the policy at every search node, the search's K-way choice among them, and the
policy's fit to the search's weights over the root's draws.

Sampled AlphaZero (sampled_alphazero.py, the env as the search's model) and Sampled MuZero (sampled_muzero.py, a
learnt model) differ only in what a node is; these pieces are the same for both. Draws are pre-tanh, as the
tanh-Gaussian policy (networks/distributions.py) samples and scores them.
"""

from __future__ import annotations

from typing import Callable, Dict, Tuple

import jax
import jax.numpy as jnp
import mctx
from omegaconf import DictConfig

from stoix_like.envs.environment import ContinuousActionSpace
from stoix_like.errors import ConfigError
from stoix_like.networks.distributions import unit_box_to_bounds
from stoix_like.ops.sampled_policy import empirical_distribution, sampled_prior_logits
from stoix_like.systems.search import mcts
from stoix_like.types import Array


def require_draws_per_node(system: DictConfig) -> int:
    """`system.num_sampled_actions`, refused in one line where null (its schema refuses < 1)."""
    if system.num_sampled_actions is None:
        raise ConfigError(f"system.num_sampled_actions=null: {system.system_name} draws that many actions at every "
                          f"search node; give a positive integer (e.g. 8).")
    return int(system.num_sampled_actions)


def log_probs_of_draws(dist: mcts.Policy, draws: Array) -> Array:
    """`[B, K]` log π(a_k|s) of each state's K draws `[B, K, D]` (pre-tanh; `[B, K]` for discrete actions) under
    the policy `[B]`."""
    return jax.vmap(dist.log_prob, in_axes=1, out_axes=1)(draws)


def expand_with_draws(dist: mcts.Policy, value: Array, key: jax.Array, num_sampled_actions: int) -> mcts.Expansion:
    """A node's K draws from the policy `dist` `[B]`, carried as its search actions `[B, K, D]`, with the corrected
    prior over them. With β = π the correction's log β and log π cancel, leaving the draws' empirical
    distribution: uniform over distinct draws."""
    draws = jax.vmap(dist.sample, out_axes=1)(jax.random.split(key, num_sampled_actions))  # [B, K, D] pre-tanh
    log_probs = log_probs_of_draws(dist, draws)
    empirical = empirical_distribution(draws)
    return mcts.Expansion(sampled_prior_logits(log_probs, log_probs, empirical), value, empirical > 0, draws)


def chosen_draw(draws: Array, index: Array) -> Array:
    """`[B, D]` the draw `[B, K, D]` each search chose (`index` `[B]`), squashed into [-1, 1]."""
    return jnp.tanh(jnp.take_along_axis(draws, index[:, None, None], axis=1)[:, 0])


def env_action_of_draws(action_space: ContinuousActionSpace) -> mcts.EnvAction:
    """`EnvAction` of a search over draws: search action k is the node's k-th draw, in the env's box."""
    low = jnp.asarray(action_space.low, jnp.float32)
    high = jnp.asarray(action_space.high, jnp.float32)

    def env_action(draws: Array, index: Array) -> Array:
        return unit_box_to_bounds(chosen_draw(draws, index), low, high)

    return env_action


def root_draws_and_weights(root: mctx.RootFnOutput, output: mctx.PolicyOutput) -> Tuple[Array, Array]:
    """The policy target of a sampled search: the root's draws `[B, K, D]` and the search's weights over them
    `[B, K]` (mctx's root output and search output)."""
    return root.embedding.actions, output.action_weights


def fit_to_search_weights(dist: mcts.Policy, draws: Array, search_weights: Array) -> Array:
    """`[B]` −Σ_k w_k log π(a_k|s): the policy `[B]` fitted to the search's weights `[B, K]` over the root's draws
    `[B, K, D]` (the weights are not differentiated)."""
    weights = jax.lax.stop_gradient(search_weights)
    return -jnp.sum(weights * log_probs_of_draws(dist, draws), axis=-1)


def fit_to_weighted_draws(ent_coef: float) -> Callable[[mcts.Policy, Tuple[Array, Array], jax.Array],
                                                         Tuple[Array, Dict[str, Array]]]:
    """The policy loss of a search that weighs draws, `policy_loss(policy [B], (draws, weights), key)`: the mean of
    `fit_to_search_weights` minus `ent_coef` × the policy's entropy. Sampled AlphaZero's draws are the root's, SPO's
    its particles' first actions (indices when discrete)."""

    def policy_loss(dist: mcts.Policy, target: Tuple[Array, Array], key: jax.Array) -> Tuple[Array, Dict[str, Array]]:
        draws, search_weights = target
        loss = jnp.mean(fit_to_search_weights(dist, draws, search_weights))
        entropy = jnp.mean(dist.entropy(key))
        return loss - ent_coef * entropy, {"actor_loss": loss, "entropy": entropy}

    return policy_loss
