"""One functional environment API; suites are adapted to it and imported only when asked for."""

from stoix_like.envs.environment import (
    ActionSpace,
    ContinuousActionSpace,
    DiscreteActionSpace,
    Environment,
    Wrapper,
)
from stoix_like.envs.factory import AVAILABLE_SUITES, make
from stoix_like.envs.wrappers import AutoReset, EpisodeMetrics, NextObservation, VmapWrapper

__all__ = [
    "AVAILABLE_SUITES",
    "ActionSpace",
    "AutoReset",
    "ContinuousActionSpace",
    "DiscreteActionSpace",
    "Environment",
    "EpisodeMetrics",
    "NextObservation",
    "VmapWrapper",
    "Wrapper",
    "make",
]
