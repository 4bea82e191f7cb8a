"""Actor-critics for continuous actions on replay (continuous_control.py and deterministic_policy_gradient.py are
what they share)."""
