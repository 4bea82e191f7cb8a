"""On-policy systems: they learn from the rollout they just collected (rollout.py is what they all share;
policy_gradient.py the actor-critic loop of PPO, PPO-penalty, DPO and REINFORCE)."""
