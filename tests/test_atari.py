"""Atari through envpool on Sebulba, and the IMPALA ResNet torso.

The training envs end the learner's episode at a lost life and clip rewards; the episode metrics, and so every
logged and evaluated return, are the game's own score over whole games; evaluation plays without either. A smoke
run of PPO on Breakout checks that the pieces fit (what the network is given, finite metrics, the exact budget),
not that anything is learned.
"""

from __future__ import annotations

import json
import pathlib
from typing import List

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from omegaconf import OmegaConf

from conftest import REPO_ROOT, run_python
from stoix_like.config.compose import CONFIG_DIR
from stoix_like.networks.torsos import ResNetTorso

needs_envpool = pytest.mark.skipif(__import__("importlib").util.find_spec("envpool") is None,
                                   reason="envpool (the sebulba extra) not installed")


def atari(task: str, num_envs: int, evaluation: bool = False):
    from stoix_like.envs.cpu_vector_env import make_cpu_envs

    env_config = OmegaConf.to_container(OmegaConf.load(pathlib.Path(CONFIG_DIR, "env", "envpool", f"{task}.yaml")))
    assert isinstance(env_config, dict)
    return make_cpu_envs({str(key): value for key, value in env_config.items()}, num_envs, seed=0,
                         evaluation=evaluation)


def test_resnet_torso_reads_stacked_frames():
    torso = ResNetTorso(channels=[16, 32, 32], layer_sizes=[256])
    # (T, envs, height, width, stack): leading axes are batch axes
    frames = jax.random.uniform(jax.random.PRNGKey(1), (3, 2, 84, 84, 4))
    params = jax.jit(torso.init)(jax.random.PRNGKey(0), frames[0, :1])  # jitted: one compile, not op by op
    features = jax.jit(torso.apply)(params, frames)
    assert features.shape == (3, 2, 256) and bool(jnp.all(jnp.isfinite(features))) and bool(jnp.all(features >= 0))
    # IMPALA's network at 84×84: ~98k conv params, then 11·11·32 = 3,872 features into the dense 256
    count = sum(leaf.size for leaf in jax.tree_util.tree_leaves(params))
    assert count == 1_089_232, count
    with pytest.raises(ValueError, match="observation_layout=image"):
        torso.init(jax.random.PRNGKey(0), jnp.zeros((2, 84)))


def test_resnet_convolutions_as_patches_compute_xlas_convolution():
    """The two ways of computing the 3×3 convolutions share parameters and agree; "auto" takes patches on a CPU."""
    frames = jax.random.uniform(jax.random.PRNGKey(1), (2, 21, 17, 3))
    torsos = {convolution: ResNetTorso(channels=[8, 16], layer_sizes=[32], convolution=convolution)
              for convolution in ("xla", "patches", "auto")}
    params = torsos["xla"].init(jax.random.PRNGKey(0), frames)
    assert jax.tree_util.tree_structure(params) == jax.tree_util.tree_structure(
        torsos["patches"].init(jax.random.PRNGKey(0), frames))
    features = {convolution: torso.apply(params, frames) for convolution, torso in torsos.items()}
    assert float(jnp.abs(features["xla"]).max()) > 0.1  # not a comparison of zeros
    np.testing.assert_allclose(features["patches"], features["xla"], rtol=1e-4, atol=1e-4)
    assert jax.default_backend() != "cpu" or bool(jnp.all(features["auto"] == features["patches"]))
    with pytest.raises(ValueError, match="choose one of auto, xla, patches"):
        ResNetTorso(channels=[8], layer_sizes=[8], convolution="fft").init(jax.random.PRNGKey(0), frames)


