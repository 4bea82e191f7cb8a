"""Builds networks from the `network` config group (Hydra `_target_` entries)."""

from __future__ import annotations

from typing import Any

import hydra.utils
from omegaconf import DictConfig

from stoix_like.envs.environment import ActionSpace, DiscreteActionSpace
from stoix_like.networks.base import (
    FeedForwardActor,
    FeedForwardCritic,
    FeedForwardQNetwork,
    FeedForwardStateActionCritic,
)
from stoix_like.networks.muzero import MuZeroNetwork
from stoix_like.networks.recurrent import RecurrentActor, RecurrentCritic, RecurrentQNetwork


def instantiate(node: DictConfig, **kwargs: object) -> Any:  # whatever the node's `_target_` builds
    # `_convert_="all"` hands flax modules plain lists/dicts rather than OmegaConf containers
    return hydra.utils.instantiate(node, _convert_="all", **kwargs)


def build_actor(network_config: DictConfig, action_space: ActionSpace) -> FeedForwardActor:
    return FeedForwardActor(
        torso=instantiate(network_config.actor_network.pre_torso),
        # a partial, then the call: Hydra would turn a dataclass keyword argument into a DictConfig
        action_head=instantiate(network_config.actor_network.action_head, _partial_=True)(action_space=action_space),
    )


def build_critic(network_config: DictConfig) -> FeedForwardCritic:
    return FeedForwardCritic(
        torso=instantiate(network_config.critic_network.pre_torso),
        critic_head=instantiate(network_config.critic_network.critic_head),
    )


def build_critic_on_actor_torso(network_config: DictConfig) -> FeedForwardCritic:
    """The critic of a shared-torso network (`network.shared_torso: True`): the actor's torso, built from
    `actor_network.pre_torso`, under `critic_network.critic_head`; networks/actor_critic.shared_torso applies it
    with the actor's torso params."""
    return FeedForwardCritic(
        torso=instantiate(network_config.actor_network.pre_torso),
        critic_head=instantiate(network_config.critic_network.critic_head),
    )


def build_recurrent_actor(network_config: DictConfig, action_space: ActionSpace) -> RecurrentActor:
    """`build_actor` with the network's `recurrent_core` (networks/recurrent.py) between its torso and its head."""
    actor_config = network_config.actor_network
    return RecurrentActor(
        pre_torso=instantiate(actor_config.pre_torso),
        recurrent_core=instantiate(actor_config.recurrent_core),
        action_head=instantiate(actor_config.action_head, _partial_=True)(action_space=action_space),
    )


def build_recurrent_critic(network_config: DictConfig) -> RecurrentCritic:
    critic_config = network_config.critic_network
    return RecurrentCritic(
        pre_torso=instantiate(critic_config.pre_torso),
        recurrent_core=instantiate(critic_config.recurrent_core),
        critic_head=instantiate(critic_config.critic_head),
    )


def build_recurrent_q_network(network_config: DictConfig, action_space: ActionSpace) -> RecurrentQNetwork:
    """`build_q_network` with the network's `recurrent_core` between its torso and its head."""
    q_config = network_config.q_network
    return RecurrentQNetwork(
        pre_torso=instantiate(q_config.pre_torso),
        recurrent_core=instantiate(q_config.recurrent_core),
        q_head=instantiate(q_config.q_head, _partial_=True)(action_space=action_space),
    )


def build_state_action_critic(network_config: DictConfig) -> FeedForwardStateActionCritic:
    """Q(s, a), configured as `q_network` like every Q-function. The module keeps its `critic_head` attribute:
    parameter trees (and so checkpoints) are named after it."""
    return FeedForwardStateActionCritic(
        torso=instantiate(network_config.q_network.pre_torso),
        critic_head=instantiate(network_config.q_network.q_head),
    )


def build_q_network(network_config: DictConfig, action_space: ActionSpace) -> FeedForwardQNetwork:
    return FeedForwardQNetwork(
        torso=instantiate(network_config.q_network.pre_torso),
        q_head=instantiate(network_config.q_network.q_head, _partial_=True)(action_space=action_space),
    )


def build_action_value_network(network_config: DictConfig, action_space: ActionSpace
                               ) -> FeedForwardQNetwork | FeedForwardStateActionCritic:
    """The `q_network` that follows the action space: Q(s, ·) over every action when discrete, Q(s, a) with the
    action as an input when continuous. Its head is built with the action space (`heads.action_value_head`)."""
    torso = instantiate(network_config.q_network.pre_torso)
    head = instantiate(network_config.q_network.q_head, _partial_=True)(action_space=action_space)
    if isinstance(action_space, DiscreteActionSpace):
        return FeedForwardQNetwork(torso=torso, q_head=head)
    return FeedForwardStateActionCritic(torso=torso, critic_head=head)


def build_muzero_network(network_config: DictConfig, action_space: ActionSpace, num_atoms: int
                         ) -> MuZeroNetwork:
    """MuZero's model: `representation_network`, `dynamics_network` and `prediction_network` torsos around a latent
    of `representation_network.latent_size` features (the dynamics' output too); rewards and values on `num_atoms`
    atoms (the system's support). A continuous action space (Sampled MuZero) takes its policy from
    `prediction_network.action_head`, built with the action space."""
    prediction_config = network_config.prediction_network
    if isinstance(action_space, DiscreteActionSpace):
        num_actions, continuous_policy_head = action_space.num_actions, None
    else:
        num_actions = action_space.action_dim
        continuous_policy_head = instantiate(prediction_config.action_head, _partial_=True)(action_space=action_space)
    return MuZeroNetwork(
        representation_torso=instantiate(network_config.representation_network.pre_torso),
        dynamics_torso=instantiate(network_config.dynamics_network.pre_torso),
        prediction_torso=instantiate(prediction_config.pre_torso),
        latent_size=int(network_config.representation_network.latent_size),
        num_actions=num_actions,
        num_atoms=num_atoms,
        continuous_policy_head=continuous_policy_head,
    )
