"""MPO, maximum a posteriori policy optimisation (Abdolmaleki et al., 2018), for discrete and continuous actions.

Off-policy, on the replay skeleton (off_policy.py). Each gradient step on a batch of n-step transitions:
1. Q-network: regress Q(s, a) on r + γⁿ E_{a'~π_target(s')} Q_target(s', a'), the expectation exact over every
   action when discrete and a mean over `num_sampled_actions` samples when continuous (no Retrace: the replay
   stores no behaviour log-probabilities).
2. E-step: the target policy's candidate actions at s (every action, weighted by its probability, when
   discrete; `num_sampled_actions` samples when continuous) are reweighted by exp(Q(s, a) / η), with the
   (just updated) online Q-network; the temperature η minimises its dual (ops/mpo.py).
3. M-step: weighted maximum likelihood of the candidates under KL bounds against the target policy, one
   categorical KL or decoupled KLs of the tanh-Gaussian's mean and scale, their multipliers learnt in log space
   (systems/dual_variables.py, shared with V-MPO).
4. Targets: the target policy and the target Q-network follow their online networks by the one target rule
   (stoix_like/learner/target_networks.py).

The heads follow the action space: a categorical or tanh-Gaussian policy, Q(s, ·) or Q(s, a) (the action a
normalised to [-1, 1], as for SAC).
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Tuple

import jax
import jax.numpy as jnp
from omegaconf import DictConfig

from stoix_like.runtime import compilation_cache, host_keys, parallel
from stoix_like.run import experiment
from stoix_like.learner import replay, target_networks
from stoix_like.learner.budget import Budget
from stoix_like.envs.environment import ContinuousActionSpace, Environment, example_observation
from stoix_like.learner.evaluator import actor_policy
from stoix_like.networks.base import FeedForwardActor, FeedForwardQNetwork, FeedForwardStateActionCritic
from stoix_like.networks.distributions import TanhGaussian
from stoix_like.networks.factory import build_action_value_network, build_actor
from stoix_like.ops import losses
from stoix_like.ops import mpo as mpo_ops
from stoix_like.ops.indexing import taken_action_values
from stoix_like.learner.replay import Transition
from stoix_like.learner.system_contract import SystemSetup
from stoix_like.systems import dual_variables, off_policy
from stoix_like.systems.actor_critic import continuous_control
from stoix_like.types import Observation, OnlineAndTarget, OptState, Params
from stoix_like.systems.dual_variables import ActorCriticDualUpdateFns, DualVariables


class MPOParams(NamedTuple):
    actor: OnlineAndTarget  # the target policy proposes the E-step's actions and anchors the M-step's KL bounds
    critic: OnlineAndTarget  # the q_network: Q(s, ·) for discrete actions, Q(s, a) for continuous ones
    dual: DualVariables


class MPOOptStates(NamedTuple):
    actor: OptState
    critic: OptState
    dual: OptState


def make_act(actor_apply: Callable) -> off_policy.ActFn:
    """Acts with a sample of the online policy; a continuous action is stored squashed, as the Q-network sees it."""

    def act(params: MPOParams, observation: Observation, key: jax.Array, global_env_steps: jax.Array):
        del global_env_steps  # the initial policy is broad: warm-up needs no uniform actions
        policy = actor_apply(params.actor.online, observation)
        action = policy.sample(key)
        stored = policy.squash(action) if isinstance(policy, TanhGaussian) else action
        return stored, policy.to_env_action(action)

    return act


class ActionValues:
    """The q_network of either action kind, with what MPO asks of it: the value of a stored action, and the values
    of a policy's candidate actions with their prior log-weights."""

    def __init__(self, critic_apply: Callable, continuous: bool, num_sampled_actions: int):
        self.critic_apply, self.continuous, self.num_sampled_actions = critic_apply, continuous, num_sampled_actions

    def of_stored(self, params: Params, observation: Observation, action: jax.Array) -> jax.Array:
        """`[B]` Q(s, a) of replayed actions."""
        if self.continuous:
            return self.critic_apply(params, observation, action)
        return taken_action_values(self.critic_apply(params, observation), action)

    def of_candidates(self, params: Params, observation: Observation, policy: Any, key: jax.Array
                      ) -> Tuple[jax.Array, jax.Array, jax.Array]:
        """The policy's candidate actions `[K, B, ...]` at `observation`, their values `[B, K]` and log-weights
        `[B, K]` (each row a distribution): K samples of weight 1/K when continuous (pre-tanh; the Q-network sees
        them squashed), every action with its probability when discrete."""
        if self.continuous:
            candidates = jax.vmap(policy.sample)(jax.random.split(key, self.num_sampled_actions))  # [K, B, D]
            repeated = jax.tree_util.tree_map(
                lambda x: jnp.broadcast_to(x, (self.num_sampled_actions,) + x.shape), observation)
            q_values = self.critic_apply(params, repeated, policy.squash(candidates)).T
            log_prior = jnp.full(q_values.shape, -math.log(self.num_sampled_actions), q_values.dtype)
            return candidates, q_values, log_prior
        q_values = self.critic_apply(params, observation)  # [B, A]
        num_actions = q_values.shape[-1]
        candidates = jnp.broadcast_to(jnp.arange(num_actions)[:, None], (num_actions, q_values.shape[0]))
        return candidates, q_values, jax.nn.log_softmax(policy.logits, axis=-1)


