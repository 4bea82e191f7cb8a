"""An actor and a critic read from one `ActorCriticParams` pair: two separate networks, or a critic head on the
actor's torso (`network.shared_torso: True`).

The learners see only `PolicyAndValue`, whose functions take the whole pair, so one loss and one gradient serve
both layouts. With a shared torso the torso's params live once, in the actor's half (so the actor's params alone
still make a complete policy, for acting and evaluation), and the critic's half holds its head only: the gradient of
the summed losses reaches the torso from both heads, and the actor's optimiser steps it.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Union

from stoix_like.networks.distributions import MaskedCategorical, TanhGaussian
from stoix_like.types import ActorCriticParams, Array, Observation, Params

# the flax submodule name FeedForwardActor and FeedForwardCritic both give their torso
TORSO = "torso"


class PolicyAndValue(NamedTuple):
    """The policy's distribution and the state value, each read from the whole (actor, critic) params pair."""

    policy: Callable[[ActorCriticParams, Observation], Union[MaskedCategorical, TanhGaussian]]
    value: Callable[[ActorCriticParams, Observation], Array]


def separate_networks(actor_apply: Callable, critic_apply: Callable) -> PolicyAndValue:
    """Each network reads its own half of the pair."""
    return PolicyAndValue(policy=lambda params, observation: actor_apply(params.actor, observation),
                          value=lambda params, observation: critic_apply(params.critic, observation))


def drop_torso(critic_params: Params) -> Params:
    """A critic's initial params without its torso, which it will read from the actor's params instead."""
    return {"params": {name: leaf for name, leaf in critic_params["params"].items() if name != TORSO}}


def shared_torso(actor_apply: Callable, critic_apply: Callable) -> PolicyAndValue:
    """The critic (a module with the actor's torso and its own head) is applied with the actor's torso params and
    its own head's, so that both heads read, and train, one torso."""

    def value(params: ActorCriticParams, observation: Observation) -> Array:
        with_torso = {"params": {**params.critic["params"], TORSO: params.actor["params"][TORSO]}}
        return critic_apply(with_torso, observation)

    return PolicyAndValue(policy=lambda params, observation: actor_apply(params.actor, observation), value=value)
