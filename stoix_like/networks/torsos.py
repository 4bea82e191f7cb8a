"""Torsos: observation features in, a feature vector out."""

from __future__ import annotations

from typing import Callable, Sequence, Tuple

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

_ACTIVATIONS = {"tanh": nn.tanh, "relu": nn.relu, "silu": nn.silu, "elu": nn.elu, "gelu": nn.gelu}


def activation_by_name(name: str) -> Callable[[jax.Array], jax.Array]:
    if name not in _ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; choose one of {sorted(_ACTIVATIONS)}")
    return _ACTIVATIONS[name]


# Kernel initialisers by name: "orthogonal" with the gain the layer's role calls for (√2 before a ReLU-like
# activation, 1.0 for a value, 0.01 for a policy's output), or "lecun_uniform", brax's for every layer (no gain).
KERNEL_INITS = ("orthogonal", "lecun_uniform")


def kernel_init_by_name(name: str, orthogonal_gain: float) -> nn.initializers.Initializer:
    if name == "orthogonal":
        return nn.initializers.orthogonal(orthogonal_gain)
    if name == "lecun_uniform":
        return nn.initializers.lecun_uniform()
    raise ValueError(f"unknown kernel_init {name!r}; choose one of {', '.join(KERNEL_INITS)}")


class MLPTorso(nn.Module):
    """Dense layers with orthogonal(√2) init, the PPO-standard initialisation (`kernel_init: lecun_uniform`:
    brax's); optional LayerNorm (PQN needs it)."""

    layer_sizes: Sequence[int]
    activation: str = "relu"
    use_layer_norm: bool = False
    kernel_init: str = "orthogonal"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = activation_by_name(self.activation)
        x = x.reshape(x.shape[: x.ndim - 1] + (-1,)) if x.ndim else x
        for size in self.layer_sizes:
            x = nn.Dense(size, kernel_init=kernel_init_by_name(self.kernel_init, np.sqrt(2.0)),
                         bias_init=nn.initializers.zeros)(x)
            if self.use_layer_norm:
                x = nn.LayerNorm()(x)
            x = act(x)
        return x


def _grids_in_one_batch(torso: str, x: jax.Array) -> Tuple[jax.Array, Tuple[int, ...]]:
    """(..., height, width, channels) grids as one batch axis, and the leading axes to restore after the torso."""
    if x.ndim < 3:
        raise ValueError(f"{torso} reads (..., height, width, channels) observations, got shape {x.shape}: "
                         "set env.observation_layout=image")
    return x.reshape((-1,) + x.shape[-3:]), x.shape[:-3]


class CNNTorso(nn.Module):
    """Convolutions over a (height, width, channels) observation (`env.observation_layout=image`), then dense
    layers. Leading axes are batch axes, however many (a rollout's (T, envs) included). "SAME" padding, so
    MinAtar's 10×10 and MiniGrid's 7×7 grids keep their size at stride 1; orthogonal(√2) init, as the MLP's.

    Each convolution is written as a dense layer over the k×k patches (`same_padded_patches`), which computes
    exactly what `nn.Conv` does (the same kernel, reshaped) but is ~13× faster to train on CPU here: inside
    PPO's scanned epochs XLA's CPU convolution gradients ran at ~200 ms per step on a batch of 50 8×8 grids,
    the patches' dense layers at ~15 ms (jax 0.10.2, 2 cores).
    """

    channels: Sequence[int]
    kernel_sizes: Sequence[int]
    strides: Sequence[int]
    layer_sizes: Sequence[int]
    activation: str = "relu"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x, batch_shape = _grids_in_one_batch("CNNTorso", x)
        act = activation_by_name(self.activation)
        for channels, kernel_size, stride in zip(self.channels, self.kernel_sizes, self.strides, strict=True):
            x = nn.Dense(channels, kernel_init=nn.initializers.orthogonal(np.sqrt(2.0)),
                         bias_init=nn.initializers.zeros)(same_padded_patches(x, kernel_size, stride))
            x = act(x)
        x = x.reshape(batch_shape + (-1,))
        return MLPTorso(self.layer_sizes, self.activation)(x)


class ResNetTorso(nn.Module):
    """IMPALA's residual CNN (Espeholt et al. 2018, the "deep" network) over (..., height, width, channels)
    observations (`env.observation_layout=image`), then dense layers.

    Each stage: a 3×3 convolution to `channels[i]`, a 3×3 max-pool of stride 2 ("SAME": 84 → 42 → 21 → 11), then
    `blocks_per_stage` residual blocks (relu → conv 3×3 → relu → conv 3×3, added to the block's input). After
    the stages: relu, flatten, `layer_sizes` dense layers. Leading axes are batch axes, however many.

    Unlike CNNTorso's patch-matrix convolutions (fast on CPU for small grids), these are `nn.Conv`: at 84×84 the
    patch matrices of every layer would be 9× the activations, and accelerators have convolution kernels.
    """

    channels: Sequence[int]
    layer_sizes: Sequence[int]
    blocks_per_stage: int = 2
    activation: str = "relu"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x, batch_shape = _grids_in_one_batch("ResNetTorso", x)
        act = activation_by_name(self.activation)

        def conv(features: int) -> nn.Conv:
            return nn.Conv(features, (3, 3), padding="SAME", kernel_init=nn.initializers.orthogonal(np.sqrt(2.0)),
                           bias_init=nn.initializers.zeros)

        for channels in self.channels:
            x = conv(channels)(x)
            x = nn.max_pool(x, (3, 3), strides=(2, 2), padding="SAME")
            for _ in range(self.blocks_per_stage):
                residual = conv(channels)(act(x))
                x = x + conv(channels)(act(residual))
        x = act(x).reshape(batch_shape + (-1,))
        return MLPTorso(self.layer_sizes, self.activation)(x)


def same_padded_patches(images: jax.Array, kernel_size: int, stride: int) -> jax.Array:
    """The k×k patches a "SAME"-padded convolution reads, one per output pixel.

    Args:
        images: (batch, height, width, channels).
        kernel_size: k; stride: s, the same along both axes.

    Returns:
        (batch, ceil(height / s), ceil(width / s), k * k * channels), each patch ordered (row, column, channel)
        like a conv kernel (k, k, channels, out), so that `patches @ kernel.reshape(-1, out)` is the convolution.
    """
    chex.assert_rank(images, 4)
    _, height, width, _ = images.shape
    padding, out_sizes = [], []
    for size in (height, width):
        out = -(-size // stride)
        total = max((out - 1) * stride + kernel_size - size, 0)
        padding.append((total // 2, total - total // 2))
        out_sizes.append(out)
    padded = jnp.pad(images, ((0, 0), padding[0], padding[1], (0, 0)))
    span_rows, span_cols = (out_sizes[0] - 1) * stride + 1, (out_sizes[1] - 1) * stride + 1
    return jnp.concatenate([padded[:, row:row + span_rows:stride, col:col + span_cols:stride, :]
                            for row in range(kernel_size) for col in range(kernel_size)], axis=-1)
