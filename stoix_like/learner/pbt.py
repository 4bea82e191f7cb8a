"""Population-based training in one compiled program (`arch.pbt`).

`python -m experiments.ppo arch.num_seeds=8 arch.pbt.interval=100 'arch.pbt.ranges.actor_lr=[1e-5,1e-1]'` trains
8 members (seeds `arch.seed .. arch.seed + 7`), each starting from its own values of the ranged keys (log-uniform in
the range when it is positive, else uniform). Every `interval` updates, inside the compiled learner:

- exploit: members are ranked by fitness, the mean return of the training episodes that ended in the last learn
  call (kept from an earlier call when none ended). The bottom `fraction` copy a member of the top `fraction`,
  picked uniformly: its params, optimiser state, observation statistics and env states (everything in the learner
  state but its random key, so that a copy and its source part ways at once), and its hyperparameters;
- explore: each copied hyperparameter is multiplied by 0.8 or 1.2 (even odds), or, with `resample_probability`,
  drawn afresh from its range; it stays inside its range.

Members sit on the seeds' axis of `parallel.distribute`'s layout, (devices, members, update batch, ...), and every
device runs every member's replica of its update batch. The fitness of a member sums its episodes over its update
batch and over every device, so every device ranks the same numbers and makes the same copies with the population's
one key: replicas stay equal, as the double pmean keeps them. The hyperparameters, the fitness and that key live in
the learner state (`PBTState`), so a checkpoint saves them and a resumed run goes on bit-identically.

A member reads its current values as a sweep's member reads its grid point's (stoix_like/learner/hyperparams.py):
so the keys that can be ranged are the system's sweepable ones (validation.SWEEPABLE). Lineage is logged as each
member's training metrics: `pbt/<key>` (the value it trained with in that learn call) and `pbt/copied_from` (the
member whose state it took at that call's end; its own index when it kept its own), and a line per copy.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Mapping, NamedTuple, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from omegaconf import DictConfig

from stoix_like.errors import ConfigError
from stoix_like.learner import hyperparams
from stoix_like.learner.system_contract import Learner, LearnerOutput
from stoix_like.runtime import host_keys, parallel
from stoix_like.types import LearnerState

PERTURB_FACTORS = (0.8, 1.2)  # the PBT paper's explore step: a copied value made 20% smaller or larger
COPIED_FROM = "pbt/copied_from"
# the population key's stream, apart from every seed's own keys (host_keys.seed_key(seed) and its splits)
POPULATION_STREAM = 0x0B7


class PBTState(NamedTuple):
    """One member's learner state and what PBT keeps with it. Leaves lead with (devices,) like the learner's
    (whose next axis is the update batch); several members add their axis after the devices', as seeds do."""

    learner: LearnerState
    hyperparams: Dict[str, jax.Array]  # the values this member trains with now, float32
    fitness: jax.Array  # mean return of the training episodes that ended in the last learn call with any; -inf before
    key: jax.Array  # the population's key: the same in every member's and device's slot
    updates_done: jax.Array  # int32: updates since the start, counted at each learn call's end


def ranges_of(config: DictConfig) -> Dict[str, Tuple[float, float]]:
    """{system key: (low, high)} of `arch.pbt.ranges`; {} where there is no PBT block."""
    pbt = config.arch.get("pbt")
    ranges = (pbt.get("ranges") if pbt else None) or {}
    return {str(name): (float(bounds[0]), float(bounds[1])) for name, bounds in ranges.items()}


def enabled(config: DictConfig) -> bool:
    """Whether the run trains its seeds as a PBT population (`arch.pbt.interval` set)."""
    pbt = config.arch.get("pbt")
    return bool(pbt) and pbt.get("interval") is not None


def _draw(uniform: jax.Array | np.ndarray, low: float, high: float) -> jax.Array | np.ndarray:
    """A value of the range from a uniform [0, 1) draw: log-uniform where the range is positive (learning rates
    spanning decades), uniform where it reaches 0 or below."""
    xp = jnp if isinstance(uniform, jax.Array) else np
    if low > 0:
        return xp.exp(np.log(low) + uniform * (np.log(high) - np.log(low)))
    return low + uniform * (high - low)


