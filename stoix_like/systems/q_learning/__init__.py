"""Q-learning systems on replay: scalar and distributional DQN variants (value_based.py is what they share)."""
