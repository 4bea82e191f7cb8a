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
Params = Any  # a flax parameter tree
OptState = Any  # an optax optimiser state
EnvState = Any  # whatever the wrapped environment carries between steps
Metrics = Dict[str, Array]


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
    extras: Dict[str, Any]

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

    params: Any
    opt_states: Any
    key: PRNGKey
    env_state: EnvState
    timestep: TimeStep
    obs_norm: Any  # stoix_like.learner.normalization.RunningStatistics, or an empty tuple when switched off


class SebulbaLearnerState(NamedTuple):
    """An on-policy learner state fed by Sebulba's actor threads: the envs live on the host with the actors, so
    the state holds only what learning moves. Leaves carry (learner devices, 1, ...)."""

    params: Any
    opt_states: Any
    key: PRNGKey
    obs_norm: Any


class PPOPenaltyLearnerState(NamedTuple):
    """PPO-penalty's learner state: an on-policy state that also carries the KL penalty's weight β, which adapts
    after every update (and so must survive a checkpoint)."""

    params: Any
    opt_states: Any
    key: PRNGKey
    env_state: EnvState
    timestep: TimeStep
    obs_norm: Any
    kl_coef: Array  # β, the same in every (device, batch) slot: it adapts to the KL averaged over all of them


class RecurrentLearnerState(NamedTuple):
    """An on-policy learner state whose policy remembers (recurrent PPO): `OnPolicyLearnerState`'s fields and each
    env's hidden state, carried from one rollout into the next."""

    params: Any
    opt_states: Any
    key: PRNGKey
    env_state: EnvState
    timestep: TimeStep
    obs_norm: Any
    hidden: Any  # (actor's, critic's) hidden state per env, leaves (num_envs, hidden_size); zero where one starts


class ActorCriticTransition(NamedTuple):
    """One time-major rollout step, as the on-policy actor-critics (PPO, PPO-penalty, DPO, REINFORCE) need it."""

    done: Array  # the episode ended here (terminated or truncated): GAE must not cross it
    truncated: Array  # ended by the time limit: bootstrap from next_value instead of zero
    action: Array
    value: Array
    next_value: Array  # value of extras["next_obs"], the true successor (pre-reset) observation
    reward: Array
    log_prob: Array
    behaviour: Any  # the acting distribution's parameters (`parameters()`): KL(π_old ‖ π) is exact from them
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
    policy_extras: Any  # whatever the acting function recorded per step (PPO: value and log-prob)


class PQNLearnerState(NamedTuple):
    """An on-policy learner state that also counts its updates, which drive PQN's epsilon schedule."""

    params: Any
    opt_states: Any
    key: PRNGKey
    env_state: EnvState
    timestep: TimeStep
    obs_norm: Any
    update_count: Array  # updates (rollout + learning) done so far


class OffPolicyLearnerState(NamedTuple):
    """An off-policy learner's state: the replay buffer travels with it (vmapped, pmapped, checkpointed)."""

    params: Any
    opt_states: Any
    buffer_state: Any
    key: PRNGKey
    env_state: EnvState
    timestep: TimeStep
    obs_norm: Any
    env_steps: Array  # env steps taken by this (device, batch) slot, all its envs together
    update_count: Array  # gradient steps taken: drives periodic target updates
    # a recurrent actor's hidden state, one row per env, carried across updates and checkpointed; () when
    # feed-forward
    memory: Any = ()


class OnlineAndTarget(NamedTuple):
    """A network's online parameters and its slowly-following target copy."""

    online: Params
    target: Params


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


class DualVariables(NamedTuple):
    """MPO's and V-MPO's Lagrange multipliers, learnt in log space (stoix_like/ops/mpo.py)."""

    log_temperature: Array  # []: the E-step's temperature η
    log_kl_multipliers: Array  # [C]: one α per KL bound, (mean, scale) for a Gaussian policy, (categorical,) else


class MPOParams(NamedTuple):
    actor: OnlineAndTarget  # the target policy proposes the E-step's actions and anchors the M-step's KL bounds
    critic: OnlineAndTarget  # the q_network: Q(s, ·) for discrete actions, Q(s, a) for continuous ones
    dual: DualVariables


class MPOOptStates(NamedTuple):
    actor: OptState
    critic: OptState
    dual: OptState


class VMPOParams(NamedTuple):
    actor: OnlineAndTarget  # the target ("old") policy anchors the KL bounds; it moves every target_update_period
    critic: Params  # the state value V
    dual: DualVariables


class VMPOOptStates(NamedTuple):
    actor: OptState
    critic: OptState
    dual: OptState
    gradient_steps: Array  # minibatch steps taken, like an optimiser's own count: the target policy's period runs on it


class ActorCriticDualUpdateFns(NamedTuple):
    """MPO's and V-MPO's optimiser updates: the actor, the critic (Q or V) and the dual variables."""

    actor: Callable
    critic: Callable
    dual: Callable
