"""Heads: features in, a distribution or a value out. The policy head is chosen by the env's action space."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from stoix_like.envs.environment import ActionSpace, ContinuousActionSpace, DiscreteActionSpace
from stoix_like.networks.distributions import DeterministicAction, MaskedCategorical, TanhGaussian


class CategoricalHead(nn.Module):
    num_actions: int

    @nn.compact
    def __call__(self, features: jax.Array, action_mask: jax.Array) -> MaskedCategorical:
        # a small output init keeps the initial policy near uniform, as in PPO reference implementations
        logits = nn.Dense(self.num_actions, kernel_init=nn.initializers.orthogonal(0.01))(features)
        return MaskedCategorical(logits, action_mask)


class TanhGaussianHead(nn.Module):
    action_dim: int
    low: tuple
    high: tuple
    min_scale: float = 1e-3

    @nn.compact
    def __call__(self, features: jax.Array, action_mask: jax.Array) -> TanhGaussian:
        del action_mask  # continuous actions have none
        loc = nn.Dense(self.action_dim, kernel_init=nn.initializers.orthogonal(0.01))(features)
        scale = nn.Dense(self.action_dim, kernel_init=nn.initializers.orthogonal(0.01))(features)
        scale = jax.nn.softplus(scale) + self.min_scale
        return TanhGaussian(loc, scale, jnp.asarray(self.low, jnp.float32), jnp.asarray(self.high, jnp.float32))


def policy_head(action_space: ActionSpace, **kwargs) -> nn.Module:
    """The policy head that fits the env: categorical for discrete actions, tanh-Gaussian for boxes."""
    if isinstance(action_space, DiscreteActionSpace):
        return CategoricalHead(num_actions=action_space.num_actions, **kwargs)
    if isinstance(action_space, ContinuousActionSpace):
        return TanhGaussianHead(**_box_fields(action_space), **kwargs)
    raise TypeError(f"no policy head for action space {action_space!r}")


def _box_fields(action_space: ContinuousActionSpace) -> dict:
    # tuples, not arrays: flax module fields must be hashable
    return dict(
        action_dim=action_space.action_dim,
        low=tuple(np.asarray(action_space.low, np.float32).ravel().tolist()),
        high=tuple(np.asarray(action_space.high, np.float32).ravel().tolist()),
    )


class DeterministicHead(nn.Module):
    """A deterministic policy: tanh keeps the action in [-1, 1]; the env's bounds are applied on the way out."""

    action_dim: int
    low: tuple
    high: tuple

    @nn.compact
    def __call__(self, features: jax.Array, action_mask: jax.Array) -> DeterministicAction:
        del action_mask  # continuous actions have none
        action = jnp.tanh(nn.Dense(self.action_dim, kernel_init=nn.initializers.orthogonal(0.01))(features))
        return DeterministicAction(action, jnp.asarray(self.low, jnp.float32), jnp.asarray(self.high, jnp.float32))


def deterministic_head(action_space: ActionSpace, **kwargs) -> nn.Module:
    """The deterministic policy head (DDPG, TD3, D4PG); a discrete space is a clear error."""
    if not isinstance(action_space, ContinuousActionSpace):
        raise TypeError(f"a deterministic policy head needs continuous actions, the env has {action_space!r}")
    return DeterministicHead(**_box_fields(action_space), **kwargs)


class ScalarCriticHead(nn.Module):
    @nn.compact
    def __call__(self, features: jax.Array) -> jax.Array:
        return nn.Dense(1, kernel_init=nn.initializers.orthogonal(1.0))(features).squeeze(-1)


class CategoricalCriticHead(nn.Module):
    """A value distribution on `num_atoms` fixed atoms spread evenly over [v_min, v_max] (C51, D4PG).

    Returns `(logits [..., num_atoms], atoms [num_atoms])`: the support lives with the head that predicts on it.
    """

    num_atoms: int = 51
    v_min: float = -100.0
    v_max: float = 100.0

    @nn.compact
    def __call__(self, features: jax.Array):
        logits = nn.Dense(self.num_atoms, kernel_init=nn.initializers.orthogonal(1.0))(features)
        return logits, jnp.linspace(self.v_min, self.v_max, self.num_atoms, dtype=jnp.float32)


class DiscreteQHead(nn.Module):
    """One Q-value per action."""

    num_actions: int

    @nn.compact
    def __call__(self, features: jax.Array) -> jax.Array:
        return nn.Dense(self.num_actions, kernel_init=nn.initializers.orthogonal(1.0))(features)


def q_head(action_space: ActionSpace, **kwargs) -> nn.Module:
    """The Q head for a discrete action space; a continuous space is a clear error."""
    if not isinstance(action_space, DiscreteActionSpace):
        raise TypeError(f"a discrete Q head needs discrete actions, the env has {action_space!r}")
    return DiscreteQHead(num_actions=action_space.num_actions, **kwargs)
