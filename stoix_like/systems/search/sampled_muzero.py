"""Sampled MuZero (Hubert et al., 2021, "Learning and Planning in Complex Action Spaces") for continuous actions:
MuZero's learnt model and learner (muzero.py), its search over K actions drawn from the prediction's policy at
every node.

The prediction network's policy is a tanh-Gaussian. At the root and at every node the learnt model reaches, K
actions are drawn from it (β = π) and carried in the node's embedding; the search sees a K-way discrete problem
whose prior over the draws is the sampled-policy correction β̂/β·π, the draws' empirical distribution
(sampled_actions.py, shared with Sampled AlphaZero). Search action k feeds the dynamics the node's k-th draw,
squashed into [-1, 1]^D, as its action input (an action embedding where MuZero has a one-hot). Each stored step keeps
the root's draws and the search's weights over them, and the action taken; the unroll's dynamics is fed the actions
taken, and the policy at every unrolled position k is fitted to the search of step t + k:
−Σ_j w_j log π(a_j | latent_k). The fit pulls the policy's scale towards the spread of the draws the search weighs
most, so the shipped network floors it (`network.prediction_network.action_head.min_scale`), as Sampled
AlphaZero's does. Rewards, values, targets and the unroll's masks are MuZero's. The shipped config judges the
search itself (`system.evaluate_with_search`: it needs the observation only), the draw of highest search weight
with `arch.evaluation_greedy`; off, the prediction network's policy plays alone (its mean when greedy), which on
Pendulum lags the search by hundreds of return at the same step (config/sampled_mz.yaml).

A discrete env is refused (plain MuZero searches every action); so is `system.num_sampled_actions=null`, and a
value support too small for the env's returns (MuZero's check).
"""

from __future__ import annotations

from typing import Optional, Tuple

import jax
import jax.numpy as jnp
from omegaconf import DictConfig

from stoix_like.run import experiment
from stoix_like.learner.budget import Budget
from stoix_like.envs.environment import ContinuousActionSpace, Environment
from stoix_like.networks.distributions import TanhGaussian
from stoix_like.learner.system_contract import SystemSetup
from stoix_like.systems.search import mcts, muzero, sampled_actions
from stoix_like.types import Array, Observation


def sampled_actions_of(num_sampled_actions: int, action_space: ContinuousActionSpace) -> muzero.SearchedActions:
    """K draws from the prediction's policy at every node; the dynamics fed the chosen draw; the policy fitted to
    the search's weights over the root's draws at every unrolled position."""
    low = jnp.asarray(action_space.low, jnp.float32)
    high = jnp.asarray(action_space.high, jnp.float32)

    def distribution(policy: Tuple[Array, Array], observation: Optional[Observation] = None) -> TanhGaussian:
        del observation  # continuous actions have no mask
        loc, scale = policy
        return TanhGaussian(loc, scale, low, high)

    def expand(policy: Tuple[Array, Array], value: Array, legal: Optional[Array], key: jax.Array) -> mcts.Expansion:
        del legal  # continuous actions have no mask; a node's search actions are its draws
        return sampled_actions.expand_with_draws(distribution(policy), value, key, num_sampled_actions)

    def policy_loss(policies: Tuple[Array, Array], targets: Tuple[Array, Array]) -> Array:
        """`[T, B]`: each position's policy fitted to the search weights of the draws stored at its step."""
        draws, search_weights = targets
        leading = search_weights.shape[:-1]

        def flat(x: Array, trailing: int) -> Array:
            return x.reshape((-1,) + x.shape[x.ndim - trailing:])

        dist = distribution(jax.tree_util.tree_map(lambda x: flat(x, 1), policies))
        return sampled_actions.fit_to_search_weights(dist, flat(draws, 2), flat(search_weights, 1)).reshape(leading)

    return muzero.SearchedActions(
        expand=expand, model_action=sampled_actions.chosen_draw,
        env_action=sampled_actions.env_action_of_draws(action_space),
        policy_target=sampled_actions.root_draws_and_weights, policy_loss=policy_loss, distribution=distribution)


def learner_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget) -> SystemSetup:
    action_space = mcts.require_continuous_actions(env, config, plain="MuZero", plain_entry="mz")
    searched = sampled_actions_of(sampled_actions.require_draws_per_node(config.system), action_space)
    return muzero.make_system_setup(env, key, config, budget, action_space, searched)


def run_experiment(config: DictConfig) -> float:
    return experiment.run(config, learner_setup, algorithm=str(config.system.system_name))
