"""What on-policy systems share: the initial state, a rollout of the current policy, epochs of shuffled minibatches.

The actor-critics (policy_gradient.py: PPO, PPO-penalty, DPO, REINFORCE) and PQN differ in how they act and what
they learn from a batch; how they collect the batch, sweep over it and move the observation statistics is the same,
so it lives here once. Every helper runs inside the learner (one
update-batch slot).
"""

from __future__ import annotations

import functools
from typing import Callable, Dict, Optional, Protocol, Tuple, TypeVar

import jax
import jax.numpy as jnp
from omegaconf import DictConfig

from stoix_like.runtime import compilation_cache
from stoix_like.learner import normalization
from stoix_like.envs.environment import Environment
from stoix_like.envs.wrappers import VmapWrapper
from stoix_like.learner.budget import Budget, check_divides
from stoix_like.ops import packing
from stoix_like.ops.shuffling import uniform_permutation
from stoix_like.systems import slot_state
from stoix_like.types import EnvState, Metrics, Observation, OptState, Params, PRNGKey, PyTree, RolloutStep, TimeStep

LearnerStateT = TypeVar("LearnerStateT", bound="OnPolicyState")

# act(params, normalised observation, key) -> (action to store, action for the env, per-step policy extras)
ActFn = Callable[[Params, Observation, jax.Array], Tuple[jax.Array, jax.Array, PyTree]]
# act(learner state, normalised observation, key) -> (learner state, action to store, action for the env, extras): a
# policy that reads or moves more of the learner state than its params (a recurrent one's hidden state; a search,
# which plans from the env states themselves)
StatefulActFn = Callable[[LearnerStateT, Observation, jax.Array], Tuple[LearnerStateT, jax.Array, jax.Array, PyTree]]
# what update_minibatch carries from one minibatch to the next: (params, opt_states, obs_norm)
MinibatchCarry = Tuple[Params, OptState, PyTree]
# update_minibatch(carry, minibatch, key) -> (carry, metrics)
MinibatchUpdateFn = Callable[[MinibatchCarry, PyTree, jax.Array], Tuple[MinibatchCarry, Metrics]]

BatchT = TypeVar("BatchT")


class OnPolicyState(Protocol):
    """The learner-state fields the helpers here read and replace (types.OnPolicyLearnerState, PQNLearnerState)."""

    @property
    def params(self) -> Params: ...  # acted with, then learnt
    @property
    def opt_states(self) -> OptState: ...  # learn_from_rollout only
    @property
    def obs_norm(self) -> PyTree: ...  # normalises what the policy sees; moved after learning
    @property
    def key(self) -> PRNGKey: ...  # split once per env step and once per update
    @property
    def env_state(self) -> EnvState: ...  # stepped by collect_rollout, like timestep
    @property
    def timestep(self) -> TimeStep: ...
    # the fields the helpers replace; a NamedTuple's _replace accepts these among its own
    def _replace(self: LearnerStateT, *, params: Params = ..., opt_states: OptState = ..., obs_norm: PyTree = ...,
                 key: PRNGKey = ..., env_state: EnvState = ..., timestep: TimeStep = ...) -> LearnerStateT: ...


def collect_rollout(env: VmapWrapper, act: ActFn, state: LearnerStateT, rollout_length: int, unroll: int
                    ) -> Tuple[LearnerStateT, RolloutStep]:
    """Steps the batched env `rollout_length` times with the current params; returns a time-major trajectory.
    `unroll` (arch.rollout_unroll) env steps run per iteration of the compiled loop: a speed choice, not a result.

    The policy sees observations normalised with the rollout's statistics; the trajectory keeps them raw.
    """

    def act_from_params(state: LearnerStateT, observation: Observation, key: jax.Array):
        return (state, *act(state.params, observation, key))

    return collect_rollout_from_state(env, act_from_params, state, rollout_length, unroll)


