"""The added suites (issue 14) on real episodes: the truncation convention, action masks reaching the policy, and a
PPO smoke run per suite through the entry point.

Each suite's tests skip, naming its extra, where that extra is not installed; CI installs them all
(`.ci/run`), so there they run. Episodes are random play (legal actions only) in a batch of envs under the train
env's auto-reset, long enough that some envs reach the time limit and some end for real.
"""

from __future__ import annotations

import json
import pathlib
import re
from typing import Dict, NamedTuple, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import compose_config, unoptimized_xla
from stoix_like.envs import factory
from stoix_like.envs.environment import ContinuousActionSpace, Environment
from stoix_like.envs.wrappers import VmapWrapper
from stoix_like.networks.factory import build_actor
from stoix_like.networks.torsos import convolution_patches
from stoix_like.types import StepType

# suite -> the module its extra installs
EXTRA_MODULE = {"navix": "navix", "xminigrid": "xminigrid", "craftax": "craftax", "pgx": "pgx",
                "playground": "mujoco_playground", "gymnax": "gymnax", "jumanji": "jumanji"}


def needs_extra(suite: str) -> None:
    pytest.importorskip(EXTRA_MODULE[suite], reason=f"the {suite} extra is not installed: pip install -e '.[{suite}]'")


def shipped_env(option: str, overrides: Sequence[str] = ()) -> Tuple[Environment, Environment]:
    """The (train, eval) envs of a shipped `env=` option, as `python -m experiments.ppo env=<option>` builds them."""
    config = compose_config("ppo", [f"env={option}", *overrides])
    return factory.make(config.env)


# ------------------------------------------------------------------------------------------ real episodes

class Episodes(NamedTuple):
    """Time-major (steps, envs) arrays of what the train env gave."""

    step_type: np.ndarray
    discount: np.ndarray
    step_count: np.ndarray  # of the observation acted on next (a reset one after a LAST step)
    next_step_count: np.ndarray  # of extras["next_obs"], the observation the step really produced
    view_changed: np.ndarray  # observation != next_obs (only an auto-reset may make them differ)
    reward: np.ndarray
    suite_metrics: Dict[str, np.ndarray]


def random_legal_episodes(train_env: Environment, num_envs: int, num_steps: int, seed: int = 0,
                          edit_reset_state=None) -> Episodes:
    """`num_steps` steps of uniformly random legal actions in `num_envs` auto-resetting envs, one jitted scan.
    `edit_reset_state(state) -> state`, if given, changes the first reset's state (to force a termination)."""
    env = VmapWrapper(train_env)
    space = train_env.action_space

    def random_action(key, observation):
        if isinstance(space, ContinuousActionSpace):
            return jax.random.uniform(key, (num_envs,) + space.shape, minval=-1.0, maxval=1.0)
        return jax.random.categorical(key, jnp.where(observation.action_mask, 0.0, -jnp.inf))

    def run(key):
        reset_key, key = jax.random.split(key)
        state, timestep = env.reset(jax.random.split(reset_key, num_envs))
        if edit_reset_state is not None:
            state = edit_reset_state(state)

        def one_step(carry, step_key):
            state, timestep = carry
            state, timestep = env.step(state, random_action(step_key, timestep.observation))
            next_obs = timestep.extras["next_obs"]
            changed = jnp.any((timestep.observation.agent_view != next_obs.agent_view).reshape(num_envs, -1), axis=1)
            metrics = {name: value for name, value in timestep.extras["episode_metrics"].items()
                       if name.startswith("achievement")}
            record = (timestep.step_type, timestep.discount, timestep.observation.step_count,
                      next_obs.step_count, changed, timestep.reward, metrics)
            return (state, timestep), record

        _, records = jax.lax.scan(one_step, (state, timestep), jax.random.split(key, num_steps))
        return records

    records = jax.device_get(jax.jit(run)(jax.random.PRNGKey(seed)))
    return Episodes(*[np.asarray(r) for r in records[:6]], suite_metrics=records[6])