def make_learn_from_batch(actor_apply: Callable, action_values: ActionValues, update_fns: ActorCriticDualUpdateFns,
                         config: DictConfig, kl_bounds: jax.Array) -> off_policy.LearnFromBatch:
    """The skeleton's `learn_from_batch`: the Q-network step, then the E- and M-steps with the dual variables,
    then the target_networks."""
    system = config.system
    temperature_kl_bound = float(system.temperature_kl_bound)

    def critic_loss(critic_params, params: MPOParams, batch: Transition, weights, key):
        next_policy = actor_apply(params.actor.target, batch.next_observation)
        _, next_q, log_prior = action_values.of_candidates(params.critic.target, batch.next_observation, next_policy,
                                                           key)
        next_value = jnp.sum(jnp.exp(log_prior) * next_q, axis=-1)  # E_{a'~π_target} Q_target(s', a')
        target = jax.lax.stop_gradient(batch.reward + batch.discount * next_value)
        q_value = action_values.of_stored(critic_params, batch.observation, batch.action)
        td_error = target - q_value
        loss = jnp.mean(weights * losses.l2_loss(td_error))
        return loss, (jnp.abs(td_error), {"critic_loss": loss, "q_value": jnp.mean(q_value)})

    def policy_and_dual_loss(actor_params, dual, critic_params, params: MPOParams, observation: Observation, key):
        target_policy = actor_apply(params.actor.target, observation)
        online_policy = actor_apply(actor_params, observation)
        candidates, q_values, log_prior = action_values.of_candidates(critic_params, observation, target_policy, key)
        temperature_loss, weights = mpo_ops.mpo_temperature_loss(q_values, log_prior, dual.log_temperature,
                                                                 temperature_kl_bound)
        log_probs = jax.vmap(lambda action: dual_variables.decoupled_log_prob(online_policy, target_policy, action)
                             )(candidates).T  # [B, K]
        m_step_loss, metrics = dual_variables.m_step_loss(log_probs, weights, online_policy, target_policy,
                                                          dual.log_kl_multipliers, kl_bounds)
        metrics = {**metrics, "temperature": mpo_ops.multiplier_from_log(dual.log_temperature),
                   "temperature_loss": temperature_loss}
        return m_step_loss + temperature_loss, metrics

    def learn_from_batch(params: MPOParams, opt_states: MPOOptStates, batch: Transition, weights, key, update_count):
        critic_key, policy_key = jax.random.split(key)
        critic, critic_opt, priorities, critic_metrics = continuous_control.critic_step(
            critic_loss, update_fns.critic, params.critic.online, opt_states.critic, params, batch, weights, critic_key)

        (actor_grads, dual_grads), policy_metrics = jax.grad(policy_and_dual_loss, argnums=(0, 1), has_aux=True)(
            params.actor.online, params.dual, critic, params, batch.observation, policy_key)
        actor_grads, dual_grads, policy_metrics = parallel.pmean_batch_then_device(
            (actor_grads, dual_grads, policy_metrics))
        actor, actor_opt = continuous_control.gradient_step(
            update_fns.actor, params.actor.online, actor_grads, opt_states.actor)
        dual, dual_opt = dual_variables.dual_step(update_fns.dual, params.dual, dual_grads, opt_states.dual)

        step, tau, period = update_count + 1, float(system.tau), int(system.target_update_period)
        params = MPOParams(
            actor=OnlineAndTarget(actor, target_networks.update_target(actor, params.actor.target, step, tau, period)),
            critic=OnlineAndTarget(critic, target_networks.update_target(critic, params.critic.target, step, tau, period)),
            dual=dual)
        return off_policy.BatchUpdate(params, MPOOptStates(actor_opt, critic_opt, dual_opt),
                                      {**critic_metrics, **policy_metrics}, priorities)

    return learn_from_batch


