"""rejax, the peer our CartPole benchmarks compare with: its algorithms built on gymnax 1.0, learning timed alone.

rejax installs with `pip install --no-deps rejax` beside our pins. Where it is not installed, `rejax_learning`
returns None and the benchmarks run ours alone.
"""

from __future__ import annotations

import time
from typing import Any, Dict, Optional

import jax
import jax.numpy as jnp
import numpy as np


class GymnaxFiveTupleStep:
    """gymnax 1.0's `step` returns (obs, state, reward, terminated, truncated, info); rejax 0.1.3 unpacks the
    5-tuple of gymnax 0.0.x, whose `done` already folded truncation in. Everything else is the wrapped env."""

    def __init__(self, env):
        self._env = env

    def __getattr__(self, name):
        if name == "_env":  # not yet set (copy.deepcopy builds the object without __init__)
            raise AttributeError(name)
        return getattr(self._env, name)

    def step(self, key, state, action, params=None):
        obs, state, reward, terminated, truncated, info = self._env.step(key, state, action, params)
        return obs, state, reward, terminated | truncated, info


def rejax_dqn_config(config, eval_freq: int) -> Dict[str, Any]:
    """rejax.DQN's arguments for the same learning as the composed DQN `config`, evaluating every `eval_freq`
    steps. rejax steps every env once per iteration and then takes `num_epochs` gradient steps; ours takes
    `system.gradient_steps_per_update` gradient steps per `system.rollout_length` steps of every env, so the two
    match where the one is a multiple of the other (the same gradient steps per env step). rejax moves its target
    every `target_update_freq` env steps (a Polyak step with `polyak`, 0 being a copy); ours every
    `system.target_update_period` gradient steps, converted here. A config rejax cannot express is refused: its
    network is fixed at 2 x 64, its loss is the squared error, it samples uniformly one-step transitions, and its
    target is Q-learning's or Double DQN's. What stays rejax's own: its buffer fill acts uniformly at random (ours
    ε-greedily from ε = 1, the same policy), it clips gradients element-wise rather than by their global norm, its
    learning rate is constant, and it treats a time limit's end as a termination."""
    system, arch, torso = config.system, config.arch, config.network.q_network.pre_torso
    num_envs, rollout = int(arch.total_num_envs), int(system.rollout_length)
    gradient_steps = int(system.gradient_steps_per_update)
    if gradient_steps % rollout:
        raise SystemExit(f"rejax's DQN takes its gradient steps after each step of the envs: "
                         f"system.gradient_steps_per_update={gradient_steps} must be a multiple of "
                         f"system.rollout_length={rollout}")
    if list(torso.layer_sizes) != [64, 64]:
        raise SystemExit(f"rejax's DQN network is fixed at 2 x 64: this config's Q-network is "
                         f"{list(torso.layer_sizes)}")
    if float(system.huber_delta) != 0.0 or float(system.regularization_weight) != 0.0:
        raise SystemExit("rejax's DQN loss is the squared TD error: set system.huber_delta=0 and "
                         "system.regularization_weight=0")
    if int(system.n_step) != 1 or bool(system.prioritized_replay):
        raise SystemExit("rejax's DQN samples one-step transitions uniformly: set system.n_step=1 and "
                         "system.prioritized_replay=False")
    if str(system.td_target) not in ("q_learning", "double_q_learning"):
        raise SystemExit(f"rejax's DQN target is Q-learning's or Double DQN's, not system.td_target="
                         f"{system.td_target}")
    gradient_steps_per_iteration = gradient_steps // rollout
    env_steps_per_gradient_step = num_envs / gradient_steps_per_iteration
    tau = float(system.tau)
    return dict(
        agent="QNetwork", agent_kwargs={"activation": str(torso.activation)}, num_envs=num_envs,
        num_epochs=gradient_steps_per_iteration, total_timesteps=int(arch.total_timesteps), eval_freq=int(eval_freq),
        buffer_size=int(system.total_buffer_size), fill_buffer=int(system.warmup_rollout_length) * num_envs,
        batch_size=int(system.total_batch_size), learning_rate=float(system.q_lr),
        max_grad_norm=float(system.max_grad_norm), gamma=float(system.gamma),
        eps_start=float(system.epsilon_start), eps_end=float(system.epsilon_end),
        exploration_fraction=float(system.epsilon_decay_fraction), ddqn=str(system.td_target) == "double_q_learning",
        polyak=1.0 - tau if tau < 1.0 else 0.0,
        target_update_freq=int(round(int(system.target_update_period) * env_steps_per_gradient_step)),
        normalize_observations=bool(system.normalize_observations),
    )


def rejax_algorithm(algo_cls_name: str, config: Dict[str, Any], env_name: str = "CartPole-v1",
                    evaluations: bool = False):
    """rejax's `algo_cls_name` (e.g. "PPO", "DQN", "PQN") on the gymnax env `env_name` with `config`. Without
    `evaluations` its evaluations during training are switched off: learning is timed alone, as ours is, and the
    final policy evaluated afterwards. With them, rejax's own evaluator (128 episodes every `eval_freq` steps) runs
    inside its program, as in a user's run of it."""
    import gymnax
    import rejax

    env, env_params = gymnax.make(env_name)
    algo = getattr(rejax, algo_cls_name).create(env=GymnaxFiveTupleStep(env), env_params=env_params,
                                                skip_initial_evaluation=not evaluations, **config)
    return algo if evaluations else algo.replace(eval_callback=lambda algo, train_state, key: jnp.zeros(()))


class RejaxLearning:
    """A rejax algorithm compiled once; `learn_budget()` trains it from `seed` (rejax's `train` is one program for
    the whole budget) and returns the seconds, as `loop_timing.OurLearning` does. `learning_steps` are the env steps
    that run covers: for an off-policy algorithm its buffer fill is among them (ours fills in setup, untimed)."""

    def __init__(self, algo, seed: int):
        self._algo, self._seed, self.learning_steps = algo, seed, int(algo.total_timesteps)
        self._key = jax.random.PRNGKey(seed)
        start = time.perf_counter()
        self._train = jax.jit(algo.train).lower(self._key).compile()
        self.compile_seconds = time.perf_counter() - start
        self._train_state = None

    def learn_budget(self) -> float:
        start = time.perf_counter()
        self._train_state, _ = jax.block_until_ready(self._train(self._key))
        return time.perf_counter() - start

    def final_return(self, eval_episodes: int) -> float:
        from rejax.evaluate import evaluate

        _, returns = evaluate(self._algo.make_act(self._train_state), jax.random.PRNGKey(self._seed + 1),
                              self._algo.env, self._algo.env_params, eval_episodes,
                              self._algo.env_params.max_steps_in_episode)
        return float(np.mean(returns))


def rejax_learning(algo_cls_name: str, config: Dict[str, Any], seed: int) -> Optional[RejaxLearning]:
    """`rejax_algorithm(algo_cls_name, config)` compiled for `seed`, or None where rejax is not installed."""
    try:
        import rejax  # noqa: F401
    except ImportError:
        return None
    return RejaxLearning(rejax_algorithm(algo_cls_name, config), seed)