def check_truncation_convention(episodes: Episodes, time_limit: int, expect_termination: bool = True,
                                expect_truncation: bool = True) -> None:
    """discount 0 only on a terminating LAST, discount 1 at the time limit; `next_obs` is the step's own
    observation, the reset one only follows a LAST. The kinds of ending expected must have happened."""
    last = episodes.step_type == StepType.LAST
    terminated = last & (episodes.discount == 0.0)
    truncated = last & (episodes.discount == 1.0)
    assert np.all(episodes.discount[~last] == 1.0), "discount 0 on a step that does not end the episode"
    assert np.all(np.isin(episodes.step_type, (StepType.MID, StepType.LAST)))
    assert np.all(terminated | truncated | ~last)
    # the time limit truncates exactly there, and only the time limit truncates
    np.testing.assert_array_equal(episodes.next_step_count[truncated], time_limit)
    assert np.all(episodes.next_step_count[terminated] <= time_limit)
    assert np.all(episodes.next_step_count[~last] < time_limit)
    # after a LAST the agent acts on a reset observation; extras["next_obs"] keeps the true successor
    np.testing.assert_array_equal(episodes.step_count[last], 0)
    np.testing.assert_array_equal(episodes.step_count[~last], episodes.next_step_count[~last])
    assert not np.any(episodes.view_changed[~last])
    if expect_truncation:
        assert truncated.any(), "no episode reached the time limit"
    if expect_termination:
        assert terminated.any(), "no episode terminated"


class EpisodeCase(NamedTuple):
    suite: str
    option: str  # a shipped env= option
    overrides: Tuple[str, ...]  # env.* overrides (the time limit, a smaller scenario)
    num_envs: int
    num_steps: int
    expect_termination: bool
    expect_truncation: bool = True


# Time limits short enough that random play reaches them, long enough that some episodes end first.
EPISODE_CASES = {
    "navix": EpisodeCase("navix", "navix/empty_8x8", ("env.scenario.name=Navix-Empty-5x5-v0",
                                                      "env.max_episode_steps=24"), 32, 60, True),
    "xminigrid": EpisodeCase("xminigrid", "xminigrid/empty_8x8", ("env.scenario.name=MiniGrid-Empty-5x5",
                                                                  "env.max_episode_steps=24"), 32, 60, True),
    "pgx": EpisodeCase("pgx", "pgx/tic_tac_toe", ("env.max_episode_steps=7",), 32, 20, True),
    "gymnax-minatar": EpisodeCase("gymnax", "gymnax/breakout", ("env.max_episode_steps=12",), 16, 40, True),
    # bsuite's episodes have one length (Catch: 9 steps, DeepSea: its size, 8): one ends, the other is cut short
    "gymnax-bsuite-catch": EpisodeCase("gymnax", "gymnax/catch", ("env.max_episode_steps=12",), 4, 20, True, False),
    "gymnax-bsuite-deep-sea": EpisodeCase("gymnax", "gymnax/deep_sea", ("env.max_episode_steps=6",), 4, 14, False),
    "jumanji-multi-discrete": EpisodeCase("jumanji", "jumanji/minesweeper", ("env.max_episode_steps=6",),
                                          16, 20, True),
    # dm_control's cartpole never terminates (done is a NaN guard): a time limit only
    "playground": EpisodeCase("playground", "playground/cartpole_balance", ("env.max_episode_steps=4",), 2, 6, False),
}


@pytest.mark.parametrize("case", EPISODE_CASES.values(), ids=list(EPISODE_CASES))
def test_time_limit_truncates_and_termination_ends_on_real_episodes(case: EpisodeCase):
    needs_extra(case.suite)
    train_env, _ = shipped_env(case.option, case.overrides)
    episodes = random_legal_episodes(train_env, case.num_envs, case.num_steps)
    check_truncation_convention(episodes, train_env.max_episode_steps, case.expect_termination,
                                case.expect_truncation)


