"""DQN (Mnih et al., 2015) and its scalar-Q variants, chosen by `system.td_target`.

`q_learning` is DQN, `double_q_learning` is Double DQN (van Hasselt et al., 2016). The replay, warm-up,
n-step and target-network machinery is shared (stoix_like/systems/off_policy.py); this file holds only how a
Q-network acts and what it regresses on.
"""

from __future__ import annotations

from typing import Any, Callable, Dict

import jax
import jax.numpy as jnp

from stoix_like import experiment, normalization, parallel, targets
from stoix_like.budget import Budget
from stoix_like.envs.environment import DiscreteActionSpace, Environment
from stoix_like.errors import ConfigError
from stoix_like.exploration import epsilon_greedy, linear_epsilon
from stoix_like.networks.factory import build_q_network
from stoix_like.ops import losses
from stoix_like.optim import make_optimizer
from stoix_like.replay import Transition
from stoix_like.systems import off_policy
from stoix_like.types import OnlineAndTarget


def _q_learning(q_apply, online, target, batch: Transition, system) -> jax.Array:
    q_tm1 = q_apply(online, batch.observation)
    q_t = q_apply(target, batch.next_observation)
    return losses.q_learning_td_error(q_tm1, batch.action, batch.reward, batch.discount, q_t,
                                      batch.next_observation.action_mask)


def _double_q_learning(q_apply, online, target, batch: Transition, system) -> jax.Array:
    q_tm1 = q_apply(online, batch.observation)
    q_t_value = q_apply(target, batch.next_observation)
    q_t_selector = q_apply(online, batch.next_observation)
    return losses.double_q_learning_td_error(q_tm1, batch.action, batch.reward, batch.discount, q_t_value,
                                             q_t_selector, batch.next_observation.action_mask)


# td_target name -> fn(q_apply, online_params, target_params, batch, system_config) -> td errors [B]
TD_ERRORS: Dict[str, Callable] = {
    "q_learning": _q_learning,
    "double_q_learning": _double_q_learning,
}


def make_act(q_apply: Callable, system: Any, total_timesteps: int):
    decay_steps = int(float(system.epsilon_decay_fraction) * total_timesteps)

    def act(params: OnlineAndTarget, observation, key, global_env_steps):
        epsilon = linear_epsilon(global_env_steps, float(system.epsilon_start), float(system.epsilon_end), decay_steps)
        action = epsilon_greedy(key, q_apply(params.online, observation), observation.action_mask, epsilon)
        return action, action

    return act


def greedy_policy(q_apply: Callable):
    """Eval policy of every value-based system: the best legal action. Eval params: (q_params, obs_norm)."""

    def policy(eval_params, observation, key):
        del key
        q_params, obs_norm = eval_params
        q_values = q_apply(q_params, normalization.normalize(obs_norm, observation))
        return jnp.argmax(jnp.where(observation.action_mask, q_values, -jnp.inf), axis=-1)

    return policy


def get_learner_fn(q_apply: Callable, q_update: Callable, config: Any):
    """The batch update of a scalar-Q system (the skeleton's `learn_from_batch`)."""
    system = config.system
    td_error_fn = TD_ERRORS[system.td_target]
    huber = float(system.huber_loss_parameter)

    def loss_fn(online, target, batch: Transition, weights: jax.Array):
        td = td_error_fn(q_apply, online, target, batch, system)
        per_example = losses.huber_loss(td, huber) if huber > 0 else losses.l2_loss(td)
        return jnp.mean(weights * per_example), (td, {"q_loss": jnp.mean(per_example)})

    def learn_from_batch(params: OnlineAndTarget, opt_state, batch: Transition, weights, key, update_count):
        del key
        grads, (td, metrics) = jax.grad(loss_fn, has_aux=True)(params.online, params.target, batch, weights)
        grads, metrics = parallel.pmean_batch_then_device((grads, metrics))
        updates, opt_state = q_update(grads, opt_state, params.online)
        online = jax.tree_util.tree_map(jnp.add, params.online, updates)
        target = targets.update_target(online, params.target, update_count + 1, float(system.tau),
                                       int(system.target_update_period))
        return OnlineAndTarget(online, target), opt_state, metrics, jnp.abs(td)

    return learn_from_batch


def learner_setup(env: Environment, key: jax.Array, config: Any, budget: Budget) -> experiment.SystemSetup:
    system = config.system
    if not isinstance(env.action_space, DiscreteActionSpace):
        raise ConfigError(f"{config.env.scenario.name} has continuous actions; DQN needs discrete ones "
                          f"(use experiments.sac / td3 / ddpg for continuous control).")
    if system.td_target not in TD_ERRORS:
        raise ConfigError(f"system.td_target={system.td_target!r} is unknown; choose one of {sorted(TD_ERRORS)}.")
    q_network = build_q_network(config.network, env.action_space)
    init_key, key = jax.random.split(key)
    _, example = env.reset(jax.random.PRNGKey(0))
    online = q_network.init(init_key, jax.tree_util.tree_map(lambda x: x[None], example.observation))
    params = OnlineAndTarget(online, online)
    optimizer = make_optimizer(system.q_lr, system.max_grad_norm, budget.num_updates * int(system.epochs),
                               system.decay_learning_rates)
    return off_policy.learner_setup(
        env, key, config, budget,
        params=params, opt_states=optimizer.init(online),
        act=make_act(q_network.apply, system, budget.total_timesteps),
        learn_from_batch=get_learner_fn(q_network.apply, optimizer.update, config),
        eval_policy=greedy_policy(q_network.apply),
        eval_params=lambda slot: (slot.params.online, slot.obs_norm),
        prioritised=bool(system.get("prioritised_replay", False)),
    )


def run_experiment(config: Any) -> float:
    return experiment.run(config, learner_setup, algorithm=str(config.system.system_name))
