"""Sampled AlphaZero (Hubert et al., 2021, "Learning and Planning in Complex Action Spaces") for continuous actions:
AlphaZero's learner (alphazero.py), its search over K actions drawn from the policy at every node (the draws,
their prior and the policy's fit: sampled_actions.py, shared with Sampled MuZero).

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

import jax
from omegaconf import DictConfig

from stoix_like.run import experiment
from stoix_like.learner.budget import Budget
from stoix_like.envs.environment import ContinuousActionSpace, Environment
from stoix_like.learner.system_contract import SystemSetup
from stoix_like.systems.search import alphazero, mcts, sampled_actions
from stoix_like.types import Array, Observation


def sampled_policy(num_sampled_actions: int, action_space: ContinuousActionSpace, ent_coef: float
                   ) -> alphazero.SearchedPolicy:
    """K draws from the policy at every node, and the policy fitted to the search's weights over the root's."""

    def expand(dist: mcts.Policy, value: Array, observation: Observation, key: jax.Array) -> mcts.Expansion:
        del observation  # continuous actions have no mask; a node's search actions are its draws
        return sampled_actions.expand_with_draws(dist, value, key, num_sampled_actions)

    return alphazero.SearchedPolicy(expand=expand, env_action=sampled_actions.env_action_of_draws(action_space),
                                    policy_target=sampled_actions.root_draws_and_weights,
                                    policy_loss=sampled_actions.fit_to_weighted_draws(ent_coef))


def learner_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget) -> SystemSetup:
    action_space = mcts.require_continuous_actions(env, config)
    system = config.system
    searched = sampled_policy(sampled_actions.require_draws_per_node(system), action_space, float(system.ent_coef))
    return alphazero.make_system_setup(env, key, config, budget, alphazero.tree_search(searched))


def run_experiment(config: DictConfig) -> float:
    return experiment.run(config, learner_setup, algorithm=str(config.system.system_name))
