"""Search systems: they act by planning with a tree search (DeepMind's mctx). mcts.py is what they share (the
env-as-model recurrent_fn, the network root, the search policy, search statistics); alphazero.py plans with the
env itself as the model."""
