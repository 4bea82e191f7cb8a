"""The off-policy skeleton every replay-based system shares.

One update: act for `rollout_length` steps into the replay buffer → `gradient_steps_per_update` gradient steps,
each on a sampled batch (`total_batch_size` items over all devices and batch slots). An algorithm supplies how to
act (`ActFn`), what its batches are (a `replay.BatchView`: n-step transitions, or whole time-major sequences) and
how to learn from a batch (`LearnFromBatch`); `get_learner_fn` builds the learner from them.

Warm-up steps (`make_warmup_fn`) fill the buffer before learning; they count in the step budget.

A recurrent network acts through `RecurrentActing`: each env's hidden state travels in the learner state
(`memory`), is reset where an episode starts, and is stored with every step, so a replayed sequence starts from the
state its first step was acted from (R2D2). A feed-forward `ActFn` is the same with an empty memory.
"""

from __future__ import annotations

from typing import Callable, Dict, NamedTuple, Optional, Protocol, Tuple, Union

import jax
import jax.numpy as jnp
import numpy as np
from flashbax.buffers.trajectory_buffer import TrajectoryBuffer, TrajectoryBufferState
from omegaconf import DictConfig

from stoix_like.runtime import compilation_cache, host_keys, parallel
from stoix_like.learner import normalization, replay
from stoix_like.learner.budget import Budget
from stoix_like.envs.environment import Environment, example_timestep
from stoix_like.envs.wrappers import VmapWrapper
from stoix_like.errors import ConfigError
from stoix_like.learner.evaluator import EvalPolicy
from stoix_like.networks.recurrent import opens_episode
from stoix_like.ops import packing
from stoix_like.learner.system_contract import Learner, LearnerOutput, SystemSetup
from stoix_like.systems import slot_state
from stoix_like.types import Array, EnvState, Observation, OptState, Params, PRNGKey, PyTree, TimeStep
from stoix_like.runtime.threefry_lowering import unrolled_threefry


class OffPolicyLearnerState(NamedTuple):
    """An off-policy learner's state: the replay buffer travels with it (vmapped, pmapped, checkpointed)."""

    params: Params
    opt_states: OptState
    buffer_state: TrajectoryBufferState  # flashbax's (a PrioritisedTrajectoryBufferState under prioritized replay)
    key: PRNGKey
    env_state: EnvState
    timestep: TimeStep
    obs_norm: PyTree  # normalization.RunningStatistics, or () when system.normalize_observations is off
    env_steps: Array  # env steps taken by this (device, batch) slot, all its envs together
    update_count: Array  # gradient steps taken: drives periodic target updates
    # a recurrent actor's hidden state, one row per env, carried across updates and checkpointed; () when
    # feed-forward
    memory: PyTree = ()

# act(params, normalised observation [num_envs, ...], key, global_env_steps) -> (stored_action, env_action); the
# stored action is any pytree with a leading [num_envs] axis (MuZero's carries its search's policy and value)
ActFn = Callable[[Params, Observation, jax.Array, jax.Array], Tuple[jax.Array, jax.Array]]


class RecurrentActing(NamedTuple):
    """How a network with memory acts: its hidden state per env, carried from step to step."""

    initial_memory: Callable[[int], PyTree]  # envs -> the hidden state an episode starts from, one row per env
    # act(params, normalised observation [num_envs, ...], reset [num_envs], memory, key, global_env_steps)
    #   -> (stored_action, env_action, memory as it entered the step (reset applied: what is stored), memory after)
    act: Callable[[Params, Observation, jax.Array, PyTree, jax.Array, jax.Array],
                  Tuple[jax.Array, jax.Array, PyTree, PyTree]]


def _recurrent(act: Union[ActFn, RecurrentActing]) -> RecurrentActing:
    """A feed-forward `ActFn` as acting with an empty memory, so the rollout runs both the same way."""
    if isinstance(act, RecurrentActing):
        return act

    def act_without_memory(params, observation, reset, memory, key, global_env_steps):
        stored_action, env_action = act(params, observation, key, global_env_steps)
        return stored_action, env_action, memory, memory

    return RecurrentActing(initial_memory=lambda num_envs: (), act=act_without_memory)


