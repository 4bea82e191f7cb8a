"""Noisy linear layers (Fortunato et al., 2018, "Noisy Networks for Exploration"), factorised Gaussian noise.

A noisy layer computes y = (μ_w + σ_w ⊙ ε_w) x + μ_b + σ_b ⊙ ε_b with ε_w = f(ε_out) f(ε_in)ᵀ, ε_b = f(ε_out),
f(x) = sign(x)·√|x| and ε_in, ε_out standard normal: p + q noise draws per layer instead of p·q.

Whether noise is drawn is decided by the caller, not by a flag threaded through every module: applying a
network with `rngs={"noise": key}` samples one perturbed network (shared by the whole batch); applying it
without a "noise" stream uses the mean weights μ, which is the deterministic evaluation path. Modules with
no noisy layer ignore the stream, so value-based systems can always pass one.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

NOISE_STREAM = "noise"


def _scaled_noise(key: jax.Array, size: int) -> jax.Array:
    noise = jax.random.normal(key, (size,))
    return jnp.sign(noise) * jnp.sqrt(jnp.abs(noise))


class NoisyDense(nn.Module):
    """A Dense layer with learnt, factorised Gaussian weight noise. Initialisation as in the paper (§3.2)."""

    features: int
    sigma_zero: float = 0.5  # initial σ = sigma_zero / √(inputs)

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        num_inputs = x.shape[-1]
        bound = 1.0 / jnp.sqrt(num_inputs)
        uniform = lambda key, shape: jax.random.uniform(key, shape, minval=-bound, maxval=bound)
        constant_sigma = lambda key, shape: jnp.full(shape, self.sigma_zero / jnp.sqrt(num_inputs))
        kernel_mean = self.param("kernel_mean", uniform, (num_inputs, self.features))
        kernel_sigma = self.param("kernel_sigma", constant_sigma, (num_inputs, self.features))
        bias_mean = self.param("bias_mean", uniform, (self.features,))
        bias_sigma = self.param("bias_sigma", constant_sigma, (self.features,))
        if not self.has_rng(NOISE_STREAM):
            return x @ kernel_mean + bias_mean
        input_key, output_key = jax.random.split(self.make_rng(NOISE_STREAM))
        input_noise = _scaled_noise(input_key, num_inputs)
        output_noise = _scaled_noise(output_key, self.features)
        # (μ + σ ⊙ ε_out ε_inᵀ) x, without materialising the p×q noise matrix
        noisy_part = ((x * input_noise) @ kernel_sigma) * output_noise
        return x @ kernel_mean + noisy_part + bias_mean + bias_sigma * output_noise
