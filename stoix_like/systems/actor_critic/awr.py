"""AWR, advantage-weighted regression (Peng et al., 2019), off-policy on replayed sequences, for discrete and
continuous actions.

Each gradient step samples `total_batch_size` sequences of `sequence_length` consecutive steps
(`replay.sequence_batches`, time-major) and, on them:
  * the critic V regresses on TD(λ) targets over each sequence (`ops.returns.lambda_returns`: the recursion stops
    at episode ends, terminations drop the bootstrap, truncations and the sequence's last step bootstrap from V of
    the true successor observation);
  * the actor maximises the log-likelihood of the replayed actions weighted by min(exp(A / β), w_max), with
    A = G^λ − V(s) standardised over the batch as the paper's code does (`ops.losses.advantage_weights`).
The paper computes both from one critic per iteration; here advantages use the critic's values before this step's
critic update, so actor and critic gradients come from one pass over the batch.

The policy head follows the action space: categorical, or tanh-Gaussian, whose replayed action is the pre-tanh
sample so that log π(a|s) of a replayed action stays exact (networks/distributions.py). Replay, warm-up and
observation normalisation are the off-policy skeleton's (off_policy.py).
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
from omegaconf import DictConfig

from stoix_like.run import experiment
from stoix_like.runtime import host_keys, parallel
from stoix_like.learner import replay
from stoix_like.learner.budget import Budget
from stoix_like.runtime.compilation_cache import jitted_inits
from stoix_like.envs.environment import Environment, example_observation
from stoix_like.learner.evaluator import actor_policy
from stoix_like.networks.factory import build_actor, build_critic
from stoix_like.ops import losses
from stoix_like.ops.returns import lambda_returns
from stoix_like.learner.optim import make_optimizer
from stoix_like.learner.replay import Transition
from stoix_like.learner.system_contract import SystemSetup
from stoix_like.systems import off_policy
from stoix_like.systems.actor_critic.continuous_control import gradient_step
from stoix_like.types import ActorCriticOptStates, ActorCriticParams, ActorCriticUpdateFns


def make_act(actor_apply: Callable) -> off_policy.ActFn:
    """Sample from the policy; replay keeps the sampled action (the pre-tanh one for a tanh-Gaussian)."""

    def act(params: ActorCriticParams, observation, key: jax.Array, global_env_steps: jax.Array):
        del global_env_steps  # the initial policy is already broad: warm-up needs no uniform actions
        policy = actor_apply(params.actor, observation)
        action = policy.sample(key)
        return action, policy.to_env_action(action)

    return act


def flatten_time_and_batch(tree):
    """(L, B, ...) -> (L·B, ...): the losses are per replayed step."""
    return jax.tree_util.tree_map(lambda x: x.reshape((-1,) + x.shape[2:]), tree)


def sequence_lambda_returns(sequences: Transition, next_values: jax.Array, gamma: float, gae_lambda: float
                            ) -> jax.Array:
    """TD(λ) targets [L, B] of replayed time-major sequences, from V of each step's true successor [L, B].

    A termination (discount 0) drops the bootstrap; any episode end (`last`) stops the recursion there, a
    truncation still bootstrapping from its own successor; the sequence's last step bootstraps from its successor.
    """
    return lambda_returns(sequences.reward, gamma * sequences.discount, jax.lax.stop_gradient(next_values),
                          jnp.logical_not(sequences.last), gae_lambda)


def make_learn_from_batch(actor_apply: Callable, critic_apply: Callable, update_fns: ActorCriticUpdateFns,
                         config: DictConfig) -> off_policy.LearnFromBatch:
    """The skeleton's `learn_from_batch` on time-major sequences [L, B, ...]: a critic and an actor step."""
    system = config.system
    gamma, gae_lambda = float(system.gamma), float(system.gae_lambda)

    def critic_loss(critic_params, sequences: Transition):
        values = critic_apply(critic_params, sequences.observation)  # [L, B]
        next_values = critic_apply(critic_params, sequences.next_observation)  # of the true successors
        targets = sequence_lambda_returns(sequences, next_values, gamma, gae_lambda)
        loss = jnp.mean(losses.l2_loss(targets - values))
        return loss, (jax.lax.stop_gradient(targets - values), values)

    def actor_loss(actor_params, steps: Transition, advantages: jax.Array, key: jax.Array):
        policy = actor_apply(actor_params, steps.observation)
        weights = losses.advantage_weights(advantages, float(system.advantage_temperature),
                                           float(system.max_advantage_weight), bool(system.standardize_advantages))
        loss = losses.weighted_log_likelihood_loss(policy.log_prob(steps.action), weights)
        metrics = {"actor_loss": loss, "entropy": jnp.mean(policy.entropy(seed=key)),
                   "mean_weight": jnp.mean(weights),
                   "clipped_weights": jnp.mean((weights >= float(system.max_advantage_weight)).astype(jnp.float32))}
        return loss, metrics

    def learn_from_batch(params: ActorCriticParams, opt_states: ActorCriticOptStates, sequences: Transition,
                         weights, key, update_count):
        del weights, update_count  # no prioritized replay, no target network
        (value_loss, (advantages, values)), critic_grads = jax.value_and_grad(critic_loss, has_aux=True)(
            params.critic, sequences)
        actor_grads, actor_metrics = jax.grad(actor_loss, has_aux=True)(
            params.actor, flatten_time_and_batch(sequences), advantages.reshape(-1), key)
        metrics = {**actor_metrics, "critic_loss": value_loss, "value": jnp.mean(values),
                   "advantage_std": jnp.std(advantages)}
        actor_grads, critic_grads, metrics = parallel.pmean_batch_then_device((actor_grads, critic_grads, metrics))
        actor, actor_opt = gradient_step(update_fns.actor, params.actor, actor_grads, opt_states.actor)
        critic, critic_opt = gradient_step(update_fns.critic, params.critic, critic_grads, opt_states.critic)
        no_priorities = jnp.zeros(sequences.reward.shape[1:], jnp.float32)  # [B]; AWR samples uniformly
        return off_policy.BatchUpdate(ActorCriticParams(actor, critic), ActorCriticOptStates(actor_opt, critic_opt),
                                      metrics, no_priorities)

    return learn_from_batch


