"""stoix_like: a Hydra-driven reinforcement-learning framework in JAX."""
