"""MuZero's learned model (Schrittwieser et al., 2020): representation, dynamics and prediction in one module.

  * `represent(observation) -> latent`: the observation's latent state.
  * `dynamics(latent, action) -> (next latent, reward logits)`: one imagined step.
  * `predict(latent) -> (policy, value logits)`: what the search reads at a node.

Discrete actions (MuZero): the policy is logits over `num_actions`, and the dynamics reads the action one-hot.
Continuous actions (Sampled MuZero): `continuous_policy_head` (a tanh-Gaussian head, networks/heads.py) gives the
policy as its distribution's `(loc, scale)`, and the dynamics reads the action itself, squashed into [-1, 1]^D
(`num_actions` is then the action's dimensions).

Rewards and values are logits over a categorical support in h-space (ops/value_support.py); the system reads them
back as scalars. Every latent is min-max normalised to [0, 1] per example (the paper's appendix G), so the
dynamics' inputs stay on one scale however deep the search unrolls. The reward and value heads start at zero, so
the first predictions are the support's middle, 0, rather than noise the first targets must undo.
"""

from __future__ import annotations

from typing import Optional, Tuple, Union

import flax.linen as nn
import jax
import jax.numpy as jnp

from stoix_like.types import Observation


def min_max_normalize(latent: jax.Array) -> jax.Array:
    """`[..., D]` each latent scaled to [0, 1] over its features; a constant latent maps to 0."""
    low = jnp.min(latent, axis=-1, keepdims=True)
    high = jnp.max(latent, axis=-1, keepdims=True)
    return (latent - low) / jnp.maximum(high - low, 1e-8)


class MuZeroNetwork(nn.Module):
    representation_torso: nn.Module
    dynamics_torso: nn.Module
    prediction_torso: nn.Module
    latent_size: int
    num_actions: int  # discrete: the actions; continuous: the action's dimensions
    num_atoms: int
    continuous_policy_head: Optional[nn.Module] = None  # None: discrete actions, a categorical policy

    def setup(self) -> None:
        self.representation_out = nn.Dense(self.latent_size)
        self.dynamics_out = nn.Dense(self.latent_size)
        self.reward_head = nn.Dense(self.num_atoms, kernel_init=nn.initializers.zeros)
        if self.continuous_policy_head is None:
            # a small policy init keeps the first prior near uniform, as the actor-critics' CategoricalHead does
            self.policy_head = nn.Dense(self.num_actions, kernel_init=nn.initializers.orthogonal(0.01))
        self.value_head = nn.Dense(self.num_atoms, kernel_init=nn.initializers.zeros)

    def represent(self, observation: Observation) -> jax.Array:
        return min_max_normalize(self.representation_out(self.representation_torso(observation.agent_view)))

    def dynamics(self, latent: jax.Array, action: jax.Array) -> Tuple[jax.Array, jax.Array]:
        """`action`: `[...]` int (discrete) or `[..., D]` in [-1, 1] (continuous)."""
        if self.continuous_policy_head is None:
            action = jax.nn.one_hot(action, self.num_actions, dtype=latent.dtype)
        features = self.dynamics_torso(jnp.concatenate([latent, action.astype(latent.dtype)], axis=-1))
        return min_max_normalize(self.dynamics_out(features)), self.reward_head(features)

    def predict(self, latent: jax.Array) -> Tuple[Union[jax.Array, Tuple[jax.Array, jax.Array]], jax.Array]:
        """The policy (`[..., A]` logits, or a tanh-Gaussian's `(loc, scale)`, each `[..., D]`) and value logits."""
        features = self.prediction_torso(latent)
        if self.continuous_policy_head is None:
            return self.policy_head(features), self.value_head(features)
        return self.continuous_policy_head(features, None).parameters(), self.value_head(features)

    def __call__(self, observation: Observation, action: jax.Array):
        """Every part once (what `init` traces): an observation's latent, one step from it, the prediction there."""
        latent, _ = self.dynamics(self.represent(observation), action)
        return self.predict(latent)
