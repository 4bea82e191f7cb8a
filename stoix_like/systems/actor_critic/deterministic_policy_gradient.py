"""The deterministic-policy-gradient learner that DDPG, TD3 and D4PG share.

A deterministic actor a = μ(s) in [-1, 1] ascends its critic's value of (s, μ(s)) (Silver et al., 2014);
acting adds Gaussian noise, and the warm-up acts uniformly at random so the first batches cover the box.
The systems differ only in their critic, handed to this module as two functions:

    critic_loss(critic_params, target_critic_params, batch, next_action, weights) -> (loss, (priorities, metrics))
    policy_value(critic_params, observation, action) -> [B]        (what the actor maximises)

and in four switches of `config.system`:
    num_critics          TD3: 2 (clipped double Q)      DDPG, D4PG: 1
    policy_frequency     TD3: 2 (delayed actor updates)      DDPG, D4PG: 1
    target_update_period TD3: 2 (delayed target updates, with the actor's)      DDPG, D4PG: 1
    target_policy_noise TD3: 0.2 (target-policy smoothing, clipped to ±target_noise_clip)    DDPG, D4PG: 0
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
from omegaconf import DictConfig

from stoix_like.runtime import host_keys, parallel
from stoix_like.learner import replay, target_networks
from stoix_like.learner.budget import Budget
from stoix_like.envs.environment import Environment
from stoix_like.learner.evaluator import actor_policy
from stoix_like.learner.exploration import perturb_action
from stoix_like.networks.factory import build_actor, build_state_action_critic
from stoix_like.learner.replay import Transition
from stoix_like.learner.system_contract import SystemSetup
from stoix_like.systems import off_policy
from stoix_like.systems.actor_critic import continuous_control
from stoix_like.types import ActorCriticOptStates, ActorCriticParams, ActorCriticUpdateFns, OnlineAndTarget

# make_learn_from_batch(actor_apply, critic_apply, update_fns, config) -> learn_from_batch, as each system defines it
GetLearnFromBatch = Callable[[Callable, Callable, ActorCriticUpdateFns, DictConfig], off_policy.LearnFromBatch]


def make_act(actor_apply: Callable, system: DictConfig, warmup_steps: int):
    exploration_noise = float(system.exploration_noise)

    def act(params: ActorCriticParams, observation, key: jax.Array, global_env_steps: jax.Array):
        noise_key, uniform_key = jax.random.split(key)
        policy = actor_apply(params.actor.online, observation)
        explored = perturb_action(noise_key, policy.mode(), exploration_noise)
        uniform = jax.random.uniform(uniform_key, explored.shape, explored.dtype, -1.0, 1.0)
        action = jnp.where(global_env_steps < warmup_steps, uniform, explored)
        return action, policy.to_env_action(action)

    return act


def make_learn_from_batch(actor_apply: Callable, critic_loss: Callable, policy_value: Callable,
                          update_fns: ActorCriticUpdateFns, system: DictConfig) -> off_policy.LearnFromBatch:
    """The skeleton's `learn_from_batch`: a critic step, then (every `policy_frequency` steps) an actor step on
    the updated critic; every `target_update_period` steps both targets move by `tau` (target_networks.update_target)."""
    tau, target_update_period = float(system.tau), int(system.target_update_period)
    policy_frequency = int(system.policy_frequency)
    smoothing_noise, noise_clip = float(system.target_policy_noise), float(system.target_noise_clip)

    def next_action_of_target_policy(target_actor_params, next_observation, key: jax.Array) -> jax.Array:
        action = actor_apply(target_actor_params, next_observation).mode()
        if smoothing_noise > 0.0:
            # smoothing over nearby actions keeps the actor from exploiting a narrow peak of critic error
            action = perturb_action(key, action, smoothing_noise, noise_clip)
        return action

    def actor_loss(actor_params, critic_params, observation) -> jax.Array:
        action = actor_apply(actor_params, observation).mode()
        return -jnp.mean(policy_value(critic_params, observation, action))

    def learn_from_batch(params: ActorCriticParams, opt_states: ActorCriticOptStates, batch: Transition, weights,
                         key: jax.Array, update_count: jax.Array):
        next_action = next_action_of_target_policy(params.actor.target, batch.next_observation, key)
        critic, critic_opt, priorities, metrics = continuous_control.critic_step(
            critic_loss, update_fns.critic, params.critic.online, opt_states.critic, params.critic.target, batch,
            next_action, weights)

        policy_loss, actor_grads = jax.value_and_grad(actor_loss)(params.actor.online, critic, batch.observation)
        actor_grads, policy_loss = parallel.pmean_batch_then_device((actor_grads, policy_loss))
        actor, actor_opt = continuous_control.gradient_step(
            update_fns.actor, params.actor.online, actor_grads, opt_states.actor)

        # Delayed: the critic takes several steps to follow each change of the policy (TD3).
        policy_step = update_count % policy_frequency == 0
        keep_unless_policy_step = lambda new, old: jax.tree_util.tree_map(
            lambda n, o: jnp.where(policy_step, n, o), new, old)
        actor, actor_opt = keep_unless_policy_step((actor, actor_opt), (params.actor.online, opt_states.actor))
        # counted on the steps before this one, so that with target_update_period == policy_frequency (TD3) the
        # targets move on the same steps as the delayed actor
        actor_target = target_networks.update_target(actor, params.actor.target, update_count, tau, target_update_period)
        critic_target = target_networks.update_target(critic, params.critic.target, update_count, tau, target_update_period)

        params = ActorCriticParams(OnlineAndTarget(actor, actor_target), OnlineAndTarget(critic, critic_target))
        return off_policy.BatchUpdate(params, ActorCriticOptStates(actor_opt, critic_opt),
                                      {**metrics, "actor_loss": policy_loss}, priorities)

    return learn_from_batch


def make_system_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget, *,
                  make_learn_from_batch: GetLearnFromBatch, num_critics: int, algorithm: str) -> SystemSetup:
    system = config.system
    action_space = continuous_control.require_continuous_actions(env, config, algorithm)
    actor = build_actor(config.network, action_space)
    critics = continuous_control.critic_ensemble(build_state_action_critic(config.network), num_critics)

    init_key, key = host_keys.split(key)
    actor_params, critic_params = continuous_control.init_actor_and_critics(actor, critics, env, init_key)
    params = ActorCriticParams(OnlineAndTarget(actor_params, actor_params),
                               OnlineAndTarget(critic_params, critic_params))

    actor_optimizer = continuous_control.optimizer(system.actor_lr, config, budget)
    critic_optimizer = continuous_control.optimizer(system.q_lr, config, budget)
    update_fns = ActorCriticUpdateFns(actor_optimizer.update, critic_optimizer.update)
    return off_policy.make_system_setup(
        env, key, config, budget,
        params=params,
        opt_states=ActorCriticOptStates(actor_optimizer.init(actor_params), critic_optimizer.init(critic_params)),
        act=make_act(actor.apply, system, budget.warmup_steps),
        learn_from_batch=make_learn_from_batch(actor.apply, critics.apply, update_fns, config),
        batches=replay.n_step_batches(system),
        eval_policy=actor_policy(actor.apply, greedy=bool(config.arch.evaluation_greedy)),  # mode == sample here
        eval_params=lambda slot: (slot.params.actor.online, slot.obs_norm),
        prioritized=bool(system.prioritized_replay),
    )