def initial_values(config: DictConfig, seeds: Sequence[int]) -> List[Dict[str, float]]:
    """Each member's starting values, drawn on the host from its seed: member k starts the same in every run that
    gives it the same seed and ranges."""
    ranges = ranges_of(config)
    values = []
    for seed in seeds:
        uniform = np.random.default_rng([POPULATION_STREAM, int(seed)]).random(len(ranges))
        values.append({name: float(np.float32(_draw(u, *bounds))) for u, (name, bounds) in zip(uniform, ranges.items())})
    return values


def check_interval(config: DictConfig, updates_per_call: int) -> None:
    """Refuse (one line, before compiling) an interval that does not fall on a learn call's end: PBT steps run
    where a learn call ends, after its updates."""
    interval = int(config.arch.pbt.interval)
    if interval % updates_per_call:
        raise ConfigError(f"arch.pbt.interval={interval} must be a multiple of the {updates_per_call} updates one "
                          f"learn call runs (the updates per evaluation / logger.progress_per_evaluation), e.g. "
                          f"arch.pbt.interval={updates_per_call * max(1, round(interval / updates_per_call))}.")


def initial_state(learner_state: LearnerState, values: Mapping[str, float], first_seed: int) -> PBTState:
    """A member's fresh PBTState around its fresh learner state (leaves leading with its devices' axis)."""
    num_devices = jax.tree_util.tree_leaves(learner_state)[0].shape[0]
    population_key = host_keys.fold_in(host_keys.seed_key(first_seed), POPULATION_STREAM)
    # placed as device arrays, as a learner state's leaves are (a copy of a few numbers: no program runs)
    per_device = lambda value, dtype: jnp.asarray(np.full((num_devices,), value, dtype))  # noqa: E731
    return PBTState(learner=learner_state,
                    hyperparams={name: per_device(value, np.float32) for name, value in values.items()},
                    fitness=per_device(-np.inf, np.float32),
                    key=jnp.asarray(np.broadcast_to(np.asarray(population_key, np.uint32), (num_devices, 2))),
                    updates_done=per_device(0, np.int32))


def eval_params_reader(eval_params: Callable[[LearnerState], object]) -> Callable[[PBTState], object]:
    """The system's eval-params reader for a member's PBTState."""
    return lambda state: eval_params(state.learner)


def population_learner(learner_fn: Learner, config: DictConfig, updates_per_call: int, num_members: int,
                       in_sequence: bool) -> Callable[[PBTState], Tuple[PBTState, LearnerOutput]]:
    """One device's learn call for the whole population (leaves (members, update batch, ...)): every member's
    updates, each reading its own values, then, when `arch.pbt.interval` updates are done, exploit and explore."""
    ranges = ranges_of(config)
    pbt = config.arch.pbt
    interval, fraction = int(pbt.interval), float(pbt.fraction)
    resample_probability = float(pbt.resample_probability)
    names = frozenset(ranges)

    def member_learn(state: PBTState) -> Tuple[LearnerState, LearnerOutput]:
        with hyperparams.sweeping(names), hyperparams.member_values(state.hyperparams):
            return learner_fn(state.learner)

    def learn(states: PBTState) -> Tuple[PBTState, LearnerOutput]:
        learner_states, outputs = (jax.lax.map(member_learn, states) if in_sequence
                                   else jax.vmap(member_learn)(states))
        fitness = _fitness(outputs.episode_metrics, states.fitness)
        updates_done = states.updates_done + updates_per_call
        due = updates_done[0] % interval == 0
        key, step_key = jax.random.split(states.key[0])
        source, explored = exploit_and_explore(step_key, fitness, states.hyperparams, ranges, fraction,
                                               resample_probability)
        members = jnp.arange(num_members)
        source = jnp.where(due, source, members)
        new_values = {name: jnp.where(due, explored[name], states.hyperparams[name]) for name in ranges}
        new_state = PBTState(learner=_copy_but_keys(learner_states, source), hyperparams=new_values,
                             fitness=fitness[source], key=jnp.broadcast_to(key, states.key.shape),
                             updates_done=updates_done)
        return new_state, _with_lineage(outputs, states.hyperparams, source)

    return learn