@needs_envpool
def test_training_envs_clip_and_end_lives_but_report_the_game_score():
    """Space Invaders pays 5 to 30 points an alien: the learner sees rewards clipped to 1, the metrics the points."""
    train = atari("space_invaders", 2)
    evaluation = atari("space_invaders", 2, evaluation=True)
    try:
        assert train.options["reward_clip"] and train.options["episodic_life"]
        assert not evaluation.options["reward_clip"] and not evaluation.options["episodic_life"]
        rng = np.random.default_rng(0)
        for envs in (train, evaluation):
            timestep = envs.reset(seed=0)
            assert timestep.observation.agent_view.shape == (2, 84, 84, 4)
            assert timestep.observation.agent_view.dtype == np.float32
            seen: List[np.ndarray] = []
            learner_ends, game_ends = 0, 0
            learnt = np.zeros(2, np.float32)  # the rewards the learner saw in each env's current game
            for _ in range(300):  # a random game of Space Invaders lasts ~400 steps
                timestep = envs.step(rng.integers(0, envs.action_space.num_actions, 2))
                metrics = timestep.extras["episode_metrics"]
                seen.append(np.asarray(timestep.reward))
                learnt += timestep.reward
                learner_ends += int(timestep.last().sum())
                game_ends += int(metrics["is_terminal_step"].sum())
                if envs is train:  # the metrics' running return is the game's score: 5+ points per reward learnt
                    np.testing.assert_array_less(5 * learnt - 1e-3, metrics["episode_return"])
                else:  # the very rewards seen
                    np.testing.assert_allclose(learnt, metrics["episode_return"])
                learnt[metrics["is_terminal_step"]] = 0.0
            rewards = np.concatenate(seen)
            if envs is train:
                assert rewards.max() == 1.0, "training rewards are clipped to their sign"
                # a lost life ends the learner's episode (discount 0), not the game
                assert learner_ends > game_ends, (learner_ends, game_ends)
            else:
                assert rewards.max() >= 5.0, "evaluation sees the game's own points"
                assert learner_ends == game_ends, "evaluation plays whole games"
    finally:
        train.close()
        evaluation.close()


@needs_envpool
def test_a_game_ends_after_its_last_life_with_episodic_life():
    """envpool's own reset(env_id) would start a new game at each lost life (lives back to full, no game ever
    ended); the adapter keeps playing the same game across lives, so the game ends after Breakout's 5 lives."""
    envs = atari("breakout", 1)
    try:
        envs.reset(seed=0)
        lives_lost = 0
        for _ in range(2000):  # FIRE every step: each life lasts ~24 steps
            timestep = envs.step(np.ones(1, np.int64))
            metrics = timestep.extras["episode_metrics"]
            if metrics["is_terminal_step"][0]:
                assert timestep.discount[0] == 0 and metrics["ended_by_termination"][0]
                assert lives_lost == 4, f"the game ended after {lives_lost + 1} lives"
                return
            if timestep.last()[0]:
                assert timestep.discount[0] == 0
                lives_lost += 1
        pytest.fail(f"no game ended in 2,000 steps ({lives_lost} lives lost)")
    finally:
        envs.close()


SMOKE = r'''
import json, sys
import jax, numpy as np
sys.path.insert(0, sys.argv[2])
from conftest import compose_config
from stoix_like.run.sebulba import loop
from stoix_like.systems.on_policy import ppo

seen = {"act": [], "learn": [], "ranges": []}

def recording_setup(*args):
    """PPO's Sebulba setup, recording what its networks are given (shapes at tracing, values as they run)."""
    setup = ppo.sebulba_setup(*args)

    def act(params, observation, key):
        view = observation.agent_view
        seen["act"].append((list(view.shape), str(view.dtype)))
        jax.debug.callback(lambda low, high: seen["ranges"].append((float(low), float(high))), view.min(), view.max())
        return setup.act(params, observation, key)

    def learn_step(state, steps):
        seen["learn"].append((list(steps.observation.agent_view.shape), str(steps.observation.agent_view.dtype)))
        return setup.learn_step(state, steps)

    return setup._replace(act=act, learn_step=learn_step)

config = compose_config("ppo", json.loads(sys.argv[3]), base_exp_path=sys.argv[1] + "/out")
result = loop.run(config, recording_setup, "ppo")
(metrics_file,) = __import__("pathlib").Path(sys.argv[1], "out").rglob("metrics.json")
print(json.dumps({"steps_done": result.steps_done, "absolute": result.absolute_return,
                  "final": [float(x) for x in result.final_returns], "act": seen["act"], "learn": seen["learn"],
                  "low": min(r[0] for r in seen["ranges"]), "high": max(r[1] for r in seen["ranges"]),
                  "calls": len(seen["ranges"]), "metrics": json.loads(metrics_file.read_text())}))
'''

