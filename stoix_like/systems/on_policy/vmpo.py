"""V-MPO, on-policy maximum a posteriori policy optimisation (Song et al., 2019), for discrete and continuous actions.

One update: a rollout of the online policy → truncation-correct GAE advantages and value targets (from the state
value V) → epochs × minibatches, each:
1. E-step: the minibatch's samples of highest advantage (`top_k_fraction` of them) are reweighted by
   exp(A / η); the temperature η minimises its dual (ops/mpo.py).
2. M-step: weighted maximum likelihood of those samples under KL bounds against the target ("old") policy, one
   categorical KL or decoupled KLs of the tanh-Gaussian's mean and scale, their multipliers learnt in log space
   (systems/dual_variables.py, shared with MPO).
3. V regresses on the GAE target_networks.
4. Every `target_update_period` minibatch steps the target policy moves towards the online one (the one target
   rule, stoix_like/learner/target_networks.py): with epochs × num_minibatches steps per update and tau 1, the KL bounds hold each
   update's policy near the one that collected its rollout.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Tuple

import jax
import jax.numpy as jnp
from omegaconf import DictConfig

from stoix_like.run import experiment
from stoix_like.runtime import host_keys, parallel
from stoix_like.learner import normalization, target_networks
from stoix_like.learner.budget import Budget
from stoix_like.runtime.compilation_cache import jitted_inits
from stoix_like.envs.environment import Environment, example_observation
from stoix_like.envs.wrappers import VmapWrapper
from stoix_like.learner.evaluator import actor_policy
from stoix_like.networks.factory import build_actor, build_critic
from stoix_like.ops import losses
from stoix_like.ops import mpo as mpo_ops
from stoix_like.ops.returns import truncated_gae
from stoix_like.learner.optim import make_optimizer
from stoix_like.learner.system_contract import Learner, LearnerOutput, SystemSetup
from stoix_like.systems import dual_variables
from stoix_like.systems.on_policy import rollout
from stoix_like.types import ActorCriticApplyFns, Array, OnlineAndTarget, OnPolicyLearnerState, OptState, Params, RolloutStep
from stoix_like.systems.dual_variables import ActorCriticDualUpdateFns, DualVariables


class VMPOParams(NamedTuple):
    actor: OnlineAndTarget  # the target ("old") policy anchors the KL bounds; it moves every target_update_period
    critic: Params  # the state value V
    dual: DualVariables


class VMPOOptStates(NamedTuple):
    actor: OptState
    critic: OptState
    dual: OptState
    gradient_steps: Array  # minibatch steps taken, like an optimiser's own count: the target policy's period runs on it


def get_learner_fn(env: VmapWrapper, apply_fns: ActorCriticApplyFns, update_fns: ActorCriticDualUpdateFns,
                   config: DictConfig, budget: Budget, kl_bounds: jax.Array) -> Learner:
    system = config.system
    actor_apply, critic_apply = apply_fns

    def act(params: VMPOParams, observation, key: jax.Array):
        policy = actor_apply(params.actor.online, observation)
        action = policy.sample(key)  # pre-tanh when continuous: the M-step's likelihood is exact there
        return action, policy.to_env_action(action), ()  # V is read after the rollout, batched

    def advantages_and_value_targets(state: OnPolicyLearnerState, steps: RolloutStep) -> Tuple[jax.Array, jax.Array]:
        values, next_values = rollout.step_and_successor_values(
            lambda observation: critic_apply(state.params.critic, observation), state.obs_norm, steps)
        truncated = steps.done & (steps.discount != 0.0)
        return truncated_gae(steps.reward, values, next_values, steps.done, truncated, system.gamma, system.gae_lambda)

    def policy_and_dual_loss(actor_params, dual, target_actor_params, observation, action, advantages):
        online_policy = actor_apply(actor_params, observation)
        target_policy = actor_apply(target_actor_params, observation)
        temperature_loss, weights = mpo_ops.vmpo_temperature_loss(
            advantages, dual.log_temperature, float(system.temperature_kl_bound), float(system.top_k_fraction))
        log_probs = dual_variables.decoupled_log_prob(online_policy, target_policy, action)
        m_step_loss, metrics = dual_variables.m_step_loss(log_probs[None], weights[None], online_policy,
                                                          target_policy, dual.log_kl_multipliers, kl_bounds)
        metrics = {**metrics, "temperature": mpo_ops.multiplier_from_log(dual.log_temperature),
                   "temperature_loss": temperature_loss}
        return m_step_loss + temperature_loss, metrics

    def critic_loss(critic_params, observation, value_targets):
        value_loss = jnp.mean(losses.l2_loss(value_targets - critic_apply(critic_params, observation)))
        return value_loss, {"value_loss": value_loss}

    def update_minibatch(carry, minibatch, key: jax.Array):
        del key  # the losses are deterministic given the minibatch
        params, opt_states, obs_norm = carry
        observation, action, advantages, value_targets = minibatch
        observation = normalization.normalize(obs_norm, observation)
        (actor_grads, dual_grads), policy_metrics = jax.grad(policy_and_dual_loss, argnums=(0, 1), has_aux=True)(
            params.actor.online, params.dual, params.actor.target, observation, action, advantages)
        critic_grads, critic_metrics = jax.grad(critic_loss, has_aux=True)(params.critic, observation, value_targets)
        actor_grads, dual_grads, critic_grads, metrics = parallel.pmean_batch_then_device(
            (actor_grads, dual_grads, critic_grads, {**policy_metrics, **critic_metrics}))
        actor_updates, actor_opt = update_fns.actor(actor_grads, opt_states.actor, params.actor.online)
        actor = jax.tree_util.tree_map(jnp.add, params.actor.online, actor_updates)
        critic_updates, critic_opt = update_fns.critic(critic_grads, opt_states.critic, params.critic)
        critic = jax.tree_util.tree_map(jnp.add, params.critic, critic_updates)
        dual, dual_opt = dual_variables.dual_step(update_fns.dual, params.dual, dual_grads, opt_states.dual)
        gradient_steps = opt_states.gradient_steps + 1
        target_actor = target_networks.update_target(actor, params.actor.target, gradient_steps, float(system.tau),
                                             int(system.target_update_period))
        params = VMPOParams(OnlineAndTarget(actor, target_actor), critic, dual)
        return (params, VMPOOptStates(actor_opt, critic_opt, dual_opt, gradient_steps), obs_norm), metrics

    def update_step(state: OnPolicyLearnerState) -> Tuple[OnPolicyLearnerState, LearnerOutput]:
        state, steps = rollout.collect_rollout(env, act, state, system.rollout_length, config.arch.rollout_unroll)
        advantages, value_targets = advantages_and_value_targets(state, steps)
        state, train_metrics = rollout.learn_from_rollout(
            update_minibatch, state, (steps.observation, steps.action, advantages, value_targets), steps.observation,
            system)
        return state, LearnerOutput(episode_metrics=steps.episode_metrics, train_metrics=train_metrics)

    return parallel.scan_updates(update_step, budget.updates_per_evaluation)


def learner_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget) -> SystemSetup:
    system = config.system
    kl_bounds = dual_variables.kl_bounds(config, env.action_space)
    rollout.check_minibatches(system, budget)
    actor = build_actor(config.network, env.action_space)
    critic = build_critic(config.network)

    key, actor_key, critic_key, env_key, step_key = host_keys.split(key, 5)
    observation = example_observation(env)
    actor_params, critic_params = jitted_inits(actor, critic)((actor_key, critic_key), observation)
    params = VMPOParams(actor=OnlineAndTarget(actor_params, actor_params), critic=critic_params,
                        dual=dual_variables.initial_dual_variables(system, int(kl_bounds.shape[0])))

    optimizer_steps = rollout.optimizer_steps(system, budget)
    actor_optimizer, critic_optimizer, dual_optimizer = (
        make_optimizer(learning_rate, system.max_grad_norm, optimizer_steps, system.decay_learning_rates)
        for learning_rate in (system.actor_lr, system.critic_lr, system.dual_lr))
    opt_states = VMPOOptStates(actor_optimizer.init(actor_params), critic_optimizer.init(params.critic),
                               dual_optimizer.init(params.dual), gradient_steps=jnp.zeros((), jnp.int32))
    learner_state = rollout.initial_learner_state(OnPolicyLearnerState, env, env_key, step_key, system, budget,
                                                  params=params, opt_states=opt_states)
    learner_fn = get_learner_fn(
        VmapWrapper(env), ActorCriticApplyFns(actor.apply, critic.apply),
        ActorCriticDualUpdateFns(actor_optimizer.update, critic_optimizer.update, dual_optimizer.update),
        config, budget, kl_bounds)
    return SystemSetup(
        learner_fn=learner_fn,
        learner_state=learner_state,
        eval_policy=actor_policy(actor.apply, greedy=bool(config.arch.evaluation_greedy)),
        eval_params=lambda slot: (slot.params.actor.online, slot.obs_norm),
    )


def run_experiment(config: DictConfig) -> float:
    return experiment.run(config, learner_setup, algorithm=str(config.system.system_name))
