"""Heads: features in, a distribution or a value out. The policy head is chosen by the env's action space."""

from __future__ import annotations

from typing import NamedTuple, Tuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from stoix_like.envs.environment import ActionSpace, ContinuousActionSpace, DiscreteActionSpace
from stoix_like.networks.distributions import DeterministicAction, MaskedCategorical, TanhGaussian
from stoix_like.networks.noisy import NoisyDense
from stoix_like.networks.torsos import kernel_init_by_name


class CategoricalHead(nn.Module):
    num_actions: int
    kernel_init: str = "orthogonal"  # gain 0.01; or lecun_uniform

    @nn.compact
    def __call__(self, features: jax.Array, action_mask: jax.Array) -> MaskedCategorical:
        # a small output init keeps the initial policy near uniform, as in PPO reference implementations
        logits = nn.Dense(self.num_actions, kernel_init=kernel_init_by_name(self.kernel_init, 0.01))(features)
        return MaskedCategorical(logits, action_mask)


class TanhGaussianHead(nn.Module):
    """`kernel_init: orthogonal` (gain 0.01) starts every state at loc 0 and scale softplus(0); `lecun_uniform`
    (brax's) starts them varied by state."""

    action_dim: int
    low: tuple
    high: tuple
    min_scale: float = 1e-3
    kernel_init: str = "orthogonal"

    @nn.compact
    def __call__(self, features: jax.Array, action_mask: jax.Array) -> TanhGaussian:
        del action_mask  # continuous actions have none
        loc = nn.Dense(self.action_dim, kernel_init=kernel_init_by_name(self.kernel_init, 0.01))(features)
        scale = nn.Dense(self.action_dim, kernel_init=kernel_init_by_name(self.kernel_init, 0.01))(features)
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


@jax.custom_vjp
def tanh_returning_inward(x: jax.Array) -> jax.Array:
    """tanh, whose gradient is not damped where it would move the action back inside the box.

    A deterministic actor follows dQ/da through its tanh, whose slope 1 − tanh² vanishes at the edges: an actor that
    an early critic pushes deep into saturation (pre-activations of ±40, where the slope is ~1e-34) gets no gradient
    back, whatever the critic later says, and plays one edge action in every state for the rest of the run (D4PG on
    Pendulum, seed 1007: a = −1 everywhere, return −1,439, while the critic's |dQ/da| was 7.5). Here a gradient that
    points inward passes as if through the identity; one that points further out is damped by tanh's slope as
    usual, so the box is still approached, never pushed through. The forward pass is tanh's."""
    return jnp.tanh(x)


def _tanh_forward(x: jax.Array) -> Tuple[jax.Array, jax.Array]:
    y = jnp.tanh(x)
    return y, y


def _tanh_backward(y: jax.Array, cotangent: jax.Array) -> Tuple[jax.Array]:
    # a descent step moves y by -cotangent: inward (towards 0) when cotangent and y share a sign
    inward = cotangent * y > 0
    return (jnp.where(inward, cotangent, cotangent * (1.0 - y * y)),)


tanh_returning_inward.defvjp(_tanh_forward, _tanh_backward)


class DeterministicHead(nn.Module):
    """A deterministic policy: tanh keeps the action in [-1, 1]; the env's bounds are applied on the way out.
    `inward_gradient`: squash with `tanh_returning_inward`, so a saturated actor can come back."""

    action_dim: int
    low: tuple
    high: tuple
    inward_gradient: bool = False

    @nn.compact
    def __call__(self, features: jax.Array, action_mask: jax.Array) -> DeterministicAction:
        del action_mask  # continuous actions have none
        squash = tanh_returning_inward if self.inward_gradient else jnp.tanh
        action = squash(nn.Dense(self.action_dim, kernel_init=nn.initializers.orthogonal(0.01))(features))
        return DeterministicAction(action, jnp.asarray(self.low, jnp.float32), jnp.asarray(self.high, jnp.float32))


def deterministic_head(action_space: ActionSpace, **kwargs) -> nn.Module:
    """The deterministic policy head (DDPG, TD3, D4PG); a discrete space is a clear error."""
    if not isinstance(action_space, ContinuousActionSpace):
        raise TypeError(f"a deterministic policy head needs continuous actions, the env has {action_space!r}")
    return DeterministicHead(**_box_fields(action_space), **kwargs)


class ScalarCriticHead(nn.Module):
    kernel_init: str = "orthogonal"  # gain 1.0; or lecun_uniform (brax's)

    @nn.compact
    def __call__(self, features: jax.Array) -> jax.Array:
        return nn.Dense(1, kernel_init=kernel_init_by_name(self.kernel_init, 1.0))(features).squeeze(-1)


class CategoricalCriticHead(nn.Module):
    """A value distribution on `num_atoms` fixed atoms spread evenly over [v_min, v_max] (C51, D4PG).

    Returns `(logits [..., num_atoms], atoms [num_atoms])`: the support lives with the head that predicts on it.
    """

    num_atoms: int = 51
    v_min: float = -100.0
    v_max: float = 100.0

    @nn.compact
    def __call__(self, features: jax.Array) -> Tuple[jax.Array, jax.Array]:
        logits = nn.Dense(self.num_atoms, kernel_init=nn.initializers.orthogonal(1.0))(features)
        return logits, jnp.linspace(self.v_min, self.v_max, self.num_atoms, dtype=jnp.float32)