def test_craftax_truncates_at_its_time_limit_and_terminates_on_death_with_achievements_logged():
    # ~1-2 minutes: compiling Craftax's step. Random play does not die within a few steps, so env 0 starts at zero
    # health (its first step then ends the game, a true termination); env 1 plays on to the time limit.
    needs_extra("craftax")
    train_env, _ = shipped_env("craftax/classic_symbolic", ["env.max_episode_steps=3"])

    def kill_first_env(state):
        craftax_state = state.env_state.env_state  # AutoResetState → EpisodeMetricsState → CraftaxState
        health = craftax_state.env_state.player_health.at[0].set(0)
        craftax_state = craftax_state._replace(env_state=craftax_state.env_state.replace(player_health=health))
        return state._replace(env_state=state.env_state._replace(env_state=craftax_state))

    episodes = random_legal_episodes(train_env, num_envs=2, num_steps=4, edit_reset_state=kill_first_env)
    check_truncation_convention(episodes, time_limit=3)
    assert episodes.step_type[0, 0] == StepType.LAST and episodes.discount[0, 0] == 0.0  # died on its first step
    assert episodes.step_type[2, 1] == StepType.LAST and episodes.discount[2, 1] == 1.0  # the time limit
    metrics = episodes.suite_metrics
    assert len([name for name in metrics if name.startswith("achievement_") and name != "achievement_rate"]) == 22
    np.testing.assert_allclose(metrics["achievement_rate"], metrics["achievements_unlocked"] / 22.0)


# ------------------------------------------------------------------------------------------ action masks

MASK_CASES = {"pgx": ("pgx", "pgx/tic_tac_toe"), "jumanji-sudoku": ("jumanji", "jumanji/sudoku"),
              "jumanji-minesweeper": ("jumanji", "jumanji/minesweeper")}


@pytest.mark.parametrize("suite, option", MASK_CASES.values(), ids=list(MASK_CASES))
def test_the_suite_s_action_mask_reaches_the_policy(suite: str, option: str):
    """The suite's own legal-action mask is `Observation.action_mask` (joined over a multi-discrete action's
    components), and PPO's actor gives an illegal action probability 0."""
    needs_extra(suite)
    config = compose_config("ppo", [f"env={option}"])
    train_env, _ = factory.make(config.env)
    env = VmapWrapper(train_env)
    num_envs = 4

    @jax.jit
    def play(key):
        state, timestep = env.reset(jax.random.split(key, num_envs))
        for step_key in jax.random.split(key, 3):  # a few legal moves, so that some actions become illegal
            action = jax.random.categorical(step_key, jnp.where(timestep.observation.action_mask, 0.0, -jnp.inf))
            state, timestep = env.step(state, action)
        return state, timestep

    state, timestep = play(jax.random.PRNGKey(1))
    mask = np.asarray(timestep.observation.action_mask)
    suite_state = state.env_state.env_state  # AutoReset → EpisodeMetrics → the adapter's state
    suite_mask = {  # where each suite keeps its legal actions
        "pgx/tic_tac_toe": lambda: suite_state.game_state.legal_action_mask,
        "jumanji/sudoku": lambda: suite_state.env_state.action_mask,  # (row, column, digit)
        "jumanji/minesweeper": lambda: suite_state.env_state.board == -1,  # unexplored squares
    }[option]()
    np.testing.assert_array_equal(mask, np.asarray(suite_mask).reshape(num_envs, -1))
    assert (~mask).any(), "no action was illegal: the check below would prove nothing"

    actor = build_actor(config.network, train_env.action_space)
    params = actor.init(jax.random.PRNGKey(0), timestep.observation)
    distribution = actor.apply(params, timestep.observation)
    actions = jnp.arange(train_env.action_space.num_actions)
    probabilities = np.asarray(jax.vmap(lambda a: jnp.exp(distribution.log_prob(jnp.full((num_envs,), a))))(actions)).T
    assert np.all(probabilities[~mask] == 0.0)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)