class BatchUpdate(NamedTuple):
    """What one gradient step on a sampled batch gives back."""

    params: Params
    opt_states: OptState
    metrics: Dict[str, jax.Array]
    priorities: jax.Array  # [B]: the new replay priorities of the sampled transitions (unused without PER)


class LearnFromBatch(Protocol):
    """One gradient step (and target update) on a batch, what the system's `replay.BatchView` made of the sampled
    sequences (n-step transitions [B, ...], or time-major sequences [L, B, ...]); `weights` [B] importance-weight
    the sampled items (all ones without prioritized replay)."""

    def __call__(self, params: Params, opt_states: OptState, batch: replay.Transition, weights: jax.Array, key: jax.Array,
                 update_count: jax.Array, /) -> BatchUpdate: ...


RolloutFn = Callable[[OffPolicyLearnerState, int],
                     Tuple[OffPolicyLearnerState, Dict[str, jax.Array], replay.Transition]]
# acting_metrics(the rollout just acted, time-major (T, num_envs, ...)) -> scalars logged beside the train metrics
ActingMetrics = Callable[[replay.Transition], Dict[str, jax.Array]]


def make_rollout(env: VmapWrapper, buffer: TrajectoryBuffer, act: Union[ActFn, RecurrentActing], config: DictConfig,
                 budget: Budget) -> RolloutFn:
    """`rollout(state, length)`: act `length` steps into the buffer, then move the observation statistics;
    returns the state, the steps' episode metrics and the steps themselves."""
    system = config.system
    slots = budget.n_devices * budget.update_batch_size
    acting = _recurrent(act)

    def rollout(state: OffPolicyLearnerState, length: int
                ) -> Tuple[OffPolicyLearnerState, Dict[str, jax.Array], replay.Transition]:
        def env_step(state: OffPolicyLearnerState):
            key, act_key = jax.random.split(state.key)
            observation = state.timestep.observation
            stored_action, env_action, entered_memory, memory = acting.act(
                state.params, normalization.normalize(state.obs_norm, observation), opens_episode(state.timestep),
                state.memory, act_key, state.env_steps * slots)
            env_state, timestep = env.step(state.env_state, env_action)
            transition = replay.Transition(
                observation=observation,  # stored raw: normalised with the statistics current at sampling time
                action=stored_action,
                reward=timestep.reward,
                discount=timestep.discount,
                last=timestep.last(),
                next_observation=timestep.extras["next_obs"],
                memory=entered_memory,
            )
            state = state._replace(key=key, env_state=env_state, timestep=timestep, memory=memory,
                                   env_steps=state.env_steps + budget.num_envs)
            return state, (transition, timestep.extras["episode_metrics"])

        # each step's record written in one operation rather than one per field (ops/packing.py says why)
        state, (traj, episode_metrics) = packing.scan_records(env_step, state, length, config.arch.rollout_unroll)
        buffer_state = replay.add_rollout(buffer, state.buffer_state, traj)
        obs_norm = state.obs_norm
        if system.normalize_observations:
            obs_norm = normalization.update(obs_norm, traj.observation.agent_view)
        return state._replace(buffer_state=buffer_state, obs_norm=obs_norm), episode_metrics, traj

    return rollout