class CategoricalQOutput(NamedTuple):
    """A categorical return distribution per action (C51): Q(s, a) = Σ_i softmax(logits[a])_i · atoms_i."""

    q_values: jax.Array  # [..., A]
    logits: jax.Array  # [..., A, N]
    atoms: jax.Array  # [N], the fixed support


class QuantileQOutput(NamedTuple):
    """N quantiles of the return per action (QR-DQN): Q(s, a) = mean_i quantiles[a, i]."""

    q_values: jax.Array  # [..., A]
    quantiles: jax.Array  # [..., A, N]


def _per_action_outputs(features: jax.Array, num_actions: int, size: int, dueling: bool, noisy: bool,
                        kernel_init=nn.initializers.orthogonal(1.0)) -> jax.Array:
    """`size` outputs per action, [..., A, size]; the building block every Q head shares.

    Dueling (Wang et al., 2016): a state value plus advantages centred over actions, so that the value is
    learnt from every action's target. Noisy: the layers are NoisyDense (see networks/noisy.py).
    """

    def dense(features_out: int) -> nn.Module:
        return NoisyDense(features_out) if noisy else nn.Dense(features_out, kernel_init=kernel_init)

    per_action = lambda x: x.reshape(x.shape[:-1] + (num_actions, size))
    if not dueling:
        return per_action(dense(num_actions * size)(features))
    value = dense(size)(features)[..., None, :]
    advantages = per_action(dense(num_actions * size)(features))
    return value + advantages - jnp.mean(advantages, axis=-2, keepdims=True)


class DiscreteQHead(nn.Module):
    """One Q-value per action, [..., A]."""

    num_actions: int
    dueling: bool = False
    noisy: bool = False

    @nn.compact
    def __call__(self, features: jax.Array) -> jax.Array:
        return _per_action_outputs(features, self.num_actions, 1, self.dueling, self.noisy)[..., 0]


class CategoricalQHead(nn.Module):
    """Logits over `num_atoms` evenly spaced returns in [v_min, v_max] per action (C51)."""

    num_actions: int
    num_atoms: int = 51
    v_min: float = 0.0
    v_max: float = 100.0
    dueling: bool = False
    noisy: bool = False

    @nn.compact
    def __call__(self, features: jax.Array) -> CategoricalQOutput:
        atoms = jnp.linspace(self.v_min, self.v_max, self.num_atoms)
        logits = _per_action_outputs(features, self.num_actions, self.num_atoms, self.dueling, self.noisy)
        q_values = jnp.sum(jax.nn.softmax(logits, axis=-1) * atoms, axis=-1)
        return CategoricalQOutput(q_values=q_values, logits=logits, atoms=atoms)


class QuantileQHead(nn.Module):
    """`num_quantiles` return quantiles per action, at midpoints τ_i = (2i + 1) / 2N (QR-DQN)."""

    num_actions: int
    num_quantiles: int = 51
    dueling: bool = False
    noisy: bool = False

    @nn.compact
    def __call__(self, features: jax.Array) -> QuantileQOutput:
        quantiles = _per_action_outputs(features, self.num_actions, self.num_quantiles, self.dueling, self.noisy)
        return QuantileQOutput(q_values=jnp.mean(quantiles, axis=-1), quantiles=quantiles)


def _discrete_actions(action_space: ActionSpace, head: str) -> int:
    if not isinstance(action_space, DiscreteActionSpace):
        raise TypeError(f"a {head} needs discrete actions, the env has {action_space!r}")
    return action_space.num_actions


def q_head(action_space: ActionSpace, **kwargs) -> nn.Module:
    """The scalar Q head for a discrete action space (kwargs: dueling, noisy); a continuous space is an error."""
    return DiscreteQHead(num_actions=_discrete_actions(action_space, "discrete Q head"), **kwargs)


def action_value_head(action_space: ActionSpace) -> nn.Module:
    """The Q head that follows the action space, as `policy_head` does: one value per action for a discrete space
    (on Q(s, ·)), one value for a box (on Q(s, a), the action an input)."""
    if isinstance(action_space, DiscreteActionSpace):
        return DiscreteQHead(num_actions=action_space.num_actions)
    if isinstance(action_space, ContinuousActionSpace):
        return ScalarCriticHead()
    raise TypeError(f"no action-value head for action space {action_space!r}")


def categorical_q_head(action_space: ActionSpace, **kwargs) -> nn.Module:
    return CategoricalQHead(num_actions=_discrete_actions(action_space, "categorical Q head"), **kwargs)


def quantile_q_head(action_space: ActionSpace, **kwargs) -> nn.Module:
    return QuantileQHead(num_actions=_discrete_actions(action_space, "quantile Q head"), **kwargs)
