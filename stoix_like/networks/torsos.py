"""Torsos: observation features in, a feature vector out."""

from __future__ import annotations

from typing import Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

_ACTIVATIONS = {"tanh": nn.tanh, "relu": nn.relu, "silu": nn.silu, "elu": nn.elu, "gelu": nn.gelu}


def activation_by_name(name: str) -> Callable[[jax.Array], jax.Array]:
    if name not in _ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; choose one of {sorted(_ACTIVATIONS)}")
    return _ACTIVATIONS[name]


class MLPTorso(nn.Module):
    """Dense layers with orthogonal(√2) init, the PPO-standard initialisation; optional LayerNorm (PQN needs it)."""

    layer_sizes: Sequence[int]
    activation: str = "relu"
    use_layer_norm: bool = False

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = activation_by_name(self.activation)
        x = x.reshape(x.shape[: x.ndim - 1] + (-1,)) if x.ndim else x
        for size in self.layer_sizes:
            x = nn.Dense(size, kernel_init=nn.initializers.orthogonal(np.sqrt(2.0)),
                         bias_init=nn.initializers.zeros)(x)
            if self.use_layer_norm:
                x = nn.LayerNorm()(x)
            x = act(x)
        return x


class CNNTorso(nn.Module):
    """Convolutions over a (height, width, channels) observation (`env.observation_layout=image`), then dense
    layers. Leading axes are batch axes, however many (a rollout's (T, envs) included). Orthogonal(√2) init, as
    the MLP's; "SAME" padding, so MinAtar's 10×10 and MiniGrid's 7×7 grids keep their size at stride 1."""

    channels: Sequence[int]
    kernel_sizes: Sequence[int]
    strides: Sequence[int]
    layer_sizes: Sequence[int]
    activation: str = "relu"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        if x.ndim < 3:
            raise ValueError(f"CNNTorso reads (..., height, width, channels) observations, got shape {x.shape}: "
                             "set env.observation_layout=image")
        act = activation_by_name(self.activation)
        batch_shape = x.shape[:-3]
        x = x.reshape((-1,) + x.shape[-3:])
        for channels, kernel_size, stride in zip(self.channels, self.kernel_sizes, self.strides, strict=True):
            x = nn.Conv(channels, (kernel_size, kernel_size), strides=(stride, stride), padding="SAME",
                        kernel_init=nn.initializers.orthogonal(np.sqrt(2.0)), bias_init=nn.initializers.zeros)(x)
            x = act(x)
        x = x.reshape(batch_shape + (-1,))
        return MLPTorso(self.layer_sizes, self.activation)(x)
