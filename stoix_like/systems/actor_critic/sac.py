"""SAC (Haarnoja et al., 2018): a tanh-squashed Gaussian actor, an ensemble of critics with a clipped
double-Q soft target, and an entropy temperature learned towards the target entropy
−`system.target_entropy_scale`·|A| (the paper's −|A| by default).

Replay, warm-up and observation normalisation are the off-policy skeleton's (off_policy.py); critics,
their regression and the optimisers are shared with TD3 / DDPG / D4PG (continuous_control.py).
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Tuple

import jax
import jax.numpy as jnp
from omegaconf import DictConfig

from stoix_like.run import experiment
from stoix_like.runtime import host_keys, parallel
from stoix_like.learner import replay, target_networks
from stoix_like.learner.budget import Budget
from stoix_like.envs.environment import Environment
from stoix_like.learner.evaluator import actor_policy
from stoix_like.networks.distributions import TanhGaussian
from stoix_like.networks.factory import build_actor, build_state_action_critic
from stoix_like.ops import losses
from stoix_like.learner.replay import Transition
from stoix_like.learner.system_contract import SystemSetup
from stoix_like.systems import off_policy
from stoix_like.systems.actor_critic import continuous_control
from stoix_like.types import Array, OnlineAndTarget, OptState, Params


class SACParams(NamedTuple):
    actor: Params
    critic: OnlineAndTarget  # an ensemble of critics, stacked on a leading axis, and its Polyak target
    log_alpha: Array  # the entropy temperature, learned in log space so that it stays positive


class SACOptStates(NamedTuple):
    actor: OptState
    critic: OptState
    alpha: OptState


class SACUpdateFns(NamedTuple):
    actor: Callable
    critic: Callable
    alpha: Callable


def sample_action_and_log_prob(policy: TanhGaussian, key: jax.Array) -> Tuple[jax.Array, jax.Array]:
    """A reparameterised action in [-1, 1] and its log-density (tanh correction included)."""
    pre_tanh = policy.sample(key)
    return policy.squash(pre_tanh), policy.log_prob(pre_tanh)


def make_act(actor_apply: Callable):
    def act(params: SACParams, observation, key: jax.Array, global_env_steps: jax.Array):
        del global_env_steps  # the initial policy is already broad: warm-up needs no uniform actions
        policy = actor_apply(params.actor, observation)
        pre_tanh = policy.sample(key)
        return policy.squash(pre_tanh), policy.to_env_action(pre_tanh)

    return act


def make_learn_from_batch(actor_apply: Callable, critic_apply: Callable, update_fns: SACUpdateFns, config: DictConfig,
                         target_entropy: float) -> off_policy.LearnFromBatch:
    """The skeleton's `learn_from_batch`: critic step, actor step on the updated critic, temperature step."""
    system = config.system

    def critic_loss(critic_params, params: SACParams, batch: Transition, weights, key):
        alpha = jnp.exp(params.log_alpha)
        next_action, next_log_prob = sample_action_and_log_prob(actor_apply(params.actor, batch.next_observation), key)
        next_q = critic_apply(params.critic.target, batch.next_observation, next_action)
        target = losses.clipped_double_q_target(float(system.reward_scale) * batch.reward, batch.discount, next_q,
                                                alpha * next_log_prob)
        return continuous_control.critic_regression_loss(critic_params, critic_apply, batch, target, weights)

    def actor_loss(actor_params, critic_params, log_alpha, observation, key):
        action, log_prob = sample_action_and_log_prob(actor_apply(actor_params, observation), key)
        q_value = jnp.min(critic_apply(critic_params, observation, action), axis=0)
        return jnp.mean(jnp.exp(log_alpha) * log_prob - q_value), log_prob

    def learn_from_batch(params: SACParams, opt_states: SACOptStates, batch: Transition, weights, key, update_count):
        critic_key, actor_key = jax.random.split(key)
        critic, critic_opt, priorities, metrics = continuous_control.critic_step(
            critic_loss, update_fns.critic, params.critic.online, opt_states.critic, params, batch, weights, critic_key)

        (policy_loss, log_prob), actor_grads = jax.value_and_grad(actor_loss, has_aux=True)(
            params.actor, critic, params.log_alpha, batch.observation, actor_key)
        alpha_grads = jax.grad(losses.sac_temperature_loss)(params.log_alpha, log_prob, target_entropy)
        actor_grads, alpha_grads, policy_loss, entropy = parallel.pmean_batch_then_device(
            (actor_grads, alpha_grads, policy_loss, -jnp.mean(log_prob)))
        actor, actor_opt = continuous_control.gradient_step(
            update_fns.actor, params.actor, actor_grads, opt_states.actor)
        log_alpha, alpha_opt = continuous_control.gradient_step(
            update_fns.alpha, params.log_alpha, alpha_grads, opt_states.alpha)

        critic_target = target_networks.update_target(critic, params.critic.target, update_count + 1, float(system.tau),
                                              int(system.target_update_period))
        params = SACParams(actor, OnlineAndTarget(critic, critic_target), log_alpha)
        metrics = {**metrics, "actor_loss": policy_loss, "entropy": entropy, "alpha": jnp.exp(log_alpha)}
        return off_policy.BatchUpdate(params, SACOptStates(actor_opt, critic_opt, alpha_opt), metrics, priorities)

    return learn_from_batch


def learner_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget) -> SystemSetup:
    system = config.system
    action_space = continuous_control.require_continuous_actions(env, config, "SAC")
    actor = build_actor(config.network, action_space)
    critics = continuous_control.critic_ensemble(build_state_action_critic(config.network), int(system.num_critics))

    init_key, key = host_keys.split(key)
    actor_params, critic_params = continuous_control.init_actor_and_critics(actor, critics, env, init_key)
    params = SACParams(actor=actor_params, critic=OnlineAndTarget(critic_params, critic_params),
                       log_alpha=jnp.log(jnp.asarray(float(system.init_alpha), jnp.float32)))

    actor_optimizer, critic_optimizer, alpha_optimizer = (
        continuous_control.optimizer(learning_rate, config, budget)
        for learning_rate in (system.actor_lr, system.q_lr, system.alpha_lr))
    opt_states = SACOptStates(actor_optimizer.init(params.actor), critic_optimizer.init(critic_params),
                              alpha_optimizer.init(params.log_alpha))
    update_fns = SACUpdateFns(actor_optimizer.update, critic_optimizer.update, alpha_optimizer.update)
    return off_policy.make_system_setup(
        env, key, config, budget,
        params=params, opt_states=opt_states,
        act=make_act(actor.apply),
        learn_from_batch=make_learn_from_batch(actor.apply, critics.apply, update_fns, config,
                                        target_entropy=-float(system.target_entropy_scale) * action_space.action_dim),
        batches=replay.n_step_batches(system),
        eval_policy=actor_policy(actor.apply, greedy=bool(config.arch.evaluation_greedy)),
        eval_params=lambda slot: (slot.params.actor, slot.obs_norm),
        prioritized=bool(system.prioritized_replay),
    )


def run_experiment(config: DictConfig) -> float:
    return experiment.run(config, learner_setup, algorithm=str(config.system.system_name))
