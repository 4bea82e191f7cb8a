"""The named pytrees that flow between layers.

NamedTuples are zero-overhead pytrees with named fields: jit, vmap, pmap and orbax all see plain tuples,
while code reads `state.params.actor` instead of `state[0][0]`.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, NamedTuple, TypeAlias, Union

import jax

# jax.Array rather than chex.Array: chex ships no type hints, so its aliases would read as Any to a type checker.
Array: TypeAlias = jax.Array
PRNGKey: TypeAlias = jax.Array  # a key from jax.random.PRNGKey (a uint32 array)
Numeric: TypeAlias = Union[jax.Array, float]  # a hyperparameter: a Python number or a (traced) scalar
# Named stand-ins for what jax, flax and optax themselves leave untyped: a pytree's structure varies by system, so
# its type can only say what it holds. Use the narrowest that fits; a precise type (jax.Array, np.ndarray, a
# NamedTuple, a Protocol) where the shape is stable.
PyTree: TypeAlias = Any  # a nested structure (tuples, NamedTuples, dicts, lists) of arrays
HostTree: TypeAlias = Any  # a PyTree of numpy arrays, copied to the host
LearnerState: TypeAlias = Any  # a system's learner-state NamedTuple; leaves lead with (devices, [seeds,] batch)
Params: TypeAlias = Any  # a flax parameter tree
OptState: TypeAlias = Any  # an optax optimiser state
EnvState: TypeAlias = Any  # whatever the wrapped environment carries between steps
Metrics = Dict[str, Array]
JSONValue: TypeAlias = Any  # what json.load returns, or what json.dump is given


class StepType:
    """Where a TimeStep sits in its episode (the dm_env convention, as int8 so it batches cheaply)."""

    FIRST = 0
    MID = 1
    LAST = 2


class Observation(NamedTuple):
    """What an agent sees.

    `action_mask` is True for legal actions (all True where the suite has no masks, and for continuous
    actions a single True per step so the field always exists). `step_count` is the step within the episode.
    """

    agent_view: Array
    action_mask: Array
    step_count: Array


class TimeStep(NamedTuple):
    """One environment transition as seen by the agent.

    `discount` is 0 only when the episode truly terminated; a time-limit truncation keeps discount 1 so that
    returns bootstrap from the value of the last observation. `extras` holds `next_obs` (the observation the
    step really produced, before any auto-reset) and `episode_metrics`.
    """

    step_type: Array
    reward: Array
    discount: Array
    observation: Observation
    extras: Dict[str, PyTree]

    def first(self) -> Array:
        return self.step_type == StepType.FIRST

    def mid(self) -> Array:
        return self.step_type == StepType.MID

    def last(self) -> Array:
        return self.step_type == StepType.LAST


class ActorCriticParams(NamedTuple):
    actor: Params
    critic: Params


class ActorCriticOptStates(NamedTuple):
    actor: OptState
    critic: OptState


class ActorCriticApplyFns(NamedTuple):
    actor: Callable
    critic: Callable


class ActorCriticUpdateFns(NamedTuple):
    actor: Callable
    critic: Callable


class OnPolicyLearnerState(NamedTuple):
    """Everything an on-policy learner carries from one update to the next.

    Leaves carry leading axes (n_devices, update_batch_size, ...); the env batch sits inside.
    """

    params: Params
    opt_states: OptState
    key: PRNGKey
    env_state: EnvState
    timestep: TimeStep
    obs_norm: PyTree  # stoix_like.learner.normalization.RunningStatistics, or an empty tuple when switched off


class ActorCriticTransition(NamedTuple):
    """One time-major rollout step, as the on-policy actor-critics (PPO, PPO-penalty, DPO, REINFORCE) need it."""

    done: Array  # the episode ended here (terminated or truncated): GAE must not cross it
    truncated: Array  # ended by the time limit: bootstrap from next_value instead of zero
    action: Array
    value: Array
    next_value: Array  # value of extras["next_obs"], the true successor (pre-reset) observation
    reward: Array
    log_prob: Array
    behaviour: PyTree  # the acting distribution's parameters (`parameters()`): KL(π_old ‖ π) is exact from them
    observation: Observation
    episode_metrics: Dict[str, Array]


class RolloutStep(NamedTuple):
    """One time-major step of an on-policy rollout (stoix_like.systems.on_policy.rollout.collect_rollout)."""

    observation: Observation  # what the action was chosen from, un-normalised
    action: Array
    reward: Array
    discount: Array  # 0 only where the episode truly terminated
    done: Array  # the episode ended here (terminated or truncated): multi-step returns must not cross it
    next_observation: Observation  # extras["next_obs"]: the true (pre-reset) successor, for bootstrapping
    episode_metrics: Dict[str, Array]
    policy_extras: PyTree  # whatever the acting function recorded per step (PPO: value and log-prob)


class OnlineAndTarget(NamedTuple):
    """A network's online parameters and its slowly-following target copy."""

    online: Params
    target: Params
