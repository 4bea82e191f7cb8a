"""Search systems: they act by planning, with a tree search (DeepMind's mctx) or a particle filter. mcts.py is what
they share (the env-as-model recurrent_fn, the network root, the search policy, search statistics); alphazero.py
plans with the env itself as the model, and its learner serves sampled_alphazero.py and spo.py (SMC planning)
through its `Search` seam."""
