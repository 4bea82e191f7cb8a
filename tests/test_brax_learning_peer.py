"""benchmarks/brax_learning_peer.py: what it hands brax's SAC trainer is read from the same composed config ours
trains, and a config that trainer cannot express is refused (before ours trains) rather than silently compared.
Nothing here trains: the configs are composed and mapped only."""

from __future__ import annotations

import sys

import pytest

from conftest import REPO_ROOT, run_python

SCRIPT = str(REPO_ROOT / "benchmarks" / "brax_learning_peer.py")


@pytest.fixture(scope="module")
def peer():
    sys.path.insert(0, str(REPO_ROOT))
    try:
        yield __import__("benchmarks.brax_learning_peer", fromlist=["brax_kwargs"])
    finally:
        sys.path.remove(str(REPO_ROOT))


def test_sac_s_shipped_halfcheetah_file_maps_onto_brax_s_sac(peer, tmp_path):
    config = peer.composed("sac", "halfcheetah", 1001, 4, str(tmp_path))
    kwargs = peer.brax_kwargs(config)
    network = kwargs.pop("network_factory")
    assert kwargs == dict(
        num_timesteps=520_192, num_evals=11, num_eval_envs=32, deterministic_eval=True, episode_length=1000,
        num_envs=128, grad_updates_per_step=8, batch_size=256, min_replay_size=8192, max_replay_size=1_048_576,
        learning_rate=6e-4, discounting=0.99, tau=0.005, reward_scaling=5.0, normalize_observations=True)
    assert network.keywords["hidden_layer_sizes"] == (256, 256)
    assert network.keywords["activation"].__name__ == "relu"


def test_sac_s_playground_file_maps_onto_brax_s_sac_with_playground_s_wrapper(peer, tmp_path):
    """A Playground task composes env=playground/<task>, hands brax's SAC Playground's own numbers (batches of 512,
    LayerNorm in the Q-networks) and reaches brax's trainer through Playground's wrapper for it."""
    config = peer.composed("sac", "playground/cheetah_run", 1001, 4, str(tmp_path))
    assert str(config.env.scenario.name) == "CheetahRun"
    kwargs = peer.brax_kwargs(config)
    network = kwargs.pop("network_factory").keywords
    assert (kwargs["batch_size"], kwargs["grad_updates_per_step"], kwargs["learning_rate"], kwargs["episode_length"],
            kwargs["min_replay_size"]) == (512, 8, 1e-3, 1000, 8192)
    assert network["q_network_layer_norm"] and "policy_network_layer_norm" not in network  # brax's default: none
    env, wrapping = peer.brax_environment(config)
    assert wrapping["wrap_env_fn"].__name__ == "wrap_for_brax_training" and env.action_size == 6


def test_ppo_s_mapping_still_reads_the_critic_s_activation(peer, tmp_path):
    kwargs = peer.brax_kwargs(peer.composed("ppo", "ant", 1001, 4, str(tmp_path)))
    assert (kwargs["num_envs"], kwargs["unroll_length"], kwargs["batch_size"]) == (128, 32, 32)
    assert kwargs["network_factory"].keywords["activation"].__name__ == "silu"


@pytest.mark.parametrize("override, why", [
    ("system.rollout_length=2", "rollout_length must be 1"),
    ("system.q_lr=3e-4", "one learning rate"),
    ("network.q_network.pre_torso.layer_sizes=[128,128]", "one size and activation"),
    ("system.num_critics=3", "fixes them"),
])
def test_a_config_brax_s_sac_cannot_express_is_refused(peer, tmp_path, override, why):
    from stoix_like.config.compose import compose_config

    config = compose_config("sac", ["env=brax/halfcheetah", override, f"logger.base_exp_path={tmp_path}"])
    with pytest.raises(SystemExit, match=why):
        peer.brax_kwargs(config)


def test_bad_input_is_refused_in_one_line_before_any_work(tmp_path):
    done = run_python([SCRIPT, "--task", "halfcheetah", "--algorithm", "sac", "--num-seeds", "0"], cwd=tmp_path)
    assert done.returncode == 2 and "--num-seeds must be at least 1" in done.stderr
    assert len(done.stderr.strip().splitlines()[-1]) < 200
