"""Our composed configs in rejax's terms: the arguments of rejax's PPO, PQN and DQN for the same learning, read
from the config ours trains (benchmarks/minatar_rejax_peer.py, value_based_cartpole.py). A config rejax cannot
express is refused in one line (SystemExit) rather than silently compared; what rejax does its own way regardless
is said in each function's docstring."""

from __future__ import annotations

from typing import Any, Dict


def rejax_config(config) -> Dict[str, Any]:
    """rejax's arguments for the composed config's algorithm (PPO, PQN or DQN)."""
    translate = {"ppo": rejax_ppo_config, "pqn": rejax_pqn_config, "dqn": rejax_dqn_config}
    algorithm = str(config.system.system_name)
    if algorithm not in translate:
        raise SystemExit(f"no rejax counterpart is mapped for {algorithm}: only {', '.join(translate)}")
    return translate[algorithm](config)


def _evaluation_interval(config) -> int:
    """rejax's `eval_freq`: the env steps between the config's evaluations."""
    return int(config.arch.total_timesteps) // int(config.arch.num_evaluation)


def rejax_pqn_config(config) -> Dict[str, Any]:
    """rejax.PQN's arguments for the same update as `config`'s; a config rejax cannot express (another network,
    scaled rewards) is refused. What stays rejax's own: a constant learning rate (ours may decay to 0), its init,
    gradients clipped element-wise rather than by their global norm, and ε = 0.005 when it evaluates."""
    system, torso = config.system, config.network.q_network.pre_torso
    if str(torso.activation) != "relu" or not bool(torso.get("use_layer_norm", False)) \
            or list(torso.layer_sizes) != [64, 64]:
        raise SystemExit("rejax's PQN network is fixed, 2 x 64 with relu after LayerNorm: this config's Q-network "
                         "is not")
    if float(system.reward_scale) != 1.0:
        raise SystemExit("rejax's PQN does not scale rewards: this config's system.reward_scale is not 1")
    return dict(**_update_shape(config), learning_rate=float(system.q_lr), td_lambda=float(system.q_lambda),
                eps_start=float(system.epsilon_start), eps_end=float(system.epsilon_end),
                exploration_fraction=float(system.epsilon_decay_fraction))


def rejax_ppo_config(config) -> Dict[str, Any]:
    """rejax.PPO's arguments for the same update as `config`'s (benchmarks/minatar_rejax_peer.py's docstring lists
    what maps onto what); a config rejax cannot express (two learning rates, two network shapes) is refused. What
    stays rejax's own: a constant learning rate, one optimiser state per network, its init, and element-wise
    gradient clipping."""
    system, network = config.system, config.network
    actor, critic = network.actor_network.pre_torso, network.critic_network.pre_torso
    if float(system.actor_lr) != float(system.critic_lr):
        raise SystemExit("rejax's PPO takes one learning rate: this config's actor_lr and critic_lr differ")
    if list(actor.layer_sizes) != list(critic.layer_sizes) or actor.activation != critic.activation:
        raise SystemExit("rejax's PPO takes one MLP shape for both networks: this config's actor and critic differ")
    return dict(**_update_shape(config), learning_rate=float(system.actor_lr), gae_lambda=float(system.gae_lambda),
                clip_eps=float(system.clip_eps), ent_coef=float(system.ent_coef), vf_coef=float(system.vf_coef),
                agent_kwargs=dict(activation=str(actor.activation), hidden_layer_sizes=list(actor.layer_sizes)))


def _update_shape(config) -> Dict[str, Any]:
    """What rejax's PPO and PQN both take, read from `config`: the update's shape, budget, evaluation interval, γ,
    the gradient-norm clip and observation normalisation."""
    system, arch = config.system, config.arch
    return dict(num_envs=int(arch.total_num_envs), num_steps=int(system.rollout_length),
                num_epochs=int(system.epochs), num_minibatches=int(system.num_minibatches),
                max_grad_norm=float(system.max_grad_norm), total_timesteps=int(arch.total_timesteps),
                eval_freq=_evaluation_interval(config),
                gamma=float(system.gamma), normalize_observations=bool(system.normalize_observations))


def rejax_dqn_config(config) -> Dict[str, Any]:
    """rejax.DQN's arguments for the same learning as the composed DQN `config`. rejax steps every env once per
    iteration and then takes `num_epochs` gradient steps; ours takes
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
        num_epochs=gradient_steps_per_iteration, total_timesteps=int(arch.total_timesteps),
        eval_freq=_evaluation_interval(config),
        buffer_size=int(system.total_buffer_size), fill_buffer=int(system.warmup_rollout_length) * num_envs,
        batch_size=int(system.total_batch_size), learning_rate=float(system.q_lr),
        max_grad_norm=float(system.max_grad_norm), gamma=float(system.gamma),
        eps_start=float(system.epsilon_start), eps_end=float(system.epsilon_end),
        exploration_fraction=float(system.epsilon_decay_fraction), ddqn=str(system.td_target) == "double_q_learning",
        polyak=1.0 - tau if tau < 1.0 else 0.0,
        target_update_freq=int(round(int(system.target_update_period) * env_steps_per_gradient_step)),
        normalize_observations=bool(system.normalize_observations),
    )
