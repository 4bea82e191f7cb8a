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
    brax's); optional LayerNorm (PQN needs it). The LayerNorm sits between each dense layer and its activation, as
    PQN's network has it, or, with `layer_norm_after_activation`, after the activation, as brax's MLP has it (the
    order of the Q-networks in Playground's SAC recipe): normalising after a ReLU keeps every unit, where normalising
    before it lets the ReLU zero about half of each layer's outputs."""

    layer_sizes: Sequence[int]
    activation: str = "relu"
    use_layer_norm: bool = False
    kernel_init: str = "orthogonal"
    layer_norm_after_activation: bool = False

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = activation_by_name(self.activation)
        x = x.reshape(x.shape[: x.ndim - 1] + (-1,)) if x.ndim else x
        for size in self.layer_sizes:
            x = nn.Dense(size, kernel_init=kernel_init_by_name(self.kernel_init, np.sqrt(2.0)),
                         bias_init=nn.initializers.zeros)(x)
            if self.use_layer_norm and not self.layer_norm_after_activation:
                x = nn.LayerNorm()(x)
            x = act(x)
            if self.use_layer_norm and self.layer_norm_after_activation:
                x = nn.LayerNorm()(x)
        return x


def _grids_in_one_batch(torso: str, x: jax.Array) -> Tuple[jax.Array, Tuple[int, ...]]:
    """(..., height, width, channels) grids as one batch axis, and the leading axes to restore after the torso."""
    if x.ndim < 3:
        raise ValueError(f"{torso} reads (..., height, width, channels) observations, got shape {x.shape}: "
                         "set env.observation_layout=image")
    return x.reshape((-1,) + x.shape[-3:]), x.shape[:-3]


class CNNTorso(nn.Module):
    """Convolutions over a (height, width, channels) observation (`env.observation_layout=image`), then dense
    layers. Leading axes are batch axes, however many (a rollout's (T, envs) included). `padding` "SAME" (the
    default) keeps MinAtar's 10×10 and MiniGrid's 7×7 grids their size at stride 1; "VALID" is the Nature DQN
    network's (84×84 frames to 20×20, 9×9, 7×7 maps: 3,136 features where "SAME" gives 7,744, and ~60% of the
    multiply-adds). Orthogonal(√2) init, as the MLP's.

    Each convolution is written as a dense layer over the k×k patches (`convolution_patches`), which computes
    exactly what `nn.Conv` does (the same kernel, reshaped) but is ~13× faster to train on CPU here: inside
    PPO's scanned epochs XLA's CPU convolution gradients ran at ~200 ms per step on a batch of 50 8×8 grids,
    the patches' dense layers at ~15 ms (jax 0.10.2, 2 cores).
    """

    channels: Sequence[int]
    kernel_sizes: Sequence[int]
    strides: Sequence[int]
    layer_sizes: Sequence[int]
    activation: str = "relu"
    padding: str = "SAME"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x, batch_shape = _grids_in_one_batch("CNNTorso", x)
        act = activation_by_name(self.activation)
        for channels, kernel_size, stride in zip(self.channels, self.kernel_sizes, self.strides, strict=True):
            patches = convolution_patches(x, kernel_size, stride, self.padding)
            x = nn.Dense(channels, kernel_init=nn.initializers.orthogonal(np.sqrt(2.0)),
                         bias_init=nn.initializers.zeros)(patches)
            x = act(x)
        x = x.reshape(batch_shape + (-1,))
        return MLPTorso(self.layer_sizes, self.activation)(x)


class ResNetTorso(nn.Module):
    """IMPALA's residual CNN (Espeholt et al. 2018, the "deep" network) over (..., height, width, channels)
    observations (`env.observation_layout=image`), then dense layers.

    Each stage: a 3×3 convolution to `channels[i]`, a 3×3 max-pool of stride 2 ("SAME": 84 → 42 → 21 → 11), then
    `blocks_per_stage` residual blocks (relu → conv 3×3 → relu → conv 3×3, added to the block's input). After
    the stages: relu, flatten, `layer_sizes` dense layers. Leading axes are batch axes, however many.

    `convolution` picks how each 3×3 convolution is computed, the same function and parameters either way
    (`Conv3x3`): "xla" (XLA's convolution), "patches" (a matmul over the 3×3 patches, as CNNTorso's) or "auto"
    (patches on a CPU, XLA's convolution on an accelerator). On a CPU XLA's convolution gradients are slow inside
    the learner's scanned updates: PPO with this torso on MinAtar Breakout learnt at 269 steps/s with "xla" and
    1,991 with "patches" (one epoch of one minibatch, 2 cores, jax 0.10.2). The patches cost 9× a layer's
    activations in memory, which an accelerator's convolution kernels do not need.
    """

    channels: Sequence[int]
    layer_sizes: Sequence[int]
    blocks_per_stage: int = 2
    activation: str = "relu"
    convolution: str = "auto"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x, batch_shape = _grids_in_one_batch("ResNetTorso", x)
        act = activation_by_name(self.activation)
        as_patches = resolve_convolution(self.convolution) == "patches"

        def conv(features: int) -> "Conv3x3":
            return Conv3x3(features, as_patches)

        for channels in self.channels:
            x = conv(channels)(x)
            x = nn.max_pool(x, (3, 3), strides=(2, 2), padding="SAME")
            for _ in range(self.blocks_per_stage):
                residual = conv(channels)(act(x))
                x = x + conv(channels)(act(residual))
        x = act(x).reshape(batch_shape + (-1,))
        return MLPTorso(self.layer_sizes, self.activation)(x)


CONVOLUTIONS = ("auto", "xla", "patches")


def resolve_convolution(convolution: str) -> str:
    """"auto" as the backend calls for: "patches" on a CPU, "xla" elsewhere."""
    if convolution not in CONVOLUTIONS:
        raise ValueError(f"unknown convolution {convolution!r}; choose one of {', '.join(CONVOLUTIONS)}")
    if convolution == "auto":
        return "patches" if jax.default_backend() == "cpu" else "xla"
    return convolution


class Conv3x3(nn.Module):
    """A "SAME"-padded 3×3 convolution of stride 1 with a bias, orthogonal(√2) init: `nn.Conv`'s parameters
    (kernel (3, 3, in, out), bias (out,)), computed by XLA's convolution or as a matmul over the 3×3 patches."""

    features: int
    as_patches: bool

    @nn.compact
    def __call__(self, images: jax.Array) -> jax.Array:
        kernel = self.param("kernel", nn.initializers.orthogonal(np.sqrt(2.0)),
                            (3, 3, images.shape[-1], self.features))
        bias = self.param("bias", nn.initializers.zeros, (self.features,))
        if self.as_patches:
            return convolution_patches(images, 3, 1, "SAME") @ kernel.reshape(-1, self.features) + bias
        return jax.lax.conv_general_dilated(images, kernel, (1, 1), "SAME",
                                            dimension_numbers=("NHWC", "HWIO", "NHWC")) + bias


PADDINGS = ("SAME", "VALID")


def convolution_patches(images: jax.Array, kernel_size: int, stride: int, padding: str) -> jax.Array:
    """The k×k patches a convolution reads, one per output pixel, padded as XLA pads `padding`.

    Args:
        images: (batch, height, width, channels).
        kernel_size: k; stride: s, the same along both axes.
        padding: "SAME" (zeros around the image, ceil(size / s) outputs per axis, the extra zero on the far
            side when the total is odd) or "VALID" (no padding, floor((size - k) / s) + 1 outputs per axis).

    Returns:
        (batch, out_height, out_width, k * k * channels), each patch ordered (row, column, channel) like a conv
        kernel (k, k, channels, out), so that `patches @ kernel.reshape(-1, out)` is the convolution.
    """
    chex.assert_rank(images, 4)
    if padding not in PADDINGS:
        raise ValueError(f"unknown padding {padding!r}; choose one of {', '.join(PADDINGS)}")
    _, height, width, _ = images.shape
    pads, out_sizes = [], []
    for size in (height, width):
        if padding == "SAME":
            out = -(-size // stride)
            total = max((out - 1) * stride + kernel_size - size, 0)
        else:
            if size < kernel_size:
                raise ValueError(f"a {kernel_size}×{kernel_size} VALID convolution needs images of at least that "
                                 f"size, got {height}×{width}: use padding SAME or smaller kernels")
            out, total = (size - kernel_size) // stride + 1, 0
        pads.append((total // 2, total - total // 2))
        out_sizes.append(out)
    padded = jnp.pad(images, ((0, 0), pads[0], pads[1], (0, 0)))
    span_rows, span_cols = (out_sizes[0] - 1) * stride + 1, (out_sizes[1] - 1) * stride + 1
    return jnp.concatenate([padded[:, row:row + span_rows:stride, col:col + span_cols:stride, :]
                            for row in range(kernel_size) for col in range(kernel_size)], axis=-1)