# ------------------------------------------------------------------------------------------ CNN torso

@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_cnn_patches_compute_exactly_xlas_convolution(padding):
    # 10×9 images, so that both axes meet kernels and strides that do and do not tile them evenly
    images = jax.random.normal(jax.random.PRNGKey(0), (3, 10, 9, 4))
    for kernel_size, stride in [(3, 1), (4, 2), (8, 4), (3, 3)]:
        kernel = jax.random.normal(jax.random.PRNGKey(kernel_size), (kernel_size, kernel_size, 4, 6))
        convolved = jax.lax.conv_general_dilated(images, kernel, (stride, stride), padding,
                                                 dimension_numbers=("NHWC", "HWIO", "NHWC"))
        patches = convolution_patches(images, kernel_size, stride, padding)
        assert patches.shape[:3] == convolved.shape[:3], (kernel_size, stride, padding)
        np.testing.assert_allclose(patches @ kernel.reshape(-1, 6), convolved, atol=1e-4)


def test_the_nature_cnn_pads_valid_and_refuses_an_unknown_padding():
    """network=cnn_ppo_nature's torso maps 84×84 frames to the paper's 7×7×64 = 3,136 features; an unknown
    padding is named in the error."""
    import hydra
    from omegaconf import OmegaConf

    frames = jnp.zeros((2, 84, 84, 4))
    for name in ("cnn_ppo_nature", "cnn_ppo_nature_shared"):
        network = OmegaConf.load(pathlib.Path(__file__).parents[1] / "config" / "network" / f"{name}.yaml")
        torso = hydra.utils.instantiate(network.actor_network.pre_torso, layer_sizes=[])
        assert torso.padding == "VALID", name
        assert torso.init_with_output(jax.random.PRNGKey(0), frames)[0].shape == (2, 3136), name
    assert torso.clone(padding="SAME").init_with_output(jax.random.PRNGKey(0), frames)[0].shape == (2, 7744)
    with pytest.raises(ValueError, match="unknown padding 'FULL'"):
        torso.clone(padding="FULL").init(jax.random.PRNGKey(0), frames)


def test_an_image_observation_needs_a_cnn_and_a_cnn_needs_one(compose):
    from stoix_like.config import validation
    from stoix_like.errors import ConfigError

    with pytest.raises(ConfigError, match="set env.observation_layout=image"):
        validation.validate(compose("ppo", ["env=gymnax/breakout", "network=cnn_ppo"]))
    with pytest.raises(ConfigError, match="choose a CNN network"):
        validation.validate(compose("ppo", ["env=gymnax/breakout", "env.observation_layout=image"]))
    with pytest.raises(ConfigError, match="lengths must agree"):
        validation.validate(compose("ppo", ["env=gymnax/breakout", "env.observation_layout=image",
                                               "network=cnn_ppo", "network.actor_network.pre_torso.strides=[1]"]))
    validation.validate(compose("ppo", ["env=gymnax/breakout", "env.observation_layout=image", "network=cnn_ppo"]))


def test_a_vector_observation_cannot_be_kept_as_an_image():
    from stoix_like.errors import ConfigError

    with pytest.raises(ConfigError, match="needs a \\(height, width, channels\\) observation"):
        shipped_env("gymnax/cartpole", ["env.observation_layout=image"])


# ------------------------------------------------------------------------------------------ missing extras

def test_a_missing_extra_is_named_in_one_line(monkeypatch):
    import sys

    from stoix_like.errors import ConfigError

    # None in sys.modules makes every import of navix raise ModuleNotFoundError, as if the extra were not
    # installed, whether or not it is (CI installs every suite)
    monkeypatch.setitem(sys.modules, "navix", None)
    with pytest.raises(ConfigError) as error:
        shipped_env("navix/empty_8x8")
    message = str(error.value)
    assert "\n" not in message and "pip install -e \".[navix]\"" in message