def get_learner_fn(env: VmapWrapper, buffer: TrajectoryBuffer, act: Union[ActFn, RecurrentActing], learn_from_batch: LearnFromBatch,
                   config: DictConfig, budget: Budget, batches: replay.BatchView, prioritized: bool = False,
                   acting_metrics: Optional[ActingMetrics] = None) -> Learner:
    """The learner, per device (vmapped over the update batch). `acting_metrics`, if given, reports on each
    rollout (what a search-based actor logs of its searches)."""
    system = config.system
    rollout = make_rollout(env, buffer, act, config, budget)

    def learn_step(state: OffPolicyLearnerState, _: None):
        key, sample_key, learn_key = jax.random.split(state.key, 3)
        sample = buffer.sample(state.buffer_state, sample_key)
        batch = batches.to_batch(sample.experience)
        batch = batch._replace(
            observation=normalization.normalize(state.obs_norm, batch.observation),
            next_observation=normalization.normalize(state.obs_norm, batch.next_observation),
        )
        buffer_state = state.buffer_state
        if prioritized:
            # importance weights undo the bias of prioritized sampling; normalised by the max for stability
            weights = (1.0 / jnp.maximum(sample.probabilities, 1e-10)) ** float(system.importance_sampling_exponent)
            weights = weights / jnp.max(weights)
        else:
            weights = jnp.ones(sample.experience.reward.shape[:1], jnp.float32)  # one per sampled item
        update = learn_from_batch(state.params, state.opt_states, batch, weights, learn_key, state.update_count)
        if prioritized:
            buffer_state = buffer.set_priorities(buffer_state, sample.indices, update.priorities + 1e-6)
        state = state._replace(params=update.params, opt_states=update.opt_states, buffer_state=buffer_state,
                               key=key, update_count=state.update_count + 1)
        return state, update.metrics

    def update_step(state: OffPolicyLearnerState) -> Tuple[OffPolicyLearnerState, LearnerOutput]:
        state, episode_metrics, acted = rollout(state, budget.rollout_length)
        state, metrics = jax.lax.scan(learn_step, state, None, length=int(system.gradient_steps_per_update))
        train_metrics = jax.tree_util.tree_map(jnp.mean, metrics)
        if acting_metrics is not None:
            train_metrics = {**train_metrics, **acting_metrics(acted)}
        return state, LearnerOutput(episode_metrics=episode_metrics, train_metrics=train_metrics)

    return parallel.scan_updates(update_step, budget.updates_per_evaluation)


def make_warmup_fn(env: VmapWrapper, buffer: TrajectoryBuffer, act: Union[ActFn, RecurrentActing], config: DictConfig,
                  budget: Budget) -> Callable:
    """`warmup(state) -> (state, ())`, per device: one rollout of `warmup_rollout_length` steps, no learning."""
    rollout = make_rollout(env, buffer, act, config, budget)

    def warmup_step(state: OffPolicyLearnerState) -> Tuple[OffPolicyLearnerState, Tuple[()]]:
        state, _, _ = rollout(state, budget.warmup_rollout_length)
        return state, ()

    return parallel.scan_updates(warmup_step, 1)


