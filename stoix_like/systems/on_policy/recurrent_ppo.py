"""Recurrent PPO: PPO's clipped objective and truncation-correct GAE, with an LSTM or GRU actor and critic.

Recurrence is a network concern (`network=lstm_rec_ppo` or `gru_rec_ppo`, networks/recurrent.py); what this
system adds to PPO is how a policy with memory acts and is replayed:

One update: roll the policy out carrying each env's hidden state (reset where an episode starts) and keeping the
hidden state the rollout started from → truncation-correct GAE → epochs × minibatches of whole env sequences (split
by env, never by step), each replayed from its stored hidden state: truncated backpropagation through time over
the rollout → PPO's actor and critic update (`policy_gradient.make_update_minibatch`, the same losses).
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from omegaconf import DictConfig

from stoix_like.run import experiment
from stoix_like.runtime import host_keys, parallel
from stoix_like.learner import normalization
from stoix_like.learner.budget import Budget
from stoix_like.runtime.compilation_cache import jitted_inits
from stoix_like.envs.environment import Environment, example_observation
from stoix_like.envs.wrappers import VmapWrapper
from stoix_like.learner.evaluator import PolicyWithMemory
from stoix_like.networks.factory import build_recurrent_actor, build_recurrent_critic
from stoix_like.networks.recurrent import Hidden, RecurrentActor, opens_episode
from stoix_like.ops.returns import truncated_gae
from stoix_like.learner.system_contract import Learner, LearnerOutput, SystemSetup
from stoix_like.systems.on_policy import policy_gradient, rollout
from stoix_like.systems.on_policy.ppo import clipped_objective
from stoix_like.types import ActorCriticApplyFns, ActorCriticOptStates, ActorCriticParams, ActorCriticTransition, ActorCriticUpdateFns, Array, EnvState, Observation, Params, PRNGKey, PyTree, TimeStep


class RecurrentLearnerState(NamedTuple):
    """An on-policy learner state whose policy remembers (recurrent PPO): `OnPolicyLearnerState`'s fields and each
    env's hidden state, carried from one rollout into the next."""

    params: ActorCriticParams
    opt_states: ActorCriticOptStates
    key: PRNGKey
    env_state: EnvState
    timestep: TimeStep
    obs_norm: PyTree  # normalization.RunningStatistics, or () when system.normalize_observations is off
    # (actor's, critic's) hidden state per env, leaves (num_envs, hidden_size); zero where one starts
    hidden: Tuple[Hidden, Hidden]


class Sequences(NamedTuple):
    """A rollout as its minibatches are cut from it: leaves lead with the env axis, so a split keeps every env's
    sequence whole with the hidden state it starts from."""

    # (actor's, critic's) hidden state when the rollout began, leaves (envs, hidden_size)
    start_hidden: Tuple[Hidden, Hidden]
    reset: Array  # (envs, T): the step opens an episode
    transitions: ActorCriticTransition  # leaves (envs, T, ...)
    advantages: Array  # (envs, T)
    targets: Array  # (envs, T)


def _one_step(observation: Observation) -> Observation:
    """A batch of observations `(B, ...)` as a sequence of one step `(1, B, ...)`."""
    return jax.tree_util.tree_map(lambda x: x[None], observation)


def _time_major(x: Array) -> Array:
    return jnp.swapaxes(x, 0, 1)


def sequence_apply(apply_fns: ActorCriticApplyFns) -> policy_gradient.MinibatchApply:
    """Replays each minibatch's sequences from their stored hidden states; the steps come out time-major,
    flattened, as the networks' heads see them."""
    actor_apply, critic_apply = apply_fns

    def observations(obs_norm: PyTree, sequences: Sequences) -> Observation:
        return normalization.normalize(
            obs_norm, jax.tree_util.tree_map(_time_major, sequences.transitions.observation))

    def actor(params: ActorCriticParams, obs_norm: PyTree, sequences: Sequences):
        _, dist = actor_apply(params.actor, sequences.start_hidden[0], observations(obs_norm, sequences),
                              _time_major(sequences.reset))
        return dist

    def critic(params: ActorCriticParams, obs_norm: PyTree, sequences: Sequences) -> Array:
        _, values = critic_apply(params.critic, sequences.start_hidden[1], observations(obs_norm, sequences),
                                 _time_major(sequences.reset))
        return values

    def steps(sequences: Sequences) -> Tuple[ActorCriticTransition, Array, Array]:
        return jax.tree_util.tree_map(lambda x: _time_major(x).reshape((-1,) + x.shape[2:]),
                                      (sequences.transitions, sequences.advantages, sequences.targets))

    return policy_gradient.MinibatchApply(actor=actor, critic=critic, steps=steps)


