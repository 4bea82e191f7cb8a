"""Pure, batched, chex-checked RL math in the style of rlax.

`returns` holds time-major return estimators (GAE, lambda-returns, n-step returns over a sequence; replay collapses n-step sequences itself,
stoix_like.learner.replay.n_step_transition); `losses` holds the per-example and scalar losses that systems combine;
`masking` the illegal-action max, argmax and fill value; `indexing` the value of the action taken; `mpo` the
dual-variable machinery of MPO and V-MPO (temperature duals, KLs, KL constraints, log-space multipliers);
`value_support` MuZero's invertible value transform and two-hot categorical supports.
Nothing here reads a config or keeps state.
"""
