"""DDPG (Lillicrap et al., 2016): TD3's learner with its three additions switched off.

config/system/ddpg.yaml sets one critic, an actor update every step and no target-policy smoothing;
everything else is td3.py and deterministic_policy_gradient.py.
"""

from stoix_like.systems.actor_critic.td3 import get_learn_from_batch, learner_setup, run_experiment

__all__ = ["get_learn_from_batch", "learner_setup", "run_experiment"]