def collect_rollout_from_state(env: VmapWrapper, act: StatefulActFn[LearnerStateT], state: LearnerStateT,
                               rollout_length: int, unroll: int) -> Tuple[LearnerStateT, RolloutStep]:
    """`collect_rollout` for a policy that reads or moves more of the learner state than its params: a recurrent
    one's hidden state (reset where `state.timestep` opens an episode), a search's env states. The trajectory is
    the same."""

    def env_step(state: LearnerStateT) -> Tuple[LearnerStateT, RolloutStep]:
        key, policy_key = jax.random.split(state.key)
        observation = normalization.normalize(state.obs_norm, state.timestep.observation)
        state, action, env_action, policy_extras = act(state, observation, policy_key)
        env_state, timestep = env.step(state.env_state, env_action)
        step = RolloutStep(
            observation=state.timestep.observation,
            action=action,
            reward=timestep.reward,
            discount=timestep.discount,
            done=timestep.last(),
            next_observation=timestep.extras["next_obs"],
            episode_metrics=timestep.extras["episode_metrics"],
            policy_extras=policy_extras,
        )
        return state._replace(key=key, env_state=env_state, timestep=timestep), step

    # each step's record written in one operation rather than one per field (ops/packing.py says why)
    return packing.scan_records(env_step, state, rollout_length, unroll)


def step_and_successor_values(value: Callable[[Observation], jax.Array], obs_norm: PyTree, steps: RolloutStep
                               ) -> Tuple[jax.Array, jax.Array]:
    """V of each step's observation and of its true successor, `(T, envs)` each, by `value` (the critic under the
    params that acted) in two batched passes over the (T × envs) steps, with the rollout's statistics.

    Why not record V while acting: inside the acting loop the first pass would be T small ones, and on CPU, where
    each of the critic's kernels costs more to launch than to run, that made PPO 2-4% slower on PureJaxRL's
    CartPole config. The values are those acting would have recorded, up to float rounding. (One pass over both
    halves was slower again: XLA splits a batch of 2 × T × envs rows over threads.) Under Sebulba the actors acted
    with older params; these values are the learner's, like the successors' values always were.
    """
    return (value(normalization.normalize(obs_norm, steps.observation)),
            value(normalization.normalize(obs_norm, steps.next_observation)))


def shuffled_minibatches(key: jax.Array, batch: BatchT, num_minibatches: int) -> BatchT:
    """Flattens time-major `(T, num_envs, ...)` leaves, shuffles them with one shared permutation and splits
    them into `(num_minibatches, T * num_envs / num_minibatches, ...)`."""
    leaves = jax.tree_util.tree_leaves(batch)
    batch_size = leaves[0].shape[0] * leaves[0].shape[1]
    permutation = uniform_permutation(key, batch_size)

    def to_minibatches(x: jax.Array) -> jax.Array:
        x = x.reshape((batch_size,) + x.shape[2:])[permutation]
        return x.reshape((num_minibatches, -1) + x.shape[1:])

    return jax.tree_util.tree_map(to_minibatches, batch)


def shuffled_env_minibatches(key: jax.Array, batch: BatchT, num_minibatches: int) -> BatchT:
    """Splits whole sequences, never steps: leaves lead with the env axis `(num_envs, ...)` (a sequence
    `(num_envs, T, ...)`, or what each env's sequence starts from); the envs are shuffled with one shared
    permutation into `(num_minibatches, num_envs / num_minibatches, ...)`."""
    num_envs = jax.tree_util.tree_leaves(batch)[0].shape[0]
    permutation = uniform_permutation(key, num_envs)
    return jax.tree_util.tree_map(lambda x: x[permutation].reshape((num_minibatches, -1) + x.shape[1:]), batch)


# split(key, batch, num_minibatches) -> the batch's leaves as (num_minibatches, minibatch size, ...)
SplitFn = Callable[[jax.Array, PyTree, int], PyTree]
# refresh(carry, batch) -> batch: what an epoch learns from, recomputed under the carry's params as it starts
RefreshFn = Callable[[MinibatchCarry, PyTree], PyTree]