def make_system_setup(env: Environment, key: jax.Array, config: DictConfig, budget: Budget, *, params: Params, opt_states: OptState,
                  act: Union[ActFn, RecurrentActing], learn_from_batch: LearnFromBatch, batches: replay.BatchView,
                  eval_policy: EvalPolicy, eval_params: Callable[[OffPolicyLearnerState], PyTree],
                  prioritized: bool = False, acting_metrics: Optional[ActingMetrics] = None
                  ) -> SystemSetup:
    """Everything but the algorithm: buffer, env states, replication, warm-up. `batches` says what the learner's
    batches are (`replay.n_step_batches(system)` or `replay.sequence_batches(system)`); `act` is a feed-forward
    `ActFn` or a network with memory's `RecurrentActing`."""
    system = config.system
    acting = _recurrent(act)
    if int(system.gradient_steps_per_update) < 1:
        raise ConfigError(f"system.gradient_steps_per_update={system.gradient_steps_per_update} must be at least 1.")
    buffer = replay.make_buffer(system, budget, batches, prioritized=prioritized)
    if parallel.is_main_process():
        print(replay_ratio_line(system, budget, batches), flush=True)
    batched_env = VmapWrapper(env)
    env_key, step_key = host_keys.split(key)

    # one example transition (no batch axes) tells the buffer what it stores; traced for its shapes only,
    # since running the env and the network eagerly would compile each of their ops one by one
    def example_transition() -> replay.Transition:
        example = example_timestep(env)
        example_action, _, memory, _ = acting.act(
            params, jax.tree_util.tree_map(lambda x: x[None], example.observation), jnp.ones((1,), bool),
            acting.initial_memory(1), jax.random.PRNGKey(0), jnp.zeros((), jnp.int32))
        return replay.Transition(
            observation=example.observation, action=jax.tree_util.tree_map(lambda x: x[0], example_action),
            reward=example.reward,
            discount=example.discount, last=example.last(), next_observation=example.observation,
            memory=jax.tree_util.tree_map(lambda x: x[0], memory))

    transition = jax.eval_shape(example_transition)
    normalize_observations = bool(system.normalize_observations)

    def initial_state(params: Params, opt_states: OptState, memory: PyTree, env_keys: jax.Array, step_keys: jax.Array
                      ) -> OffPolicyLearnerState:
        buffer_state = buffer.init(jax.tree_util.tree_map(lambda leaf: jnp.zeros(leaf.shape, leaf.dtype), transition))
        counter = jnp.zeros((), jnp.int32)
        return slot_state.every_slot(
            OffPolicyLearnerState, env, normalize_observations, env_keys, step_keys,
            dict(params=params, opt_states=opt_states, buffer_state=buffer_state, memory=memory, env_steps=counter,
                 update_count=counter))

    # One setup program, compiled once per process for every seed of this env, buffer and layout. Done eagerly, the
    # buffer's zeros and every leaf's broadcast compiled a program each: DQN's setup took 4.1-4.5 s on 2 cores, now
    # 3.4-3.5 s. The key names all that `initial_state` reads besides its arguments (the buffer is made from the
    # system config, the budget and the batches' sequence length and period).
    program_key = ("off-policy initial state", env, str(system), budget, batches.sequence_length, batches.period,
                   prioritized, jax.tree_util.tree_structure(transition), tuple(jax.tree_util.tree_leaves(transition)),
                   normalize_observations)
    # the envs' initial memory (a recurrent actor's hidden state) as numpy zeros: made eagerly, it compiles programs
    memory = jax.tree_util.tree_map(lambda leaf: np.zeros(leaf.shape, leaf.dtype),
                                    jax.eval_shape(lambda: acting.initial_memory(budget.num_envs)))
    learner_state = compilation_cache.jit_once(program_key, initial_state)(
        params, opt_states, memory, *slot_state.slot_keys(env_key, step_key, budget.update_batch_size, budget.num_envs))
    if budget.warmup_rollout_length:
        warmup_fn = make_warmup_fn(batched_env, buffer, act, config, budget)
        with unrolled_threefry():
            learner_state, _ = parallel.distribute(warmup_fn)(learner_state)
    learner_fn = get_learner_fn(batched_env, buffer, act, learn_from_batch, config, budget, batches, prioritized,
                                acting_metrics)
    return SystemSetup(learner_fn=learner_fn, learner_state=learner_state, eval_policy=eval_policy,
                       eval_params=eval_params)


def replay_ratio_line(system: DictConfig, budget: Budget, batches: replay.BatchView) -> str:
    """How hard the replay is worked: gradient steps and sampled transitions per env step.

    Every (device, batch) slot samples its share of `total_batch_size`; their gradients are averaged into one step.
    A batch of whole sequences counts each of their steps; an n-step transition counts once.
    """
    env_steps = budget.steps_per_update
    gradient_steps = int(system.gradient_steps_per_update)
    sampled_items = gradient_steps * int(system.total_batch_size)
    sampled = sampled_items * batches.steps_per_item
    of_sequences = (f" ({sampled_items} sequences of {batches.sequence_length} steps)"
                    if batches.steps_per_item > 1 else "")
    return (f"replay ratio: {gradient_steps} gradient steps on {sampled} sampled transitions{of_sequences} per "
            f"{env_steps} env steps (rollout {budget.rollout_length} × {budget.total_num_envs} envs) = "
            f"{gradient_steps / env_steps:.3g} gradient steps and {sampled / env_steps:.3g} sampled transitions per "
            f"env step")
