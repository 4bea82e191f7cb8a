"""Exploration: for value-based acting a linearly decaying epsilon and masked epsilon-greedy selection;
for deterministic continuous policies Gaussian perturbations of actions in the normalised box [-1, 1]."""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from stoix_like.learner.hyperparams import Number
from stoix_like.ops.masking import masked_argmax


def linear_epsilon(step: jax.Array, start: Number, end: Number, decay_steps: int) -> jax.Array:
    """Epsilon after `step` acting steps, decayed linearly from `start` to `end` over `decay_steps`."""
    fraction = jnp.clip(step / max(decay_steps, 1), 0.0, 1.0)
    return start + fraction * (end - start)


def epsilon_schedule(start: Number, end: Number, decay_fraction: float, duration: int
                     ) -> Callable[[jax.Array], jax.Array]:
    """The ε-greedy block's schedule (`epsilon_start`, `epsilon_end`, `epsilon_decay_fraction`) as a function of
    progress: ε decays linearly from `start` to `end` over the first `decay_fraction` of `duration`, then stays.

    Progress and `duration` share one unit: env steps (the DQN family: `arch.total_timesteps`, warm-up included),
    or updates where every update takes the same number of env steps and there is no warm-up (PQN), which is the
    same fraction of the env-step budget.
    """
    decay_steps = int(float(decay_fraction) * duration)
    start, end = _as_number(start), _as_number(end)
    return lambda progress: linear_epsilon(progress, start, end, decay_steps)


def _as_number(value: Number) -> Number:
    """A config's number as a float; a swept member's (a traced scalar, learner/hyperparams.py) as it is."""
    return value if isinstance(value, jax.Array) else float(value)


def per_actor_epsilons(epsilon: jax.Array, num_actors: int, exponent: float) -> jax.Array:
    """`[num_actors]` exploration rates ε_i = ε^(1 + exponent · i / (num_actors − 1)) (Ape-X, R2D2: ε = 0.4,
    exponent 7): one actor explores at ε, the others ever less, so the replay holds both exploring and nearly greedy
    behaviour. Exponent 0 gives every actor ε."""
    spread = jnp.arange(num_actors, dtype=jnp.float32) / max(num_actors - 1, 1)
    return jnp.asarray(epsilon, jnp.float32) ** (1.0 + exponent * spread)


def epsilon_greedy(key: jax.Array, q_values: jax.Array, action_mask: jax.Array, epsilon: jax.Array) -> jax.Array:
    """Greedy over legal actions with probability 1−ε, else uniform over legal actions. Shapes (..., A)."""
    explore_key, uniform_key = jax.random.split(key)
    greedy = masked_argmax(q_values, action_mask)
    # uniform over legal actions: the argmax of random noise restricted to the mask
    noise = jax.random.uniform(uniform_key, q_values.shape)
    random_legal = jnp.argmax(jnp.where(action_mask, noise, -1.0), axis=-1)
    explore = jax.random.uniform(explore_key, greedy.shape) < epsilon
    return jnp.where(explore, random_legal, greedy)


def evaluation_action(key: jax.Array, q_values: jax.Array, action_mask: jax.Array, epsilon: float) -> jax.Array:
    """The action a value-based agent is judged by (`system.evaluation_epsilon`): greedy over legal actions at ε = 0,
    else ε-greedy. ε is a Python float, so a greedy evaluation traces no random draw and stays bit-identical to one
    written before the option existed."""
    if epsilon == 0.0:
        return masked_argmax(q_values, action_mask)
    return epsilon_greedy(key, q_values, action_mask, jnp.asarray(epsilon, jnp.float32))


def perturb_action(key: jax.Array, action: jax.Array, std: float, noise_clip: float | None = None) -> jax.Array:
    """`action + ε`, ε ~ N(0, std²) (clipped to ±noise_clip if given), kept inside the normalised box [-1, 1].

    Acting noise of DDPG / TD3 / D4PG, and TD3's target-policy smoothing (with a noise clip). The scale is in
    the normalised action space, so one `std` means the same on every env whatever its action bounds.
    """
    noise = std * jax.random.normal(key, action.shape, action.dtype)
    if noise_clip is not None:
        noise = jnp.clip(noise, -noise_clip, noise_clip)
    return jnp.clip(action + noise, -1.0, 1.0)