def exploit_and_explore(key: jax.Array, fitness: jax.Array, values: Mapping[str, jax.Array],
                        ranges: Mapping[str, Tuple[float, float]], fraction: float, resample_probability: float
                        ) -> Tuple[jax.Array, Dict[str, jax.Array]]:
    """(each member's source, each member's new values): truncation selection, then perturb-or-resample for the
    members that copied. Members with equal fitness rank by their index (a stable sort)."""
    num_members = fitness.shape[0]
    num_replaced = max(1, int(fraction * num_members))
    order = jnp.argsort(fitness, stable=True)  # worst first
    bottom, top = order[:num_replaced], order[num_members - num_replaced:]
    pick_key, *name_keys = jax.random.split(key, 1 + len(ranges))
    picks = top[jax.random.randint(pick_key, (num_replaced,), 0, num_replaced)]
    source = jnp.arange(num_members).at[bottom].set(picks)
    replaced = source != jnp.arange(num_members)
    explored = {}
    for name_key, (name, (low, high)) in zip(name_keys, ranges.items()):
        up_key, resample_key, draw_key = jax.random.split(name_key, 3)
        copied = values[name][source]
        factor = jnp.where(jax.random.bernoulli(up_key, 0.5, (num_members,)), PERTURB_FACTORS[1], PERTURB_FACTORS[0])
        perturbed = jnp.clip(copied * factor, low, high)
        resampled = _draw(jax.random.uniform(draw_key, (num_members,)), low, high)
        resample = jax.random.uniform(resample_key, (num_members,)) < resample_probability
        new = jnp.where(resample, resampled, perturbed).astype(jnp.float32)
        explored[name] = jnp.where(replaced, new, values[name])
    return source, explored


def _fitness(episode_metrics: Mapping[str, jax.Array], previous: jax.Array) -> jax.Array:
    """Per member, the mean return of the training episodes that ended in this call, over its update batch and
    every device (the same on every device); `previous` where none ended."""
    ended = episode_metrics["is_terminal_step"].astype(jnp.float32)
    per_member = lambda x: x.reshape(x.shape[0], -1).sum(axis=1)  # noqa: E731
    totals = parallel.psum_over_devices((per_member(episode_metrics["episode_return"] * ended), per_member(ended)))
    return jnp.where(totals[1] > 0, totals[0] / jnp.maximum(totals[1], 1.0), previous)


def _copy_but_keys(learner_states: LearnerState, source: jax.Array) -> LearnerState:
    """Every member's learner state from its source, except its own random key."""
    copied = jax.tree_util.tree_map(lambda leaf: leaf[source], learner_states)
    if hasattr(learner_states, "_fields") and "key" in learner_states._fields:
        copied = copied._replace(key=learner_states.key)
    return copied


def _with_lineage(outputs: LearnerOutput, values: Mapping[str, jax.Array], source: jax.Array) -> LearnerOutput:
    """The learner's outputs with each member's values this call and its source as training metrics, shaped as
    the learner's own (members, update batch, updates)."""
    shape = jax.tree_util.tree_leaves(outputs.train_metrics)[0].shape[:3]
    spread = lambda per_member: jnp.broadcast_to(  # noqa: E731
        per_member.astype(jnp.float32).reshape((-1,) + (1,) * (len(shape) - 1)), shape)
    lineage = {f"pbt/{name}": spread(value) for name, value in values.items()}
    lineage[COPIED_FROM] = spread(source)
    return outputs._replace(train_metrics={**outputs.train_metrics, **lineage})


def lineage_lines(seeds: Sequence[int], train_means: Sequence[Mapping[str, float]], steps_done: int) -> List[str]:
    """One line per member that copied another at the end of the learn call just logged."""
    lines = []
    for index, (seed, means) in enumerate(zip(seeds, train_means)):
        source = int(round(means.get(COPIED_FROM, index)))
        if source != index:
            lines.append(f"pbt at step {steps_done:,}: member {index} (seed {seed}) copied member {source} "
                         f"(seed {seeds[source]}), which trained with "
                         + ", ".join(f"{name[len('pbt/'):]}={value:.4g}" for name, value in train_means[source].items()
                                     if name.startswith("pbt/") and name != COPIED_FROM))
    return lines