# 2 evaluations × 2 updates × 16 steps × 4 envs = 256 steps, one epoch of one minibatch; games cut at 100 steps so
# that evaluations stay short (a truncation: the metrics still report the game's score so far)
SMOKE_OVERRIDES = [
    "arch=sebulba", "env=envpool/breakout", "env.max_episode_steps=100",
    "arch.total_num_envs=4", "system.rollout_length=16", "arch.total_timesteps=256", "arch.num_evaluation=2",
    "arch.num_eval_episodes=2", "system.epochs=1", "system.num_minibatches=1",
]
# each image network a user is offered for Atari: a small ResNet (separate actor and critic), and the Nature CNN
# under both heads (README's Atari row) with a small dense layer
SMOKE_NETWORKS = {
    "resnet": ["network=resnet_ppo", *[f"network.{network}.pre_torso.{key}={value}"
                                       for network in ("actor_network", "critic_network")
                                       for key, value in (("channels", "[4,8]"), ("blocks_per_stage", 1),
                                                          ("layer_sizes", "[32]"))]],
    "nature_cnn_shared": ["network=cnn_ppo_nature_shared", "network.actor_network.pre_torso.layer_sizes=[32]"],
}


@needs_envpool
@pytest.mark.parametrize("network", sorted(SMOKE_NETWORKS))
def test_ppo_on_breakout_runs_on_sebulba_with_an_image_network(tmp_path, network):
    script = tmp_path / "smoke.py"
    script.write_text(SMOKE)
    overrides = [*SMOKE_OVERRIDES, *SMOKE_NETWORKS[network]]
    completed = run_python([str(script), str(tmp_path), str(REPO_ROOT / "tests"), json.dumps(overrides)],
                           cwd=tmp_path, env={"JAX_PLATFORMS": "cpu"}, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads([line for line in completed.stdout.splitlines() if line.startswith("{")][-1])
    assert result["steps_done"] == 256
    # the networks read (84, 84, 4) float frames scaled to [0, 1]: 4 envs acting, rollouts of 16 steps learnt from
    assert {tuple(shape) for shape, _ in result["act"]} == {(4, 84, 84, 4)}, result["act"]
    assert {tuple(shape) for shape, _ in result["learn"]} == {(16, 4, 84, 84, 4)}, result["learn"]
    assert {dtype for _, dtype in result["act"] + result["learn"]} == {"float32"}
    assert result["calls"] >= 2 * 2 * 16 and 0.0 <= result["low"] and 0.0 < result["high"] <= 1.0, result
    # every logged return is a finite game score (marl-eval layout: suite / task / algorithm / seed / step)
    (seed,) = result["metrics"]["envpool"]["Breakout-v5"]["ppo"].values()
    evaluations = [seed[f"step_{index}"] for index in range(2)] + [seed["absolute_metrics"]]
    for evaluation in evaluations:
        returns = evaluation["episode_return"]
        assert returns and all(np.isfinite(returns)) and min(returns) >= 0, evaluation
        assert all(0 < length <= 100 for length in evaluation["episode_length"]), evaluation
    assert np.isfinite(result["absolute"]) and all(np.isfinite(result["final"]))
