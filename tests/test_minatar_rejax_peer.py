"""benchmarks/minatar_rejax_peer.py: what it hands rejax is read from the same composed config ours trains, and a
config rejax cannot express is refused rather than silently compared. rejax itself is not one of our dependencies,
so these tests compose configs and never import it."""

from __future__ import annotations

import sys

import pytest

from conftest import REPO_ROOT, run_python

SCRIPT = str(REPO_ROOT / "benchmarks" / "minatar_rejax_peer.py")


@pytest.fixture(scope="module")
def peer():
    sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
    try:
        yield __import__("minatar_rejax_peer")
    finally:
        sys.path.remove(str(REPO_ROOT / "benchmarks"))


def test_pqn_s_shipped_breakout_file_maps_onto_rejax_s_pqn(peer, tmp_path):
    config = peer.composed("pqn", "breakout", 1001, 4, 5_120_000, str(tmp_path))
    assert peer.rejax_config(config) == dict(
        num_envs=128, num_steps=32, num_epochs=2, num_minibatches=32, learning_rate=5e-4, max_grad_norm=10.0,
        total_timesteps=5_120_000, eval_freq=512_000, gamma=0.99, td_lambda=0.65, eps_start=1.0, eps_end=0.05,
        exploration_fraction=0.1, normalize_observations=False)


def test_ppo_s_shipped_freeway_file_maps_onto_rejax_s_ppo(peer, tmp_path):
    config = peer.composed("ppo", "freeway", 1001, 4, 5_120_000, str(tmp_path))
    kwargs = peer.rejax_config(config)
    assert (kwargs["num_envs"], kwargs["num_steps"], kwargs["num_minibatches"], kwargs["learning_rate"]) == \
        (32, 64, 8, 5e-4)
    assert kwargs["agent_kwargs"] == dict(activation="tanh", hidden_layer_sizes=[64, 64])


def test_dqn_s_shipped_breakout_file_maps_onto_rejax_s_dqn(peer, tmp_path):
    """The same gradient steps per env step (8 per 4 steps of 128 envs: 2 after each step of them), and the target
    copy every 125 gradient steps is every 125 × 64 = 8,000 env steps in rejax's count."""
    config = peer.composed("dqn", "breakout", 1001, 4, 5_120_000, str(tmp_path))
    assert peer.rejax_config(config) == dict(
        agent="QNetwork", agent_kwargs={"activation": "relu"}, num_envs=128, num_epochs=2, total_timesteps=5_120_000,
        eval_freq=512_000, buffer_size=100_000, fill_buffer=5_120, batch_size=256, learning_rate=2.5e-4,
        max_grad_norm=10.0, gamma=0.99, eps_start=1.0, eps_end=0.1, exploration_fraction=0.02, ddqn=False,
        polyak=0.0, target_update_freq=8_000, normalize_observations=False)


@pytest.mark.parametrize("algorithm, override, why", [
    ("dqn", "system.huber_delta=1.0", "squared TD error"),
    ("dqn", "system.gradient_steps_per_update=6", "must be a multiple of system.rollout_length=4"),
    ("dqn", "network.q_network.pre_torso.layer_sizes=[128,128]", "fixed at 2 x 64"),
    ("dqn", "system.n_step=3", "one-step transitions"),
    ("pqn", "system.reward_scale=0.1", "does not scale rewards"),
    ("pqn", "network.q_network.pre_torso.layer_sizes=[128,128]", "fixed, 2 x 64"),
    ("ppo", "system.critic_lr=1e-3", "one learning rate"),
])
def test_a_config_rejax_cannot_express_is_refused(peer, tmp_path, algorithm, override, why):
    from stoix_like.config.compose import compose_config

    config = compose_config(algorithm, ["env=gymnax/breakout", override, f"logger.base_exp_path={tmp_path}"])
    with pytest.raises(SystemExit, match=why):
        peer.rejax_config(config)


def test_bad_input_is_refused_in_one_line_before_any_work(tmp_path):
    done = run_python([SCRIPT, "--task", "asterix", "--algorithm", "pqn", "--side", "ours", "--num-seeds", "0",
                       "--results", str(tmp_path / "results")], cwd=tmp_path)
    assert done.returncode == 2 and "--num-seeds must be at least 1" in done.stderr
    assert not (tmp_path / "results").exists()


def test_the_cartpole_benchmark_s_configs_map_onto_rejax_through_the_same_translation(peer):
    """benchmarks/value_based_cartpole.py hands rejax what the same functions read from its composed configs:
    DQN's 64 gradient steps per 16 steps of 16 envs are 4 after each step of them, its target copy every 64
    gradient steps is every 256 env steps; PQN's rewards go unscaled, as rejax's do."""
    import value_based_cartpole as cartpole  # benchmarks/, on the path through the fixture

    dqn = peer.rejax_config(cartpole.compose("dqn", cartpole.DQN_OVERRIDES))
    assert (dqn["num_envs"], dqn["num_epochs"], dqn["target_update_freq"], dqn["total_timesteps"]) == \
        (16, 4, 256, 500_000)
    pqn = peer.rejax_config(cartpole.compose("pqn", cartpole.PQN_OVERRIDES))
    assert (pqn["num_envs"], pqn["num_steps"], pqn["total_timesteps"]) == (16, 128, 499_712)
