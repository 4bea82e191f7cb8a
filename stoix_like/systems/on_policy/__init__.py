"""On-policy systems: they learn from the rollout they just collected (rollout.py is what they share)."""