def test_an_xland_benchmark_download_is_refused_in_one_line(tmp_path, monkeypatch):
    needs_extra("xminigrid")
    from xminigrid import benchmarks

    from stoix_like.errors import ConfigError

    monkeypatch.setattr(benchmarks, "DATA_PATH", str(tmp_path))
    monkeypatch.setattr(benchmarks, "_download_from_hf", lambda *a: pytest.fail("xminigrid tried to download"))
    with pytest.raises(ConfigError, match="download it at run time, which is refused"):
        shipped_env("xminigrid/xland_r1_9x9", ["~env.kwargs.ruleset_goal", "~env.kwargs.ruleset_objects",
                                               "+env.kwargs.benchmark=trivial-21k"])


# ------------------------------------------------------------------------------------------ PPO smoke runs

# 1 evaluation × 1 update × 8 steps × 2 envs = 16 steps, 2 minibatches; 16-step episodes, 1 eval episode
TINY = ("arch.total_num_envs=2", "system.rollout_length=8", "system.num_minibatches=2", "arch.num_evaluation=1",
        "arch.num_eval_episodes=1", "arch.total_timesteps=16", "env.max_episode_steps=16",
        "network.actor_network.pre_torso.layer_sizes=[16]", "network.critic_network.pre_torso.layer_sizes=[16]")
CNN = ("network=cnn_ppo", "env.observation_layout=image", "network.actor_network.pre_torso.channels=[8]",
       "network.critic_network.pre_torso.channels=[8]", "network.actor_network.pre_torso.kernel_sizes=[3]",
       "network.critic_network.pre_torso.kernel_sizes=[3]", "network.actor_network.pre_torso.strides=[1]",
       "network.critic_network.pre_torso.strides=[1]")
SMOKE_RUNS = {
    "navix": ("navix", ("env=navix/empty_8x8", *CNN)),
    "xminigrid": ("xminigrid", ("env=xminigrid/xland_r1_9x9",)),
    # ~3 minutes alone on 2 cores: Craftax's step compiles in the learner and in the evaluator
    "craftax": ("craftax", ("env=craftax/classic_symbolic",)),
    "pgx": ("pgx", ("env=pgx/2048",)),
    "playground": ("playground", ("env=playground/cartpole_balance",)),
    "gymnax-minatar": ("gymnax", ("env=gymnax/breakout", *CNN)),
    "jumanji-multi-discrete": ("jumanji", ("env=jumanji/sudoku",)),
}


@pytest.mark.parametrize("suite, command_line", SMOKE_RUNS.values(), ids=list(SMOKE_RUNS))
def test_ppo_smoke_run_through_the_entry_point(suite: str, command_line: Sequence[str], python_subprocess,
                                               tmp_path: pathlib.Path):
    needs_extra(suite)
    completed = python_subprocess(["-m", "experiments.ppo", *command_line, *TINY], cwd=tmp_path,
                                  env=unoptimized_xla())
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert re.search(r"^done: 16 steps \|", completed.stdout, flags=re.MULTILINE), completed.stdout
    (run_dir,) = re.findall(r"^logs: (.+)$", completed.stdout, flags=re.MULTILINE)
    data = json.loads((pathlib.Path(run_dir) / "metrics.json").read_text())
    (run,) = [seeds["seed_42"] for tasks in data.values() for algorithms in tasks.values()
              for seeds in algorithms.values()]
    assert len(run["absolute_metrics"]["episode_return"]) == 10  # 10 × 1 eval episode
    if suite == "craftax":  # achievements are episode metrics, logged per episode
        assert len(run["absolute_metrics"]["achievement_rate"]) == 10
        assert len(run["step_0"]["achievements_unlocked"]) == 1
