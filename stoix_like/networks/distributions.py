"""Action distributions with one interface for discrete and continuous actions.

Both expose `sample(seed)`, `log_prob(action)`, `entropy(seed)`, `mode()` and `to_env_action(action)`, and
`parameters()` with `kl_from(parameters)`: an on-policy learner records the acting distribution's parameters per
step, so that KL(π_old ‖ π) is exact later (PPO-penalty), not estimated from the sampled actions.
The continuous one samples *pre-tanh* actions: storing the raw sample and squashing only when the env is
stepped keeps `log_prob` exact (inverting tanh near ±1 is numerically unstable).
`DeterministicAction` (a deterministic policy's output, already in [-1, 1]) has no density.

Continuous actions are rescaled from the unit box to the env's bounds in `unit_box_to_bounds` and nowhere
else: critics and replay see the normalised action, only the env sees the rescaled one.

The categorical is written here, not taken from distrax: importing distrax loads TensorFlow Probability's JAX
substrate, 2.4 s of a command-line run's start on 2 cores (issue 15's first-result target is 12 s in all), for
three one-line formulas. Its numbers are distrax.Categorical's, bit for bit (tests/test_start_up.py).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from stoix_like.ops.losses import categorical_kl_divergence, gaussian_kl_divergence, tanh_gaussian_log_prob
from stoix_like.ops.masking import mask_illegal


class MaskedCategorical:
    def __init__(self, logits: jax.Array, action_mask: jax.Array):
        # a finite fill (not -inf): 0 * log(0) terms of the entropy would be NaN
        self.logits = mask_illegal(logits, action_mask)
        self._log_probs = jax.nn.log_softmax(self.logits, axis=-1)

    def sample(self, seed: jax.Array) -> jax.Array:
        # from the normalised log-probabilities, as distrax samples: the Gumbel argmax then matches it bit for bit
        return jax.random.categorical(seed, self._log_probs, axis=-1)

    def log_prob(self, action: jax.Array) -> jax.Array:
        # the chosen entry selected and summed with zeros (exact), not gathered: a gather's gradient is a scatter,
        # 4 of a PPO minibatch step's ~120 XLA kernels on CPU, while a select fuses into its neighbours (1.01×)
        chosen = jnp.arange(self._log_probs.shape[-1]) == action[..., None]
        return jnp.sum(jnp.where(chosen, self._log_probs, 0.0), axis=-1)

    def entropy(self, seed: jax.Array | None = None) -> jax.Array:
        del seed  # exact for a categorical
        # normalised once more, as distrax does (the log-probabilities then sum to 1 to the last bit)
        log_probs = jax.nn.log_softmax(self._log_probs, axis=-1)
        probs = jnp.exp(log_probs)
        # an illegal action's probability underflows to 0: its term is 0, whatever its (finite) log-probability
        return -jnp.sum(jnp.where(probs == 0, 0.0, log_probs) * probs, axis=-1)

    def mode(self) -> jax.Array:
        return jnp.argmax(self.logits, axis=-1)

    def to_env_action(self, action: jax.Array) -> jax.Array:
        return action

    def parameters(self) -> jax.Array:
        """`[..., A]` masked logits: with the same mask, all `kl_from` needs of this distribution."""
        return self.logits

    def kl_from(self, behaviour_logits: jax.Array) -> jax.Array:
        """`[B]` KL(behaviour ‖ self), the behaviour given by its `parameters()` `[B, A]`."""
        return categorical_kl_divergence(behaviour_logits, self.logits)


def unit_box_to_bounds(action: jax.Array, low: jax.Array, high: jax.Array) -> jax.Array:
    """Affine map of an action in [-1, 1] onto the env's box [low, high]."""
    return low + (action + 1.0) * 0.5 * (high - low)


class TanhGaussian:
    """Gaussian on pre-tanh actions; the env sees tanh(u) rescaled affinely to [low, high].

    `log_prob` is the density of the squashed action in [-1, 1] (the usual SAC convention, so the target
    entropy −|A| does not depend on the env's bounds); the fixed affine rescale is outside the policy.
    """

    def __init__(self, loc: jax.Array, scale: jax.Array, low: jax.Array, high: jax.Array):
        self.loc, self.scale, self.low, self.high = loc, scale, low, high

    def sample(self, seed: jax.Array) -> jax.Array:
        return self.loc + self.scale * jax.random.normal(seed, self.loc.shape, self.loc.dtype)

    def log_prob(self, pre_tanh_action: jax.Array) -> jax.Array:
        return tanh_gaussian_log_prob(self.loc, jnp.log(self.scale), pre_tanh_action)

    def entropy(self, seed: jax.Array) -> jax.Array:
        """One-sample estimate: the squashed Gaussian has no closed-form entropy."""
        return -self.log_prob(self.sample(seed))

    def mode(self) -> jax.Array:
        return self.loc

    def to_env_action(self, pre_tanh_action: jax.Array) -> jax.Array:
        return unit_box_to_bounds(self.squash(pre_tanh_action), self.low, self.high)

    def squash(self, pre_tanh_action: jax.Array) -> jax.Array:
        """The action in [-1, 1] that `log_prob` is the density of (what a Q-critic is trained on)."""
        return jnp.tanh(pre_tanh_action)

    def parameters(self) -> tuple:
        """`(loc, scale)`, each `[..., D]`: the pre-tanh Gaussian (the env's bounds are fixed, not a parameter)."""
        return self.loc, self.scale

    def kl_from(self, behaviour_parameters: tuple) -> jax.Array:
        """`[B]` KL(behaviour ‖ self), the behaviour given by its `parameters()`. Exact: tanh is a bijection, so
        the squashed distributions are as far apart as their pre-tanh Gaussians."""
        behaviour_loc, behaviour_scale = behaviour_parameters
        return gaussian_kl_divergence(behaviour_loc, jnp.log(behaviour_scale), self.loc, jnp.log(self.scale))


class DeterministicAction:
    """A deterministic policy's action in [-1, 1], behind the distribution interface (for acting and evaluation)."""

    def __init__(self, action: jax.Array, low: jax.Array, high: jax.Array):
        self.action, self.low, self.high = action, low, high

    def sample(self, seed: jax.Array) -> jax.Array:
        del seed  # exploration noise is the system's business (stoix_like.learner.exploration)
        return self.action

    def mode(self) -> jax.Array:
        return self.action

    def to_env_action(self, action: jax.Array) -> jax.Array:
        return unit_box_to_bounds(action, self.low, self.high)
