"""PPO (Schulman et al., 2017) with truncation-correct GAE, for discrete and continuous actions.

The policy head follows the env's action space (categorical or tanh-Gaussian), so one system covers both.
One update: rollout → advantages → epochs × minibatches of clipped actor and critic updates.
"""

from __future__ import annotations

from typing import Any, Tuple

import jax
import jax.numpy as jnp
from omegaconf import DictConfig

from stoix_like import experiment, normalization, parallel
from stoix_like.compilation_cache import jitted_init
from stoix_like.budget import Budget
from stoix_like.envs.environment import Environment, example_observation
from stoix_like.envs.wrappers import VmapWrapper
from stoix_like.evaluator import actor_policy
from stoix_like.networks.factory import build_actor, build_critic
from stoix_like.ops.losses import clipped_value_loss, ppo_clip_loss
from stoix_like.ops.returns import truncated_gae
from stoix_like.optim import make_optimizer
from stoix_like.system_contract import Learner, LearnerOutput, SystemSetup
from stoix_like.systems.on_policy import rollout
from stoix_like.types import (
    ActorCriticApplyFns,
    ActorCriticOptStates,
    ActorCriticParams,
    ActorCriticUpdateFns,
    OnPolicyLearnerState,
    PPOTransition,
)


def get_learner_fn(env: VmapWrapper, apply_fns: ActorCriticApplyFns, update_fns: ActorCriticUpdateFns,
                   config: DictConfig, budget: Budget) -> Learner:
    system = config.system
    actor_apply, critic_apply = apply_fns
    actor_update, critic_update = update_fns

    def act(params: ActorCriticParams, observation, key: jax.Array):
        dist = actor_apply(params.actor, observation)
        action = dist.sample(key)
        recorded = {"value": critic_apply(params.critic, observation), "log_prob": dist.log_prob(action)}
        return action, dist.to_env_action(action), recorded

    def collect_trajectory(state: OnPolicyLearnerState) -> Tuple[OnPolicyLearnerState, PPOTransition]:
        state, steps = rollout.collect_rollout(env, act, state, system.rollout_length)
        # The value of each step's true successor: one (T × envs) batched pass instead of T small ones.
        next_observations = normalization.normalize(state.obs_norm, steps.next_observation)
        next_values = critic_apply(state.params.critic, next_observations)
        return state, PPOTransition(
            done=steps.done,
            truncated=steps.done & (steps.discount != 0.0),
            action=steps.action,
            value=steps.policy_extras["value"],
            next_value=next_values,
            reward=steps.reward,
            log_prob=steps.policy_extras["log_prob"],
            observation=steps.observation,
            episode_metrics=steps.episode_metrics,
        )

    def actor_loss(actor_params, traj: PPOTransition, advantages: jax.Array, obs_norm, key: jax.Array):
        dist = actor_apply(actor_params, normalization.normalize(obs_norm, traj.observation))
        log_prob = dist.log_prob(traj.action)
        if system.standardize_advantages:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        policy_loss = ppo_clip_loss(log_prob, traj.log_prob, advantages, system.clip_eps)
        entropy = dist.entropy(seed=key).mean()
        approx_kl = jnp.mean(traj.log_prob - log_prob)
        total = policy_loss - system.ent_coef * entropy
        return total, {"actor_loss": policy_loss, "entropy": entropy, "approx_kl": approx_kl}

    def critic_loss(critic_params, traj: PPOTransition, targets: jax.Array, obs_norm):
        values = critic_apply(critic_params, normalization.normalize(obs_norm, traj.observation))
        value_loss = clipped_value_loss(values, traj.value, targets, system.clip_eps)
        return system.vf_coef * value_loss, {"value_loss": value_loss}

    def update_minibatch(carry, minibatch, entropy_key: jax.Array):
        params, opt_states, obs_norm = carry
        traj, advantages, targets = minibatch
        actor_grads, actor_metrics = jax.grad(actor_loss, has_aux=True)(
            params.actor, traj, advantages, obs_norm, entropy_key)
        critic_grads, critic_metrics = jax.grad(critic_loss, has_aux=True)(params.critic, traj, targets, obs_norm)
        actor_grads, critic_grads, metrics = parallel.pmean_batch_then_device(
            (actor_grads, critic_grads, {**actor_metrics, **critic_metrics}))
        actor_updates, actor_opt = actor_update(actor_grads, opt_states.actor, params.actor)
        critic_updates, critic_opt = critic_update(critic_grads, opt_states.critic, params.critic)
        params = ActorCriticParams(
            jax.tree_util.tree_map(jnp.add, params.actor, actor_updates),
            jax.tree_util.tree_map(jnp.add, params.critic, critic_updates),
        )
        return (params, ActorCriticOptStates(actor_opt, critic_opt), obs_norm), metrics

    def update_step(state: OnPolicyLearnerState) -> Tuple[OnPolicyLearnerState, LearnerOutput]:
        state, traj = collect_trajectory(state)
        advantages, targets = truncated_gae(
            traj.reward, traj.value, traj.next_value, traj.done, traj.truncated, system.gamma, system.gae_lambda)
        state, train_metrics = rollout.learn_from_rollout(
            update_minibatch, state, (traj, advantages, targets), traj.observation, system)
        return state, LearnerOutput(episode_metrics=traj.episode_metrics, train_metrics=train_metrics)

    return parallel.scan_updates(update_step, budget.updates_per_evaluation)


def learner_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget) -> SystemSetup:
    system = config.system
    rollout.check_minibatches(system, budget)
    actor = build_actor(config.network, env.action_space)
    critic = build_critic(config.network)
    batched_env = VmapWrapper(env)

    key, actor_key, critic_key, env_key, step_key = jax.random.split(key, 5)
    observation = example_observation(env)
    # jitted: an eager flax init dispatches one tiny XLA program per layer operation
    params = ActorCriticParams(jitted_init(actor)(actor_key, observation), jitted_init(critic)(critic_key, observation))

    optimizer_steps = rollout.optimizer_steps(system, budget)
    actor_optimizer = make_optimizer(system.actor_lr, system.max_grad_norm, optimizer_steps, system.decay_learning_rates)
    critic_optimizer = make_optimizer(system.critic_lr, system.max_grad_norm, optimizer_steps, system.decay_learning_rates)
    opt_states = ActorCriticOptStates(actor_optimizer.init(params.actor), critic_optimizer.init(params.critic))
    learner_state = rollout.initial_learner_state(OnPolicyLearnerState, env, env_key, step_key, system, budget,
                                                    params=params, opt_states=opt_states)
    learner_fn = get_learner_fn(
        batched_env,
        ActorCriticApplyFns(actor.apply, critic.apply),
        ActorCriticUpdateFns(actor_optimizer.update, critic_optimizer.update),
        config, budget,
    )
    return SystemSetup(
        learner_fn=learner_fn,
        learner_state=learner_state,
        eval_policy=actor_policy(actor.apply, greedy=bool(config.arch.evaluation_greedy)),
        eval_params=lambda slot: (slot.params.actor, slot.obs_norm),
    )


def run_experiment(config: DictConfig) -> float:
    return experiment.run(config, learner_setup, algorithm=str(config.system.system_name))