def get_learner_fn(env: VmapWrapper, apply_fns: ActorCriticApplyFns, update_fns: ActorCriticUpdateFns,
                   config: DictConfig, budget: Budget) -> Learner:
    system = config.system
    actor_apply, critic_apply = apply_fns
    update_minibatch = functools.partial(
        policy_gradient.make_update_minibatch(sequence_apply(apply_fns), update_fns, system,
                                              clipped_objective(system), policy_gradient.ppo_critic(system)),
        objective_state=())

    def act(state: RecurrentLearnerState, observation: Observation, key: jax.Array):
        actor_hidden, critic_hidden = state.hidden
        reset = opens_episode(state.timestep)[None]
        actor_hidden, dist = actor_apply(state.params.actor, actor_hidden, _one_step(observation), reset)
        critic_hidden, value = critic_apply(state.params.critic, critic_hidden, _one_step(observation), reset)
        action = dist.sample(key)
        recorded = {"value": value, "log_prob": dist.log_prob(action), "behaviour": dist.parameters(),
                    "reset": reset[0], "critic_hidden": critic_hidden}
        return state._replace(hidden=(actor_hidden, critic_hidden)), action, dist.to_env_action(action), recorded

    def successor_values(critic_params: Params, obs_norm: PyTree, critic_hidden: PyTree, next_observation: Observation):
        """V of each step's true successor, read by the critic from its hidden state after that step (never a
        reset: the successor belongs to the same episode), in one batched pass over the (T × envs) steps."""
        flat = lambda x: x.reshape((1, -1) + x.shape[2:])  # (T, envs, ...) -> one step of T · envs sequences
        hidden = jax.tree_util.tree_map(lambda h: h.reshape((-1,) + h.shape[2:]), critic_hidden)
        observation = jax.tree_util.tree_map(flat, normalization.normalize(obs_norm, next_observation))
        no_reset = jnp.zeros(observation.step_count.shape, bool)
        _, values = critic_apply(critic_params, hidden, observation, no_reset)
        return values.reshape(next_observation.step_count.shape)

    def update_step(state: RecurrentLearnerState) -> Tuple[RecurrentLearnerState, LearnerOutput]:
        start_hidden = state.hidden
        state, steps = rollout.collect_rollout_from_state(env, act, state, system.rollout_length,
                                                           config.arch.rollout_unroll)
        next_values = successor_values(state.params.critic, state.obs_norm, steps.policy_extras["critic_hidden"],
                                       steps.next_observation)
        traj = policy_gradient.transitions(steps, steps.policy_extras["value"], next_values,
                                           system.reward_scale)
        advantages, targets = truncated_gae(
            traj.reward, traj.value, traj.next_value, traj.done, traj.truncated, system.gamma, system.gae_lambda)
        sequences = Sequences(start_hidden, *jax.tree_util.tree_map(
            _time_major, (steps.policy_extras["reset"], traj._replace(episode_metrics={}), advantages, targets)))
        state, train_metrics = rollout.learn_from_rollout(update_minibatch, state, sequences, traj.observation, system,
                                                          split=rollout.shuffled_env_minibatches)
        return state, LearnerOutput(episode_metrics=traj.episode_metrics, train_metrics=train_metrics)

    return parallel.scan_updates(update_step, budget.updates_per_evaluation)


def recurrent_actor_policy(actor: RecurrentActor, greedy: bool) -> PolicyWithMemory:
    """The eval policy: eval params are `(actor params, obs_norm)`, and each eval env carries its actor's hidden
    state through its episode."""
    actor_apply: Callable[..., tuple] = actor.apply  # flax types apply's result loosely; ours is (hidden, dist)

    def act(eval_params: Tuple[Params, PyTree], observation: Observation, reset: Array, hidden: Hidden, key: jax.Array):
        actor_params, obs_norm = eval_params
        hidden, dist = actor_apply(actor_params, hidden, _one_step(normalization.normalize(obs_norm, observation)),
                                   reset[None])
        action = dist.mode() if greedy else dist.sample(key)
        return dist.to_env_action(action), hidden

    return PolicyWithMemory(initial_memory=actor.recurrent_core.initial_hidden, act=act)


def learner_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget) -> SystemSetup:
    system = config.system
    rollout.check_env_minibatches(system, budget)
    actor = build_recurrent_actor(config.network, env.action_space)
    critic = build_recurrent_critic(config.network)

    key, actor_key, critic_key, env_key, step_key = host_keys.split(key, 5)
    observation, reset = _one_step(example_observation(env)), np.ones((1, 1), bool)
    own_hidden = ((actor.recurrent_core.initial_hidden(1, on_host=True),),
                  (critic.recurrent_core.initial_hidden(1, on_host=True),))
    params = ActorCriticParams(*jitted_inits(actor, critic)((actor_key, critic_key), observation, reset,
                                                            own_inputs=own_hidden))
    opt_states, update_fns = policy_gradient.actor_critic_optimizers(system, budget, params)
    hidden = (actor.recurrent_core.initial_hidden(budget.num_envs, on_host=True),
              critic.recurrent_core.initial_hidden(budget.num_envs, on_host=True))
    learner_state = rollout.initial_learner_state(RecurrentLearnerState, env, env_key, step_key, system, budget,
                                                  params=params, opt_states=opt_states, hidden=hidden)
    learner_fn = get_learner_fn(VmapWrapper(env), ActorCriticApplyFns(actor.apply, critic.apply), update_fns, config,
                                budget)
    return SystemSetup(
        learner_fn=learner_fn,
        learner_state=learner_state,
        eval_policy=recurrent_actor_policy(actor, greedy=bool(config.arch.evaluation_greedy)),
        eval_params=policy_gradient.eval_params,  # the actor and observation statistics, as every actor-critic
    )


def run_experiment(config: DictConfig) -> float:
    return experiment.run(config, learner_setup, algorithm=str(config.system.system_name))
