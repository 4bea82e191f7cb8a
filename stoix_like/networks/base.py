"""Networks assembled from a torso and a head; both come from Hydra config."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from stoix_like.types import Observation


class FeedForwardActor(nn.Module):
    torso: nn.Module
    action_head: nn.Module

    @nn.compact
    def __call__(self, observation: Observation):
        return self.action_head(self.torso(observation.agent_view), observation.action_mask)


class FeedForwardCritic(nn.Module):
    torso: nn.Module
    critic_head: nn.Module

    @nn.compact
    def __call__(self, observation: Observation) -> jax.Array:
        return self.critic_head(self.torso(observation.agent_view))


class FeedForwardQNetwork(nn.Module):
    """Observation in, action values out (the head decides their form: scalars, atoms or quantiles)."""

    torso: nn.Module
    q_head: nn.Module

    @nn.compact
    def __call__(self, observation: Observation):
        return self.q_head(self.torso(observation.agent_view))


class FeedForwardStateActionCritic(nn.Module):
    """Q(s, a) for continuous actions: the observation and the (normalised) action go in together."""

    torso: nn.Module
    critic_head: nn.Module

    @nn.compact
    def __call__(self, observation: Observation, action: jax.Array):
        view = observation.agent_view
        features = jnp.concatenate([view.reshape(view.shape[:-1] + (-1,)), action], axis=-1)
        return self.critic_head(self.torso(features))
