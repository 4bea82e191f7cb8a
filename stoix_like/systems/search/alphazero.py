"""AlphaZero (Silver et al., 2018) for single-agent JAX envs: a tree search whose model is the env itself.

One update: roll out the search's policy (mctx, batched over the envs, inside the compiled learner) → value
targets, truncation-correct λ-returns bootstrapped from the search's root values → epochs × minibatches that
distil the search's action weights into the policy network (cross-entropy) and regress the value network onto the
targets. Evaluation plays the policy network alone: the search needs the env's state, the evaluator gives
observations.

Plain AlphaZero is for discrete actions; a continuous action space is refused. Sampled AlphaZero
(sampled_alphazero.py) is this learner with another `SearchedPolicy`: K actions drawn at every node instead of
every action, and the policy fitted to the search's weights over the root's draws. SPO (spo.py) is this learner
with another `Search`: a particle filter over env copies plans instead of a tree.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, NamedTuple, Tuple

import jax
import jax.numpy as jnp
import mctx
from omegaconf import DictConfig

from stoix_like.run import experiment
from stoix_like.learner import normalization
from stoix_like.runtime import parallel
from stoix_like.learner.budget import Budget
from stoix_like.envs.environment import Environment
from stoix_like.envs.wrappers import VmapWrapper
from stoix_like.networks.actor_critic import PolicyAndValue
from stoix_like.networks.distributions import MaskedCategorical
from stoix_like.ops.losses import l2_loss, policy_distillation_loss
from stoix_like.ops.returns import lambda_returns
from stoix_like.learner.system_contract import Learner, LearnerOutput, SystemSetup
from stoix_like.systems.on_policy import policy_gradient, rollout
from stoix_like.systems.search import mcts
from stoix_like.types import (ActorCriticApplyFns, ActorCriticParams, ActorCriticUpdateFns, Array, EnvState,
                              Observation, OnPolicyLearnerState, PyTree, TimeStep)


class SearchedPolicy(NamedTuple):
    """How the policy network meets the search: the search's actions at a node, the env action each stands for,
    what the policy learns from each search and its loss on that. The policy distribution is an `mcts.Policy` of
    the kind the searched policy reads (AlphaZero's a MaskedCategorical, for its logits), hence typed Any here."""

    # expand(policy distribution [B], value [B], observation [B], key) -> the node's search actions and prior
    expand: Callable[[Any, Array, Observation, jax.Array], mcts.Expansion]
    env_action: mcts.EnvAction
    # policy_target(root, search output) -> what the policy is fitted to at this step (recorded with the step)
    policy_target: Callable[[mctx.RootFnOutput, mctx.PolicyOutput], PyTree]
    # policy_loss(policy distribution [B], targets [B], key) -> (loss, metrics)
    policy_loss: Callable[[Any, PyTree, jax.Array], Tuple[Array, Dict[str, Array]]]


def _every_action(dist: MaskedCategorical, value: Array, observation: Observation, key: jax.Array) -> mcts.Expansion:
    del key  # every action is searched: nothing is drawn
    return mcts.Expansion(dist.logits, value, observation.action_mask, ())


def distil_search_weights(ent_coef: float
                          ) -> Callable[[MaskedCategorical, Array, jax.Array], Tuple[Array, Dict[str, Array]]]:
    """The policy's loss: cross-entropy to the search's weights, minus `ent_coef` × its entropy (0: none)."""

    def policy_loss(dist: MaskedCategorical, search_weights: Array, key: jax.Array) -> Tuple[Array, Dict[str, Array]]:
        del key  # a categorical's entropy is exact
        distillation = policy_distillation_loss(search_weights, dist.logits)
        entropy = jnp.mean(dist.entropy())
        return distillation - ent_coef * entropy, {"actor_loss": distillation, "entropy": entropy}

    return policy_loss


def every_action(ent_coef: float) -> SearchedPolicy:
    """AlphaZero's: every discrete action at every node, the policy distilled from the search's weights over them."""
    return SearchedPolicy(expand=_every_action, env_action=mcts.index_is_action,
                          policy_target=lambda root, output: output.action_weights,
                          policy_loss=distil_search_weights(ent_coef))


# plan(search params, key, env states [B], timesteps [B]) -> (action to store [B], env action [B, ...], recorded):
# `recorded` holds "policy_target" (what the policy is fitted to at this step), "search_value" ([B], what the value
# targets bootstrap from, `mcts.bootstrap_values`) and "statistics" ({name: [B]}, logged as their means)
Plan = Callable[[PyTree, jax.Array, EnvState, TimeStep], Tuple[Array, Array, Dict[str, PyTree]]]


class Search(NamedTuple):
    """How a search system acts and what its policy learns. `planner(env, networks, system config)` builds the plan
    the rollout acts with, `networks` the policy and value of (search params, observations [B]);
    `policy_loss(policy [B], targets [B], key) -> (loss, metrics)` fits the policy to the plan's recorded targets.
    AlphaZero's and Sampled AlphaZero's plan is `tree_search`; SPO's a particle filter (spo.py)."""

    planner: Callable[[Environment, PolicyAndValue, DictConfig], Plan]
    policy_loss: Callable[[Any, PyTree, jax.Array], Tuple[Array, Dict[str, Array]]]


def tree_search(searched: SearchedPolicy) -> Search:
    """AlphaZero's plan: an mctx tree search (`system.search_policy`) whose model is the env and whose nodes the
    network expands as `searched` says."""

    def planner(env: Environment, networks: PolicyAndValue, system: DictConfig) -> Plan:
        def expand(search_params: PyTree, key: jax.Array, observation: Observation) -> mcts.Expansion:
            return searched.expand(networks.policy(search_params, observation),
                                   networks.value(search_params, observation), observation, key)

        recurrent_fn = mcts.env_model(env, expand, float(system.gamma), searched.env_action)

        def plan(search_params: PyTree, key: jax.Array, env_state: EnvState, timestep: TimeStep):
            root_key = jax.random.fold_in(key, 0)  # the root's own draws (Sampled AlphaZero's); the search keeps `key`
            root = mcts.network_root(expand, search_params, root_key, env_state, timestep)
            output = mcts.run_search(str(system.search_policy), search_params, key, root, recurrent_fn,
                                     int(system.num_simulations), system.max_depth)
            recorded = {"policy_target": searched.policy_target(root, output),
                        "search_value": mcts.search_value(output),
                        "statistics": mcts.search_statistics(output, root.value)}
            return output.action, searched.env_action(root.embedding.actions, output.action), recorded

        return plan

    return Search(planner=planner, policy_loss=searched.policy_loss)


def get_learner_fn(env: Environment, apply_fns: ActorCriticApplyFns, update_fns: ActorCriticUpdateFns,
                   config: DictConfig, budget: Budget, search: Search | None = None) -> Learner:
    """`env` is the unbatched train env: the learner steps a batch of it, and the search copies of each.
    `search` defaults to AlphaZero's tree search over every action."""
    system = config.system
    search = tree_search(every_action(float(system.ent_coef))) if search is None else search
    actor_apply, critic_apply = apply_fns
    batched_env = VmapWrapper(env)

    def value_of(search_params: Tuple[ActorCriticParams, PyTree], observation: Observation) -> Array:
        params, obs_norm = search_params
        return critic_apply(params.critic, normalization.normalize(obs_norm, observation))

    def policy_of(search_params: Tuple[ActorCriticParams, PyTree], observation: Observation) -> mcts.Policy:
        params, obs_norm = search_params
        return actor_apply(params.actor, normalization.normalize(obs_norm, observation))

    plan = search.planner(env, PolicyAndValue(policy=policy_of, value=value_of), system)

    def act(state: OnPolicyLearnerState, observation: Observation, key: jax.Array):
        del observation  # the root's network normalises the observation itself, beside the env state it searches
        action, env_action, recorded = plan((state.params, state.obs_norm), key, state.env_state, state.timestep)
        return state, action, env_action, recorded

    def value_targets(state: OnPolicyLearnerState, steps) -> Array:
        """λ-returns bootstrapped as `mcts.bootstrap_values` says (with λ near 1 the value network's bootstrap
        after the last row weighs little)."""
        successor_values = value_of((state.params, state.obs_norm), steps.next_observation)
        return lambda_returns(
            rewards=steps.reward,
            discounts=system.gamma * steps.discount,  # 0 only on termination: truncations still bootstrap
            next_values=mcts.bootstrap_values(steps.policy_extras["search_value"], successor_values, steps.done),
            continuations=1.0 - steps.done.astype(steps.reward.dtype),
            lam=system.gae_lambda,
        )

    def actor_loss(actor_params, obs_norm, observation: Observation, policy_targets: PyTree, key: jax.Array):
        return search.policy_loss(actor_apply(actor_params, normalization.normalize(obs_norm, observation)),
                                  policy_targets, key)

    def critic_loss(critic_params, obs_norm, observation: Observation, targets: Array):
        values = critic_apply(critic_params, normalization.normalize(obs_norm, observation))
        loss = jnp.mean(l2_loss(values - targets))
        return loss, {"value_loss": loss}

    def update_minibatch(carry, minibatch, key: jax.Array):
        params, opt_states, obs_norm = carry
        observation, policy_targets, targets = minibatch
        actor_grads, actor_metrics = jax.grad(actor_loss, has_aux=True)(
            params.actor, obs_norm, observation, policy_targets, key)
        critic_grads, critic_metrics = jax.grad(critic_loss, has_aux=True)(
            params.critic, obs_norm, observation, targets)
        params, opt_states, metrics = policy_gradient.apply_gradients(
            update_fns, params, opt_states, actor_grads, critic_grads, {**actor_metrics, **critic_metrics})
        return (params, opt_states, obs_norm), metrics

    def update_step(state: OnPolicyLearnerState) -> Tuple[OnPolicyLearnerState, LearnerOutput]:
        state, steps = rollout.collect_rollout_from_state(batched_env, act, state, system.rollout_length,
                                                           config.arch.rollout_unroll)
        targets = value_targets(state, steps)
        state, train_metrics = rollout.learn_from_rollout(
            update_minibatch, state, (steps.observation, steps.policy_extras["policy_target"], targets),
            steps.observation, system)
        search_metrics = {name: jnp.mean(values) for name, values in steps.policy_extras["statistics"].items()}
        return state, LearnerOutput(episode_metrics=steps.episode_metrics,
                                    train_metrics={**train_metrics, **search_metrics})

    return parallel.scan_updates(update_step, budget.updates_per_evaluation)


def make_system_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget, search: Search | None = None
           ) -> SystemSetup:
    """A search system's `learner_setup` once its input is checked: AlphaZero's networks (the actor-critic's), and
    the learner that acts with `search` (AlphaZero's tree search over every action when None)."""
    parts = policy_gradient.build_actor_critic(env, key, config, budget)
    return SystemSetup(
        learner_fn=get_learner_fn(env, parts.apply_fns, parts.update_fns, config, budget, search),
        learner_state=parts.learner_state,
        eval_policy=parts.eval_policy,
        eval_params=policy_gradient.eval_params,
    )


def learner_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget) -> SystemSetup:
    mcts.require_discrete_actions(env, config)
    return make_system_setup(env, key, config, budget)


def run_experiment(config: DictConfig) -> float:
    return experiment.run(config, learner_setup, algorithm=str(config.system.system_name))
