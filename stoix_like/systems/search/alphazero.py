"""AlphaZero (Silver et al., 2018) for single-agent JAX envs: a tree search whose model is the env itself.

One update: roll out the search's policy (mctx, batched over the envs, inside the compiled learner) → value
targets, truncation-correct λ-returns bootstrapped from the search's root values → epochs × minibatches that
distil the search's action weights into the policy network (cross-entropy) and regress the value network onto the
targets. Evaluation plays the policy network alone: the search needs the env's state, the evaluator gives
observations.

Plain AlphaZero is for discrete actions; a continuous action space is refused (Sampled AlphaZero is its own
system).
"""

from __future__ import annotations

from typing import Any, Tuple

import jax
import jax.numpy as jnp
from omegaconf import DictConfig

from stoix_like import experiment, normalization, parallel
from stoix_like.budget import Budget
from stoix_like.envs.environment import Environment
from stoix_like.envs.wrappers import VmapWrapper
from stoix_like.ops.losses import l2_loss, policy_distillation_loss
from stoix_like.ops.returns import lambda_returns
from stoix_like.system_contract import Learner, LearnerOutput, SystemSetup
from stoix_like.systems.on_policy import policy_gradient, rollout
from stoix_like.systems.search import mcts
from stoix_like.types import ActorCriticApplyFns, ActorCriticUpdateFns, Array, Observation, OnPolicyLearnerState


def get_learner_fn(env: Environment, apply_fns: ActorCriticApplyFns, update_fns: ActorCriticUpdateFns,
                   config: DictConfig, budget: Budget) -> Learner:
    """`env` is the unbatched train env: the learner steps a batch of it, and the search a copy of each."""
    system = config.system
    actor_apply, critic_apply = apply_fns
    batched_env = VmapWrapper(env)

    def value_of(search_params: Tuple[Any, Any], observation: Observation) -> Array:
        params, obs_norm = search_params
        return critic_apply(params.critic, normalization.normalize(obs_norm, observation))

    def prior_and_value(search_params: Tuple[Any, Any], observation: Observation) -> Tuple[Array, Array]:
        params, obs_norm = search_params
        logits = actor_apply(params.actor, normalization.normalize(obs_norm, observation)).logits
        return logits, value_of(search_params, observation)

    recurrent_fn = mcts.env_model(env, prior_and_value, float(system.gamma))

    def act(state: OnPolicyLearnerState, observation: Observation, key: jax.Array):
        del observation  # the root's network normalises the observation itself, beside the env state it searches
        search_params = (state.params, state.obs_norm)
        root = mcts.network_root(prior_and_value, search_params, state.env_state, state.timestep)
        output = mcts.run_search(str(system.search_policy), search_params, key, root, recurrent_fn,
                                 int(system.num_simulations), system.max_depth)
        recorded = {"search_weights": output.action_weights, "search_value": mcts.search_value(output),
                    **mcts.search_statistics(output, root.value)}
        return state, output.action, output.action, recorded

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

    def actor_loss(actor_params, obs_norm, observation: Observation, search_weights: Array):
        dist = actor_apply(actor_params, normalization.normalize(obs_norm, observation))
        loss = policy_distillation_loss(search_weights, dist.logits)
        return loss, {"actor_loss": loss, "entropy": jnp.mean(dist.entropy())}

    def critic_loss(critic_params, obs_norm, observation: Observation, targets: Array):
        values = critic_apply(critic_params, normalization.normalize(obs_norm, observation))
        loss = jnp.mean(l2_loss(values - targets))
        return loss, {"value_loss": loss}

    def update_minibatch(carry, minibatch, key: jax.Array):
        del key  # distillation and regression onto fixed targets need no randomness
        params, opt_states, obs_norm = carry
        observation, search_weights, targets = minibatch
        actor_grads, actor_metrics = jax.grad(actor_loss, has_aux=True)(
            params.actor, obs_norm, observation, search_weights)
        critic_grads, critic_metrics = jax.grad(critic_loss, has_aux=True)(
            params.critic, obs_norm, observation, targets)
        params, opt_states, metrics = policy_gradient.apply_gradients(
            update_fns, params, opt_states, actor_grads, critic_grads, {**actor_metrics, **critic_metrics})
        return (params, opt_states, obs_norm), metrics

    def update_step(state: OnPolicyLearnerState) -> Tuple[OnPolicyLearnerState, LearnerOutput]:
        state, steps = rollout.collect_rollout_from_state(batched_env, act, state, system.rollout_length)
        targets = value_targets(state, steps)
        state, train_metrics = rollout.learn_from_rollout(
            update_minibatch, state, (steps.observation, steps.policy_extras["search_weights"], targets),
            steps.observation, system)
        search_metrics = {name: jnp.mean(steps.policy_extras[name]) for name in mcts.SEARCH_STATISTICS}
        return state, LearnerOutput(episode_metrics=steps.episode_metrics,
                                    train_metrics={**train_metrics, **search_metrics})

    return parallel.scan_updates(update_step, budget.updates_per_evaluation)


def learner_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget) -> SystemSetup:
    mcts.require_discrete_actions(env, config)
    parts = policy_gradient.build_actor_critic(env, key, config, budget)
    return SystemSetup(
        learner_fn=get_learner_fn(env, parts.apply_fns, parts.update_fns, config, budget),
        learner_state=parts.learner_state,
        eval_policy=parts.eval_policy,
        eval_params=policy_gradient.eval_params,
    )


def run_experiment(config: DictConfig) -> float:
    return experiment.run(config, learner_setup, algorithm=str(config.system.system_name))
