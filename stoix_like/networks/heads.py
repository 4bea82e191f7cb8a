"""Heads: features in, a distribution or a value out. The policy head is chosen by the env's action space."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from stoix_like.envs.environment import ActionSpace, ContinuousActionSpace, DiscreteActionSpace
from stoix_like.networks.distributions import MaskedCategorical, TanhGaussian


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
        return TanhGaussianHead(
            action_dim=action_space.action_dim,
            low=tuple(np.asarray(action_space.low, np.float32).ravel().tolist()),
            high=tuple(np.asarray(action_space.high, np.float32).ravel().tolist()),
            **kwargs,
        )
    raise TypeError(f"no policy head for action space {action_space!r}")


class ScalarCriticHead(nn.Module):
    @nn.compact
    def __call__(self, features: jax.Array) -> jax.Array:
        return nn.Dense(1, kernel_init=nn.initializers.orthogonal(1.0))(features).squeeze(-1)


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