def init_networks(actor: FeedForwardActor, critic: FeedForwardQNetwork | FeedForwardStateActionCritic, env: Environment,
                  key: jax.Array) -> Tuple[Params, Params]:
    """The actor's and the q_network's initial parameters, in one program compiled once per process."""
    action_space = env.action_space

    def init(key: jax.Array, observation: Observation) -> Tuple[Params, Params]:
        actor_key, critic_key = jax.random.split(key)
        if isinstance(action_space, ContinuousActionSpace):
            critic_params = critic.init(critic_key, observation, jnp.zeros((1, action_space.action_dim), jnp.float32))
        else:
            critic_params = critic.init(critic_key, observation)
        return actor.init(actor_key, observation), critic_params

    jitted = compilation_cache.jit_once(("mpo_init", repr(actor), repr(critic)), init)
    return jitted(key, example_observation(env))


def learner_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget) -> SystemSetup:
    system = config.system
    action_space = env.action_space
    kl_bounds = dual_variables.kl_bounds(config, action_space, continuous_only=("num_sampled_actions",))
    continuous = isinstance(action_space, ContinuousActionSpace)
    actor = build_actor(config.network, action_space)
    critic = build_action_value_network(config.network, action_space)

    init_key, key = host_keys.split(key)
    actor_params, critic_params = init_networks(actor, critic, env, init_key)
    params = MPOParams(actor=OnlineAndTarget(actor_params, actor_params),
                       critic=OnlineAndTarget(critic_params, critic_params),
                       dual=dual_variables.initial_dual_variables(system, int(kl_bounds.shape[0])))

    actor_optimizer, critic_optimizer, dual_optimizer = (
        continuous_control.optimizer(learning_rate, config, budget)
        for learning_rate in (system.actor_lr, system.q_lr, system.dual_lr))
    opt_states = MPOOptStates(actor_optimizer.init(actor_params), critic_optimizer.init(critic_params),
                              dual_optimizer.init(params.dual))
    update_fns = ActorCriticDualUpdateFns(actor_optimizer.update, critic_optimizer.update, dual_optimizer.update)
    action_values = ActionValues(critic.apply, continuous, int(system.num_sampled_actions) if continuous else 0)
    return off_policy.make_system_setup(
        env, key, config, budget,
        params=params, opt_states=opt_states,
        act=make_act(actor.apply),
        learn_from_batch=make_learn_from_batch(actor.apply, action_values, update_fns, config, kl_bounds),
        batches=replay.n_step_batches(system),
        eval_policy=actor_policy(actor.apply, greedy=bool(config.arch.evaluation_greedy)),
        eval_params=lambda slot: (slot.params.actor.online, slot.obs_norm),
        prioritized=bool(system.prioritized_replay),
    )


def run_experiment(config: DictConfig) -> float:
    return experiment.run(config, learner_setup, algorithm=str(config.system.system_name))
