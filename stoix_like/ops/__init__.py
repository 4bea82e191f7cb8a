"""Pure, batched, chex-checked RL math in the style of rlax.

`returns` holds time-major return estimators (GAE, lambda-returns, n-step returns); `losses` holds the
per-example and scalar losses that systems combine. Nothing here reads a config or keeps state.
"""