def learner_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget) -> SystemSetup:
    system = config.system
    actor = build_actor(config.network, env.action_space)
    critic = build_critic(config.network)

    init_key, key = host_keys.split(key)
    actor_key, critic_key = host_keys.split(init_key)
    observation = example_observation(env)
    params = ActorCriticParams(*jitted_inits(actor, critic)((actor_key, critic_key), observation))

    optimizer_steps = budget.num_updates * int(system.gradient_steps_per_update)
    actor_optimizer, critic_optimizer = (
        make_optimizer(learning_rate, system.max_grad_norm, optimizer_steps, system.decay_learning_rates)
        for learning_rate in (system.actor_lr, system.critic_lr))
    opt_states = ActorCriticOptStates(actor_optimizer.init(params.actor), critic_optimizer.init(params.critic))
    update_fns = ActorCriticUpdateFns(actor_optimizer.update, critic_optimizer.update)
    return off_policy.make_system_setup(
        env, key, config, budget,
        params=params, opt_states=opt_states,
        act=make_act(actor.apply),
        learn_from_batch=make_learn_from_batch(actor.apply, critic.apply, update_fns, config),
        batches=replay.sequence_batches(system),
        eval_policy=actor_policy(actor.apply, greedy=bool(config.arch.evaluation_greedy)),
        eval_params=lambda slot: (slot.params.actor, slot.obs_norm),
    )


def run_experiment(config: DictConfig) -> float:
    return experiment.run(config, learner_setup, algorithm=str(config.system.system_name))
