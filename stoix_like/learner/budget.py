"""Exact step budgets: a run performs exactly `arch.total_timesteps` environment steps, or refuses to start.

All derived numbers live in the frozen `Budget`; nothing is written back into the user's config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

from omegaconf import DictConfig

from stoix_like.errors import ConfigError


@dataclass(frozen=True)
class Budget:
    total_timesteps: int
    n_devices: int
    update_batch_size: int
    num_envs: int  # per (device, batch element)
    rollout_length: int
    num_evaluation: int
    updates_per_evaluation: int
    warmup_steps: int  # env steps spent filling a replay buffer before learning; part of the total

    @property
    def total_num_envs(self) -> int:
        return self.n_devices * self.update_batch_size * self.num_envs

    @property
    def steps_per_update(self) -> int:
        return self.rollout_length * self.total_num_envs

    @property
    def num_updates(self) -> int:
        return self.updates_per_evaluation * self.num_evaluation

    @property
    def steps_per_evaluation(self) -> int:
        return self.updates_per_evaluation * self.steps_per_update

    @property
    def warmup_rollout_length(self) -> int:
        return self.warmup_steps // self.total_num_envs


def split_envs(total_num_envs: int, n_devices: int, update_batch_size: int) -> int:
    """Envs per (device, batch element); refuses a split that is not exact."""
    slots = n_devices * update_batch_size
    if total_num_envs <= 0 or total_num_envs % slots:
        valid = [slots * k for k in _around(max(total_num_envs // slots, 1))]
        raise ConfigError(
            f"arch.total_num_envs={total_num_envs} must be a positive multiple of n_devices × "
            f"arch.update_batch_size = {n_devices} × {update_batch_size} = {slots}; "
            f"try arch.total_num_envs={valid[0]} or {valid[1]}."
        )
    return total_num_envs // slots


def make_budget(config: DictConfig, n_devices: Optional[int] = None,
                update_batch_size: Optional[int] = None) -> Budget:
    """The exact budget of a composed config. Anakin's defaults: every device (`n_devices=None`, which imports jax)
    and `arch.update_batch_size`; Sebulba passes its learner devices and an update batch of one."""
    if n_devices is None:
        from stoix_like.runtime import parallel

        n_devices = parallel.device_count()
    return exact_budget(
        total_timesteps=int(config.arch.total_timesteps),
        total_num_envs=int(config.arch.total_num_envs),
        n_devices=n_devices,
        update_batch_size=int(config.arch.update_batch_size) if update_batch_size is None else update_batch_size,
        rollout_length=int(config.system.rollout_length),
        num_evaluation=int(config.arch.num_evaluation),
        warmup_rollout_length=int(config.system.get("warmup_rollout_length", 0) or 0),
    )


def exact_budget(
    total_timesteps: int,
    total_num_envs: int,
    n_devices: int,
    update_batch_size: int,
    rollout_length: int,
    num_evaluation: int,
    warmup_rollout_length: int = 0,
) -> Budget:
    """Derive the update schedule, or raise a ConfigError that names the nearest budgets that work."""
    if num_evaluation < 1:
        raise ConfigError(f"arch.num_evaluation={num_evaluation} must be at least 1.")
    if rollout_length < 1:
        raise ConfigError(f"system.rollout_length={rollout_length} must be at least 1.")
    num_envs = split_envs(total_num_envs, n_devices, update_batch_size)
    warmup_steps = warmup_rollout_length * total_num_envs
    steps_per_update = rollout_length * total_num_envs
    granule = steps_per_update * num_evaluation  # the learning steps must be a whole number of these
    learning_steps = total_timesteps - warmup_steps
    if learning_steps < granule or learning_steps % granule:
        lower = max(learning_steps // granule, 1)
        candidates = sorted({warmup_steps + granule * k for k in _around(lower)})
        why = (
            "is smaller than one update per evaluation"
            if learning_steps < granule
            else "is not a whole number of updates per evaluation"
        )
        raise ConfigError(
            f"arch.total_timesteps={total_timesteps} {why}: each update takes system.rollout_length × "
            f"arch.total_num_envs = {rollout_length} × {total_num_envs} = {steps_per_update} steps, "
            f"× arch.num_evaluation={num_evaluation}"
            + (f", after {warmup_steps} warm-up steps" if warmup_steps else "")
            + f"; nearest budgets that work: {', '.join(str(c) for c in candidates)}."
        )
    return Budget(
        total_timesteps=total_timesteps,
        n_devices=n_devices,
        update_batch_size=update_batch_size,
        num_envs=num_envs,
        rollout_length=rollout_length,
        num_evaluation=num_evaluation,
        updates_per_evaluation=learning_steps // granule,
        warmup_steps=warmup_steps,
    )


def _around(k: int) -> List[int]:
    """k and k+1 multiples (k at least 1): the budgets just below and just above a requested one."""
    return [max(k, 1), max(k, 1) + 1]


def check_divides(name: str, value: int, divisor_name: str, divisor: int) -> None:
    """Shared check for batch splits (minibatches, sequence chunks): an exact division or a ConfigError."""
    if divisor <= 0 or value % divisor:
        divisors = [d for d in range(1, value + 1) if value % d == 0]
        nearby = sorted(divisors, key=lambda d: abs(d - divisor))[:3]
        raise ConfigError(f"{divisor_name}={divisor} must divide {name}={value}; try one of {sorted(nearby)}.")
