"""What MPO (actor_critic/mpo.py) and V-MPO (on_policy/vmpo.py) share on top of the math in stoix_like/ops/mpo.py.

- The KL bounds of the env's action kind: a categorical policy has one (`system.categorical_kl_bound`), a
  tanh-Gaussian one a bound for its mean and one for its scale (`system.mean_kl_bound`, `system.scale_kl_bound`).
  The other kind's keys must be null, so a setting that cannot apply is refused in one line before anything
  compiles rather than silently ignored.
- The dual variables as learnt parameters (`DualVariables`, below), their optimiser step and its floor.
- The M-step on a policy head of either kind: weighted maximum likelihood of the E-step's actions plus the KL
  constraints against the target policy. For a tanh-Gaussian the likelihood is decoupled as the KLs are: the mean
  is fitted with the target's scale and the scale with the target's mean. Both are taken on the pre-tanh action,
  whose tanh Jacobian does not depend on the parameters, so the gradients are those of the squashed density.
"""

from __future__ import annotations

from typing import Callable, Dict, NamedTuple, Sequence, Tuple, Union

import jax
import jax.numpy as jnp
import optax
from omegaconf import DictConfig

from stoix_like.envs.environment import ActionSpace, ContinuousActionSpace
from stoix_like.errors import ConfigError
from stoix_like.networks.distributions import MaskedCategorical, TanhGaussian
from stoix_like.ops import mpo as mpo_ops
from stoix_like.ops.losses import categorical_kl_divergence
from stoix_like.types import Array


class DualVariables(NamedTuple):
    """MPO's and V-MPO's Lagrange multipliers, learnt in log space (stoix_like/ops/mpo.py)."""

    log_temperature: Array  # []: the E-step's temperature η
    log_kl_multipliers: Array  # [C]: one α per KL bound, (mean, scale) for a Gaussian policy, (categorical,) else


class ActorCriticDualUpdateFns(NamedTuple):
    """MPO's and V-MPO's optimiser updates: the actor, the critic (Q or V) and the dual variables."""

    actor: Callable
    critic: Callable
    dual: Callable

Policy = Union[MaskedCategorical, TanhGaussian]

CONTINUOUS_KL_BOUNDS = ("mean_kl_bound", "scale_kl_bound")
DISCRETE_KL_BOUNDS = ("categorical_kl_bound",)


def kl_bounds(config: DictConfig, action_space: ActionSpace, continuous_only: Sequence[str] = ()) -> Array:
    """The M-step's KL bounds `[C]` for the env's action kind, in the order of `DualVariables.log_kl_multipliers`.

    `continuous_only` names the system's further keys that only continuous actions use (MPO's sampled actions).
    Raises a one-line ConfigError when a key of the other action kind is set, or one of this kind is null.
    """
    system = config.system
    continuous = isinstance(action_space, ContinuousActionSpace)
    env = f"{config.env.suite}/{config.env.scenario.name}"
    kind = "continuous" if continuous else "discrete"
    needed, unused = ((CONTINUOUS_KL_BOUNDS + tuple(continuous_only), DISCRETE_KL_BOUNDS) if continuous
                      else (DISCRETE_KL_BOUNDS, CONTINUOUS_KL_BOUNDS + tuple(continuous_only)))
    for name in unused:
        if system[name] is not None:
            other = "discrete" if continuous else "continuous"
            raise ConfigError(
                f"system.{name}={system[name]} is for {other} actions, and {env} has {kind} ones: set "
                f"system.{name}=null (and system.{'=..., system.'.join(needed)}=...).")
    for name in needed:
        if system[name] is None:
            raise ConfigError(f"system.{name} is null, but {env} has {kind} actions, which need it: set "
                              f"system.{name}=... (and system.{'=null, system.'.join(unused)}=null).")
    bounds = CONTINUOUS_KL_BOUNDS if continuous else DISCRETE_KL_BOUNDS
    return jnp.asarray([float(system[name]) for name in bounds], jnp.float32)


def initial_dual_variables(system: DictConfig, num_kl_bounds: int) -> DualVariables:
    return DualVariables(
        log_temperature=mpo_ops.log_of_multiplier(float(system.init_temperature)),
        log_kl_multipliers=mpo_ops.log_of_multiplier(jnp.full((num_kl_bounds,), float(system.init_kl_multiplier))))


def dual_step(update_fn: Callable, dual: DualVariables, grads: DualVariables, opt_state: optax.OptState
              ) -> Tuple[DualVariables, optax.OptState]:
    """One optimiser step of the dual variables, then their floor: a multiplier whose bound is met for long drifts
    towards zero, and the floor keeps it within reach of the optimiser once its bound binds again."""
    updates, opt_state = update_fn(grads, opt_state, dual)
    dual = jax.tree_util.tree_map(mpo_ops.project_log_multiplier, optax.apply_updates(dual, updates))
    return dual, opt_state


def decoupled_log_prob(online: Policy, target: Policy, action: Array) -> Array:
    """log π(action) for the M-step's fit: the online policy's for a categorical; for a tanh-Gaussian the sum of the
    log-densities with the scale held at the target's (fits the mean) and the mean held at the target's (fits the
    scale). `action` has the policies' batch shape (pre-tanh when continuous)."""
    if isinstance(online, TanhGaussian) and isinstance(target, TanhGaussian):
        target_loc, target_scale = jax.lax.stop_gradient(target.loc), jax.lax.stop_gradient(target.scale)
        fits_mean = TanhGaussian(online.loc, target_scale, online.low, online.high)
        fits_scale = TanhGaussian(target_loc, online.scale, online.low, online.high)
        return fits_mean.log_prob(action) + fits_scale.log_prob(action)
    return online.log_prob(action)


def policy_kls(target: Policy, online: Policy) -> Tuple[Array, Dict[str, Array]]:
    """`[B, C]` KLs of the online policy from the target (C as in `kl_bounds`), and their means as metrics."""
    if isinstance(online, TanhGaussian) and isinstance(target, TanhGaussian):
        kl_mean, kl_scale = mpo_ops.gaussian_kl_decoupled(jax.lax.stop_gradient(target.loc),
                                                          jax.lax.stop_gradient(target.scale), online.loc,
                                                          online.scale)
        return jnp.stack([kl_mean, kl_scale], axis=-1), {"kl_mean": jnp.mean(kl_mean), "kl_scale": jnp.mean(kl_scale)}
    assert isinstance(online, MaskedCategorical) and isinstance(target, MaskedCategorical)
    kl = categorical_kl_divergence(jax.lax.stop_gradient(target.logits), online.logits)
    return kl[:, None], {"kl_categorical": jnp.mean(kl)}


def m_step_loss(log_probs: Array, weights: Array, online: Policy, target: Policy, log_kl_multipliers: Array,
                bounds: Array) -> Tuple[Array, Dict[str, Array]]:
    """The M-step: the weighted fit of `log_probs` (`[B, K]`, from `decoupled_log_prob`) plus the KL constraints
    of the online policy from the target (their multipliers' loss included). Returns (loss, metrics)."""
    fit = mpo_ops.weighted_log_likelihood_loss(log_probs, weights)
    kl, metrics = policy_kls(target, online)
    constraint = mpo_ops.kl_constraint_loss(kl, log_kl_multipliers, bounds)
    multipliers = mpo_ops.multiplier_from_log(log_kl_multipliers)
    names = ("kl_multiplier_mean", "kl_multiplier_scale") if bounds.shape[0] == 2 else ("kl_multiplier",)
    metrics.update({name: multipliers[index] for index, name in enumerate(names)})
    return fit + constraint, {**metrics, "policy_fit_loss": fit}