def update_over_epochs(update_minibatch: MinibatchUpdateFn, carry: MinibatchCarry, batch: PyTree, key: jax.Array,
                       num_epochs: int, num_minibatches: int, split: SplitFn = shuffled_minibatches,
                       refresh: Optional[RefreshFn] = None) -> Tuple[MinibatchCarry, Metrics]:
    """`num_epochs` passes over `batch`, each reshuffled into `num_minibatches` minibatches by `split` (steps
    by default; `shuffled_env_minibatches` keeps sequences whole). With `refresh`, every epoch after the first
    learns from `refresh(carry, batch)` (the first's batch was computed under the same params).

    `update_minibatch` gets its own key per minibatch. Returns the final carry and the metrics stacked as
    `(num_epochs, num_minibatches, ...)`.
    """

    def update_one_minibatch(minibatch_carry, minibatch):
        carry, key = minibatch_carry
        key, minibatch_key = jax.random.split(key)
        carry, metrics = update_minibatch(carry, minibatch, minibatch_key)
        return (carry, key), metrics

    def update_epoch(epoch_carry, epoch: jax.Array):
        carry, key = epoch_carry
        key, shuffle_key, minibatch_key = jax.random.split(key, 3)
        epoch_batch = batch
        if refresh is not None:
            epoch_batch = jax.lax.cond(epoch > 0, refresh, lambda _, unchanged: unchanged, carry, batch)
        minibatches = split(shuffle_key, epoch_batch, num_minibatches)
        (carry, _), metrics = jax.lax.scan(update_one_minibatch, (carry, minibatch_key), minibatches)
        return (carry, key), metrics

    (carry, _), metrics = jax.lax.scan(update_epoch, (carry, key), jnp.arange(num_epochs))
    return carry, metrics


def learn_from_rollout(update_minibatch: MinibatchUpdateFn, state: LearnerStateT, batch: PyTree,
                       observations: Observation, system: DictConfig, split: SplitFn = shuffled_minibatches,
                       refresh: Optional[RefreshFn] = None) -> Tuple[LearnerStateT, Dict[str, jax.Array]]:
    """`system.epochs` × `system.num_minibatches` updates of (params, opt_states) on `batch`, then the observation
    statistics take in the rollout's `observations`.

    The statistics move only after learning, so every quantity computed from the rollout before (log-probs,
    targets) and the learning itself saw one normalisation. `update_minibatch`'s carry is
    (params, opt_states, obs_norm). Returns the new state and the train metrics, averaged over the updates.
    """
    key, epoch_key = jax.random.split(state.key)
    (params, opt_states, _), metrics = update_over_epochs(
        update_minibatch, (state.params, state.opt_states, state.obs_norm), batch, epoch_key, system.epochs,
        system.num_minibatches, split, refresh)
    obs_norm = state.obs_norm
    if system.normalize_observations:
        obs_norm = normalization.update(obs_norm, observations.agent_view)
    state = state._replace(params=params, opt_states=opt_states, key=key, obs_norm=obs_norm)
    return state, jax.tree_util.tree_map(jnp.mean, metrics)


def check_minibatches(system: DictConfig, budget: Budget) -> None:
    """A rollout must split into `system.num_minibatches` equal minibatches (else a ConfigError naming valid values)."""
    check_divides("system.rollout_length × envs per slot", budget.rollout_length * budget.num_envs,
                  "system.num_minibatches", int(system.num_minibatches))


def check_env_minibatches(system: DictConfig, budget: Budget) -> None:
    """Minibatches of whole sequences split the envs: `system.num_minibatches` must divide the envs per slot."""
    check_divides("envs per slot (arch.total_num_envs / (devices × arch.update_batch_size))", budget.num_envs,
                  "system.num_minibatches", int(system.num_minibatches))


def optimizer_steps(system: DictConfig, budget: Budget) -> int:
    """Optimiser steps over the whole run, which learning-rate schedules decay over."""
    return budget.num_updates * int(system.epochs) * int(system.num_minibatches)


def initial_learner_state(state_type: Callable[..., LearnerStateT], env: Environment, env_key: jax.Array,
                          step_key: jax.Array, system: DictConfig, budget: Budget, **learnt: PyTree) -> LearnerStateT:
    """The state every (device, batch) slot starts from: the same `learnt` fields (params, optimiser states,
    counters) and fresh observation statistics in every slot, with its own envs and key."""
    env_keys, step_keys = slot_state.slot_keys(env_key, step_key, budget.update_batch_size, budget.num_envs)
    return _initial_learner_state(state_type, env, bool(system.normalize_observations), env_keys, step_keys, learnt)


# One program, compiled once per process for each env and layout (the env is static, hashed by identity): done
# eagerly, every distinct leaf shape would compile a small program of its own on the first seed's setup.
@functools.partial(compilation_cache.jit_setup_program, static_argnums=(0, 1, 2))
def _initial_learner_state(state_type: Callable[..., LearnerStateT], env: Environment, normalize_observations: bool,
                           env_keys: jax.Array, step_keys: jax.Array, learnt: Dict[str, PyTree]) -> LearnerStateT:
    return slot_state.every_slot(state_type, env, normalize_observations, env_keys, step_keys, learnt)
