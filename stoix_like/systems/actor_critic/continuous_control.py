"""What the actor-critics on replay (SAC, TD3, DDPG, D4PG, and MPO for either action kind) share, on top of the
off-policy skeleton.

- Critics are Q(s, a) of the *normalised* action in [-1, 1]; the env's bounds are applied only on the way to
  the env (stoix_like.networks.distributions.unit_box_to_bounds), so replay and critics never see them.
- Several critics are one ensemble: parameters stacked on a leading axis, applied with a vmap.
- A scalar critic ensemble regresses on one target (`critic_regression_loss`); the target's min over critics
  is `ops.losses.clipped_double_q_target`.
- `gradient_step` (apply one optimiser step) serves every actor-critic of the family, AWR's discrete head included.
"""

from __future__ import annotations

from typing import Callable, Dict, NamedTuple, Tuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from omegaconf import DictConfig

from stoix_like.runtime import compilation_cache, parallel
from stoix_like.learner.budget import Budget
from stoix_like.envs.environment import ContinuousActionSpace, Environment, example_observation
from stoix_like.errors import ConfigError
from stoix_like.ops import losses
from stoix_like.learner.optim import make_optimizer
from stoix_like.learner.replay import Transition
from stoix_like.types import Observation, OptState, Params, PyTree


def require_continuous_actions(env: Environment, config: DictConfig, algorithm: str) -> ContinuousActionSpace:
    """The action space, or a one-line ConfigError before anything compiles."""
    if not isinstance(env.action_space, ContinuousActionSpace):
        raise ConfigError(
            f"{config.env.suite}/{config.env.scenario.name} has discrete actions; {algorithm} needs continuous ones "
            f"(use experiments.dqn or experiments.ppo for discrete actions).")
    return env.action_space


class CriticEnsemble(NamedTuple):
    """`num_critics` independently initialised copies of `critic`, evaluated together."""

    critic: nn.Module
    num_critics: int

    def init(self, key: jax.Array, observation: Observation, action: jax.Array) -> Params:
        """Parameters stacked on a leading critic axis.

        Initialised one critic after another (lax.map), not batched (vmap): a batched orthogonal init is a batched
        LAPACK QR, which on XLA's CPU backend fans its batch out into the thread pool it runs on and waits; two such
        QRs (two layers) running at once on a 2-thread pool each waited on work queued behind the other, and SAC's
        setup hung for good with 2x256 critics on brax halfcheetah. The values are the same either way (checked by
        benchmarks/params_digest.py --check)."""
        keys = jax.random.split(key, self.num_critics)
        return jax.lax.map(lambda critic_key: self.critic.init(critic_key, observation, action), keys)

    def apply(self, params: Params, observation: Observation, action: jax.Array) -> PyTree:
        """Every output with a leading critic axis."""
        return jax.vmap(self.critic.apply, in_axes=(0, None, None))(params, observation, action)


def critic_ensemble(critic: nn.Module, num_critics: int) -> CriticEnsemble:
    if num_critics < 1:
        raise ConfigError(f"system.num_critics={num_critics} must be at least 1.")
    return CriticEnsemble(critic, num_critics)


def init_actor_and_critics(actor: nn.Module, critics: CriticEnsemble, env: Environment, key: jax.Array
                           ) -> Tuple[Params, Params]:
    """Initial parameters of the actor and of every critic, from shapes only and in one compiled call (compiled
    once per process for these networks: every seed of a population reuses it)."""

    def init(key: jax.Array, observation: Observation, action: jax.Array) -> Tuple[Params, Params]:
        actor_key, critic_key = jax.random.split(key)
        return actor.init(actor_key, observation), critics.init(critic_key, observation, action)

    action_space = env.action_space
    assert isinstance(action_space, ContinuousActionSpace), "learner_setup calls require_continuous_actions first"
    jitted = compilation_cache.jit_once(("actor_and_critics_init", repr(actor), repr(critics)), init)
    return jitted(key, example_observation(env), jnp.zeros((1, action_space.action_dim), jnp.float32))


def optimizer(learning_rate: float, config: DictConfig, budget: Budget) -> optax.GradientTransformation:
    """Every network of these systems takes one optimiser step per gradient step (`gradient_steps_per_update` per
    update)."""
    system = config.system
    return make_optimizer(learning_rate, system.max_grad_norm,
                          budget.num_updates * int(system.gradient_steps_per_update), system.decay_learning_rates)


def gradient_step(update_fn: Callable, params: Params, grads: Params, opt_state: OptState) -> Tuple[Params, OptState]:
    updates, opt_state = update_fn(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state


def critic_step(critic_loss: Callable, update_fn: Callable, critic_params: Params, opt_state: OptState,
                *loss_args: PyTree) -> Tuple[Params, OptState, jax.Array, Dict[str, jax.Array]]:
    """One Q-network step: the gradient of `critic_loss(critic_params, *loss_args) -> (loss, (priorities, metrics))`,
    averaged over the update batch and the devices with its metrics, then the optimiser's step.

    Returns (critic params, optimiser state, `[B]` priorities of this slot's batch, averaged metrics).
    """
    grads, (priorities, metrics) = jax.grad(critic_loss, has_aux=True)(critic_params, *loss_args)
    grads, metrics = parallel.pmean_batch_then_device((grads, metrics))
    critic_params, opt_state = gradient_step(update_fn, critic_params, grads, opt_state)
    return critic_params, opt_state, priorities, metrics


def critic_regression_loss(critic_params: Params, critic_apply: Callable, batch: Transition, target: jax.Array,
                           weights: jax.Array):
    """Every critic of the ensemble regresses on the same target (squared error, summed over critics).

    Returns `(loss, (priorities [B], metrics))`; priorities are the mean absolute TD error over critics.
    """
    q_values = critic_apply(critic_params, batch.observation, batch.action)  # [C, B]
    td_errors = target[None] - q_values
    per_example = jnp.sum(losses.l2_loss(td_errors), axis=0)
    metrics = {"critic_loss": jnp.mean(per_example), "q_value": jnp.mean(q_values)}
    return jnp.mean(weights * per_example), (jnp.mean(jnp.abs(td_errors), axis=0), metrics)
