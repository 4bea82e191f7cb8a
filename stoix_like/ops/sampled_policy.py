"""The sampled-policy correction of Sampled MuZero (Hubert et al., 2021, "Learning and Planning in Complex Action
Spaces"): a search over K actions sampled from a distribution β uses, as its prior over them, β̂/β·π (normalised),
where β̂ is the samples' empirical distribution and π the policy. The search's policy improvement over the samples
is then, in expectation over the draws, one over the whole action space.

`empirical_distribution` is β̂ as masses per sample index; `sampled_prior_logits` the corrected prior over the K
indices. Nothing here reads a config or keeps state.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

from stoix_like.ops.masking import mask_illegal

Array = jax.Array


def empirical_distribution(samples: Array) -> Array:
    """`[B, K, ...]` -> `[B, K]`: β̂, the K samples' empirical distribution, as a mass per index.

    An action drawn m times holds m/K, at the first index that shows it; its later duplicates hold 0 (so that no
    search expands one action twice). Continuous draws are distinct almost surely: each holds 1/K.
    """
    chex.assert_rank(samples, {2, 3})
    num_samples = samples.shape[1]
    flat = samples.reshape(samples.shape[:2] + (-1,))
    same = jnp.all(flat[:, :, None, :] == flat[:, None, :, :], axis=-1)  # [B, K, K]: index i shows index j's action
    multiplicity = jnp.sum(same, axis=-1)
    earlier = jnp.tril(jnp.ones((num_samples, num_samples), bool), k=-1)  # [i, j]: j < i
    first = ~jnp.any(same & earlier, axis=-1)
    return jnp.where(first, multiplicity / num_samples, 0.0).astype(jnp.float32)


def sampled_prior_logits(sampling_log_probs: Array, prior_log_probs: Array, empirical_probs: Array) -> Array:
    """The corrected prior over K sampled actions, log((β̂/β)·π) normalised over the samples.

    Args:
      sampling_log_probs: `[B, K]` log β(a_k), the distribution the samples were drawn from.
      prior_log_probs: `[B, K]` log π(a_k), the policy's prior.
      empirical_probs: `[B, K]` β̂ at each index (`empirical_distribution`): masses summing to 1 over the K
        indices, an action drawn m times holding m/K over its indices together. An index of mass 0 gets the
        illegal-action fill (ops.masking), so a search never chooses it.

    Returns:
      `[B, K]` log-probabilities (each row's exponentials sum to 1). With β = π this is log β̂; with β uniform it
      is log π renormalised over the samples (β̂ uniform).
    """
    chex.assert_rank([sampling_log_probs, prior_log_probs, empirical_probs], 2)
    chex.assert_equal_shape([sampling_log_probs, prior_log_probs, empirical_probs])
    drawn = empirical_probs > 0
    unnormalised = jnp.log(jnp.where(drawn, empirical_probs, 1.0)) + prior_log_probs - sampling_log_probs
    return jax.nn.log_softmax(mask_illegal(unnormalised, drawn), axis=-1)
