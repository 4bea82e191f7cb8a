"""The typed seam between an algorithm (stoix_like/systems/) and the loop that runs it (stoix_like/run/experiment.py).

A system module supplies two functions (`System`):

    learner_setup(env, key, config, budget) -> SystemSetup     what the loop calls, once per seed
    run_experiment(config) -> float                            what the Hydra entry calls (one line: experiment.run)

and builds its learner with a function named `get_learner_fn`, which everywhere returns a `Learner`: the function
the loop distributes and calls, `learner_state -> (learner_state, LearnerOutput)`. Functions that build something
else are named for what they build (off_policy.make_warmup_fn, td3.make_learn_from_batch).
"""

from __future__ import annotations

from typing import Callable, Dict, NamedTuple, Protocol, Tuple, runtime_checkable

import jax
from omegaconf import DictConfig

from stoix_like.learner.budget import Budget
from stoix_like.envs.cpu_vector_env import CpuVectorEnv
from stoix_like.envs.environment import Environment
from stoix_like.learner.evaluator import EvalParams, EvalPolicy
from stoix_like.types import LearnerState, Observation, Params, PyTree, RolloutStep


class LearnerOutput(NamedTuple):
    """What a learner reports besides its new state; leaves lead with (devices, [seeds,] batch, updates).

    `episode_metrics` are the auto-reset wrapper's per-env-step metrics (`episode_return`, `episode_length`,
    `is_terminal_step`, ...), read where `is_terminal_step` is set; `train_metrics` are one scalar per name and
    update (losses, entropies, ε), named by the system.
    """

    episode_metrics: Dict[str, jax.Array]
    train_metrics: Dict[str, jax.Array]


class Learner(Protocol):
    """`get_learner_fn`'s result: `num_updates` updates of one (device) copy of the learner state.

    Not yet distributed: the loop pmaps it over devices and vmaps it over seeds (stoix_like.runtime.parallel).
    """

    def __call__(self, learner_state: LearnerState, /) -> Tuple[LearnerState, LearnerOutput]: ...


class SystemSetup(NamedTuple):
    """Everything the loop needs from a system for one seed."""

    learner_fn: Learner
    learner_state: LearnerState  # a system's learner-state NamedTuple; leaves lead with (local devices, update batch)
    eval_policy: EvalPolicy
    # one slot of the learner state -> what eval_policy needs. It only selects (no arithmetic): the loop applies it
    # to the whole state and then takes the slot (shared.eval_params_of)
    eval_params: Callable[[LearnerState], EvalParams]


class LearnerSetup(Protocol):
    """Builds networks, optimisers, env states and the learner for one seed; runs no learning."""

    def __call__(self, env: Environment, key: jax.Array, config: DictConfig, budget: Budget, /) -> SystemSetup: ...


class SebulbaSetup(NamedTuple):
    """What arch=sebulba needs from a system for one seed: the same networks, optimisers and eval policy as
    Anakin's `SystemSetup`, with acting and learning apart, since the envs are stepped by actor threads."""

    # act(actor params, normalised observation, key) -> (action to store, env action, recorded extras), one batch
    act: Callable[[Params, Observation, jax.Array], Tuple[jax.Array, jax.Array, PyTree]]
    # learn_step(one learner slot, time-major RolloutStep) -> (slot, train metrics): one update; parallel.py
    # distributes it over the learner devices with the double pmean
    learn_step: Callable[[LearnerState, RolloutStep], Tuple[LearnerState, Dict[str, jax.Array]]]
    learner_state: LearnerState  # leaves lead with (learner devices, 1)
    actor_params: Callable[[LearnerState], PyTree]  # one slot -> (params acted with, observation statistics)
    eval_policy: EvalPolicy
    eval_params: Callable[[LearnerState], EvalParams]


class SebulbaLearnerSetup(Protocol):
    """Builds a system's networks, optimisers and learner for CPU envs described by `envs` (their action space
    and observation shape); runs no learning."""

    def __call__(self, envs: CpuVectorEnv, key: jax.Array, config: DictConfig, budget: Budget, n_learner_devices: int,
                 /) -> SebulbaSetup: ...


@runtime_checkable
class System(Protocol):
    """What a system module (stoix_like.systems.<module>) supplies."""

    learner_setup: LearnerSetup
    run_experiment: Callable[[DictConfig], float]
