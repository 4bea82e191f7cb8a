"""The environment layer: adapters' termination/truncation semantics, wrappers, factory and env configs.

Each suite is compiled once (module-scoped fixtures); rollouts are short jitted `lax.scan`s.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml

from stoix_like.envs import (
    ContinuousActionSpace,
    DiscreteActionSpace,
    Environment,
    VmapWrapper,
    make,
)
from stoix_like.types import StepType, TimeStep

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
ENV_CONFIGS = sorted((REPO_ROOT / "config" / "env").glob("*/*.yaml"))

Policy = Callable[[jax.Array, TimeStep], jax.Array]


def env_config(suite: str, name: str, max_episode_steps=None, **kwargs) -> dict:
    return {"suite": suite, "scenario": {"name": name}, "kwargs": kwargs, "max_episode_steps": max_episode_steps}


def random_discrete_policy(key: jax.Array, timestep: TimeStep) -> jax.Array:
    """Uniform over the legal actions."""
    logits = jnp.where(timestep.observation.action_mask, 0.0, -jnp.inf)
    return jax.random.categorical(key, logits)


def make_rollout(env: Environment, policy: Policy, num_steps: int) -> Callable:
    """A jitted `key -> (reset_timestep, stacked step timesteps)`; keeps the final state out for brevity."""

    def rollout(key):
        reset_key, policy_key = jax.random.split(key)
        state, first_timestep = env.reset(reset_key)

        def one_step(carry, step_key):
            state, timestep = carry
            state, timestep = env.step(state, policy(step_key, timestep))
            return (state, timestep), timestep

        _, timesteps = jax.lax.scan(one_step, (state, first_timestep), jax.random.split(policy_key, num_steps))
        return first_timestep, timesteps

    return jax.jit(rollout)


def last_indices(timesteps: TimeStep) -> np.ndarray:
    return np.flatnonzero(np.asarray(timesteps.step_type) == StepType.LAST)


def assert_next_obs_convention(timesteps: TimeStep) -> None:
    """AutoReset: next_obs differs from the observation exactly on LAST steps (the reset observation)."""
    is_last = np.asarray(timesteps.step_type) == StepType.LAST
    view = np.asarray(timesteps.observation.agent_view)
    next_view = np.asarray(timesteps.extras["next_obs"].agent_view)
    same = np.all(view == next_view, axis=-1)
    np.testing.assert_array_equal(same, ~is_last)
    # After a reset the agent sees step 0; next_obs shows where the finished episode stopped.
    step_count = np.asarray(timesteps.observation.step_count)
    assert np.all(step_count[is_last] == 0)
    next_step_count = np.asarray(timesteps.extras["next_obs"].step_count)
    np.testing.assert_array_equal(next_step_count[is_last], timesteps.extras["episode_metrics"]["episode_length"][is_last])


def assert_same_structure(a, b) -> None:
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    shapes = lambda tree: jax.tree_util.tree_map(lambda x: (jnp.shape(x), jnp.result_type(x)), tree)
    assert shapes(a) == shapes(b)


# ---------------------------------------------------------------------------------------------------- gymnax


@pytest.fixture(scope="module")
def cartpole():
    train_env, eval_env = make(env_config("gymnax", "CartPole-v1"))
    return train_env, eval_env, make_rollout(train_env, random_discrete_policy, 150)


@pytest.fixture(scope="module")
def pendulum():
    train_env, _ = make(env_config("gymnax", "Pendulum-v1"))

    def policy(key, timestep):
        return jax.random.uniform(key, (1,), minval=-2.0, maxval=2.0)

    return train_env, make_rollout(train_env, policy, 203)


def test_cartpole_termination_gives_last_with_discount_zero(cartpole):
    train_env, _, rollout = cartpole
    assert train_env.action_space == DiscreteActionSpace(2)
    assert train_env.observation_shape == (4,)
    assert train_env.max_episode_steps == 500

    first_timestep, timesteps = rollout(jax.random.PRNGKey(0))
    assert int(first_timestep.step_type) == StepType.FIRST
    assert float(first_timestep.discount) == 1.0 and float(first_timestep.reward) == 0.0

    ends = last_indices(timesteps)
    assert len(ends) >= 3, "random CartPole should fall several times in 150 steps"
    discount = np.asarray(timesteps.discount)
    assert np.all(discount[ends] == 0.0)
    assert np.all(np.delete(discount, ends) == 1.0)
    assert np.all(np.delete(np.asarray(timesteps.step_type), ends) == StepType.MID)
    assert np.all(np.asarray(timesteps.extras["episode_metrics"]["ended_by_termination"])[ends])


def test_cartpole_episode_metrics_on_last_steps(cartpole):
    _, _, rollout = cartpole
    _, timesteps = rollout(jax.random.PRNGKey(0))
    metrics = jax.tree_util.tree_map(np.asarray, timesteps.extras["episode_metrics"])
    ends = last_indices(timesteps)
    expected_lengths = np.diff(np.concatenate([[-1], ends]))
    np.testing.assert_array_equal(metrics["episode_length"][ends], expected_lengths)
    np.testing.assert_allclose(metrics["episode_return"][ends], expected_lengths)  # reward 1 per step
    np.testing.assert_array_equal(metrics["is_terminal_step"], np.asarray(timesteps.step_type) == StepType.LAST)
    assert metrics["episode_return"].dtype == np.float32 and metrics["episode_length"].dtype == np.int32


def test_auto_reset_keeps_pre_reset_observation_in_next_obs(cartpole):
    _, _, rollout = cartpole
    first_timestep, timesteps = rollout(jax.random.PRNGKey(0))
    np.testing.assert_array_equal(first_timestep.extras["next_obs"].agent_view, first_timestep.observation.agent_view)
    assert_next_obs_convention(timesteps)


def test_train_and_eval_timesteps_share_structure(cartpole):
    train_env, eval_env, _ = cartpole
    key = jax.random.PRNGKey(1)
    train_state, train_reset = train_env.reset(key)
    eval_state, eval_reset = eval_env.reset(key)
    _, train_step = train_env.step(train_state, jnp.int32(0))
    _, eval_step = eval_env.step(eval_state, jnp.int32(0))
    for timestep in (train_step, eval_reset, eval_step):
        assert_same_structure(train_reset, timestep)
    assert set(train_step.extras) == {"episode_metrics", "next_obs"}
    assert train_step.step_type.dtype == jnp.int8 and train_step.discount.dtype == jnp.float32
    assert train_step.observation.action_mask.dtype == jnp.bool_


def test_eval_env_does_not_auto_reset(cartpole):
    _, eval_env, _ = cartpole
    state, timestep = eval_env.reset(jax.random.PRNGKey(0))
    step = jax.jit(eval_env.step)
    for _ in range(eval_env.max_episode_steps):
        state, timestep = step(state, jnp.int32(1))  # always push right: falls within a few dozen steps
        if timestep.last():
            break
    assert timestep.last() and float(timestep.discount) == 0.0
    np.testing.assert_array_equal(timestep.extras["next_obs"].agent_view, timestep.observation.agent_view)
    assert int(timestep.observation.step_count) == int(timestep.extras["episode_metrics"]["episode_length"]) > 0


def test_vmap_wrapper_batches_reset_and_step(cartpole):
    train_env, _, _ = cartpole
    batched = VmapWrapper(train_env)
    states, timesteps = batched.reset(jax.random.split(jax.random.PRNGKey(0), 3))
    states, timesteps = batched.step(states, jnp.zeros((3,), jnp.int32))
    assert timesteps.observation.agent_view.shape == (3, 4)
    assert timesteps.extras["next_obs"].agent_view.shape == (3, 4)
    assert timesteps.extras["episode_metrics"]["episode_length"].shape == (3,)


def _random_rollout(batched: VmapWrapper, step, key: jax.Array, num_envs: int = 8, length: int = 600):
    """`length` steps of `num_envs` envs under random actions, through `step(states, actions)`: what each step saw."""
    space = batched.action_space

    def one_step(carry, step_key):
        if isinstance(space, DiscreteActionSpace):
            actions = jax.random.randint(step_key, (num_envs,), 0, space.num_actions)
        else:
            actions = jax.random.uniform(step_key, (num_envs, *space.shape), minval=-1.0, maxval=1.0)
        states, timesteps = step(carry, actions)
        return states, (timesteps.observation.agent_view, timesteps.extras["next_obs"].agent_view, timesteps.reward,
                        timesteps.last(), states)

    states, _ = batched.reset(jax.random.split(key, num_envs))
    return jax.lax.scan(one_step, states, jax.random.split(key, length))[1]


@pytest.mark.parametrize("outer_seeds", [None, 2])
def test_resets_computed_only_when_an_env_finished_change_nothing_on_cartpole(outer_seeds):
    """On CPU a batch's resets are computed under a conditional, on the steps where one of its envs finished: the
    same keys, hence the same trajectory as a reset per env on every step (`vmap` of the one-env step), alone and
    under an outer vmap (a population's seeds), where the conditional becomes a select."""
    train_env, _ = make(env_config("gymnax", "CartPole-v1"))
    batched = VmapWrapper(train_env)
    one_env_steps = jax.vmap(train_env.step)

    def both(key):
        return _random_rollout(batched, batched.step, key), _random_rollout(batched, one_env_steps, key)

    keys = jax.random.PRNGKey(3) if outer_seeds is None else jax.random.split(jax.random.PRNGKey(3), outer_seeds)
    program = jax.jit(both if outer_seeds is None else jax.vmap(both))
    if outer_seeds is None:  # the conditional is really there, alone
        assert " conditional(" in program.lower(keys).compile().as_text()
    conditional, every_step = program(keys)
    assert int(np.sum(conditional[3])) > 20  # many episodes ended (a random CartPole falls in ~20 steps)
    for ours, theirs in zip(jax.tree_util.tree_leaves(conditional), jax.tree_util.tree_leaves(every_step)):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


@pytest.mark.parametrize("name, reads_key", [("CartPole-v1", False), ("Asterix-MinAtar", True)])
def test_gymnax_key_moves_only_for_an_env_whose_step_reads_it(name, reads_key):
    """A deterministic step (CartPole's) carries its key unchanged rather than hash it each step for nothing; a
    stochastic one (Asterix spawns enemies at random) still draws each step from a fresh split, as before."""
    from stoix_like.envs.gymnax_adapter import GymnaxAdapter

    adapter = GymnaxAdapter(name)
    state, _ = adapter.reset(jax.random.PRNGKey(0))
    next_state, timestep = jax.jit(adapter.step)(state, jnp.int32(1))
    assert np.array_equal(next_state.key, state.key) is not reads_key
    key, step_key = jax.random.split(state.key)
    obs, _, reward, _, _ = adapter._env.step_env(step_key, state.env_state, jnp.int32(1), adapter._params)
    # gymnax's own step with that split key (eager here, so equal to float rounding)
    np.testing.assert_allclose(timestep.observation.agent_view, np.ravel(obs), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(timestep.reward, reward, rtol=1e-6)
    if reads_key:
        np.testing.assert_array_equal(next_state.key, key)


def test_resets_computed_only_when_an_env_finished_differ_in_the_last_bits_at_most():
    """Pendulum's step compiled apart from its reset may round differently (XLA fuses them differently): the
    trajectories agree to float32 rounding, not bit for bit."""
    train_env, _ = make(env_config("gymnax", "Pendulum-v1"))
    batched = VmapWrapper(train_env)
    key = jax.random.PRNGKey(3)
    conditional = jax.jit(lambda k: _random_rollout(batched, batched.step, k, length=450))(key)
    every_step = jax.jit(lambda k: _random_rollout(batched, jax.vmap(train_env.step), k, length=450))(key)
    np.testing.assert_array_equal(conditional[3], every_step[3])  # the same episode ends (every 200 steps)
    assert int(np.sum(conditional[3])) == 2 * 8
    for ours, theirs in zip(conditional[:3], every_step[:3]):
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-5, atol=1e-5)


def test_shared_resets_restart_finished_envs_in_turn_and_leave_the_others_exact():
    """env.resets_per_step=k: the envs that finish on a step take k fresh initial states in turn; everything else
    (the envs still running, and every finished env's reward, discount, step type and next_obs) is exactly what the
    one-reset-per-env wrapper gives."""
    exact = VmapWrapper(make(env_config("gymnax", "CartPole-v1", max_episode_steps=2))[0])
    shared = VmapWrapper(make({**env_config("gymnax", "CartPole-v1", max_episode_steps=2), "resets_per_step": 1})[0])
    actions = jnp.zeros((4,), jnp.int32)

    @jax.jit
    def two_steps(key):
        states, _ = exact.reset(jax.random.split(key, 4))
        stepped, _ = exact.step(states, actions)
        # envs 0 and 1 are one step into their episodes, envs 2 and 3 fresh: on the next step 0 and 1 hit the limit
        one_in = jnp.arange(4) < 2
        states = jax.tree_util.tree_map(lambda a, b: jnp.where(one_in.reshape((4,) + (1,) * (a.ndim - 1)), a, b),
                                        stepped, states)
        return exact.step(states, actions), shared.step(states, actions)

    (exact_states, exact_steps), (shared_states, shared_steps) = two_steps(jax.random.PRNGKey(0))
    np.testing.assert_array_equal(exact_steps.last(), [True, True, False, False])
    for field in ("step_type", "reward", "discount"):
        np.testing.assert_array_equal(getattr(shared_steps, field), getattr(exact_steps, field))
    np.testing.assert_array_equal(shared_steps.extras["next_obs"].agent_view, exact_steps.extras["next_obs"].agent_view)
    view = np.asarray(shared_steps.observation.agent_view)
    np.testing.assert_array_equal(view[2:], exact_steps.observation.agent_view[2:])  # still running: untouched
    for shared_leaf, exact_leaf in zip(jax.tree_util.tree_leaves(shared_states.env_state),
                                       jax.tree_util.tree_leaves(exact_states.env_state)):
        np.testing.assert_array_equal(np.asarray(shared_leaf)[2:], np.asarray(exact_leaf)[2:])
    # one fresh state for the two finished envs: both restart from it, at step 0 of a new episode
    np.testing.assert_array_equal(view[0], view[1])
    assert not np.array_equal(view[0], exact_steps.extras["next_obs"].agent_view[0])
    np.testing.assert_array_equal(shared_steps.observation.step_count[:2], [0, 0])


def test_more_shared_resets_than_envs_are_refused_in_one_line():
    from stoix_like.errors import ConfigError

    shared = VmapWrapper(make({**env_config("gymnax", "CartPole-v1"), "resets_per_step": 5})[0])
    states, _ = shared.reset(jax.random.split(jax.random.PRNGKey(0), 4))
    with pytest.raises(ConfigError, match=r"env.resets_per_step=5 must be in \[1, 4\]"):
        shared.step(states, jnp.zeros((4,), jnp.int32))


def test_pendulum_truncation_gives_last_with_discount_one(pendulum):
    train_env, rollout = pendulum
    assert isinstance(train_env.action_space, ContinuousActionSpace)
    np.testing.assert_array_equal(train_env.action_space.low, [-2.0])
    np.testing.assert_array_equal(train_env.action_space.high, [2.0])
    assert train_env.max_episode_steps == 200

    _, timesteps = rollout(jax.random.PRNGKey(0))
    np.testing.assert_array_equal(last_indices(timesteps), [199])
    assert np.all(np.asarray(timesteps.discount) == 1.0)
    metrics = jax.tree_util.tree_map(np.asarray, timesteps.extras["episode_metrics"])
    assert metrics["episode_length"][199] == 200 and not metrics["ended_by_termination"][199]
    np.testing.assert_allclose(metrics["episode_return"][199], np.sum(timesteps.reward[:200]), rtol=1e-5)
    np.testing.assert_array_equal(timesteps.observation.step_count[198:203], [199, 0, 1, 2, 3])
    np.testing.assert_array_equal(timesteps.observation.action_mask, np.ones((203, 1), bool))
    assert_next_obs_convention(timesteps)


def test_gymnax_honours_env_max_episode_steps():
    # env.max_episode_steps sets gymnax's max_steps_in_episode: the third step truncates, keeping discount 1
    train_env, _ = make(env_config("gymnax", "Pendulum-v1", max_episode_steps=3))
    assert train_env.max_episode_steps == 3

    def policy(key, timestep):
        return jax.random.uniform(key, (1,), minval=-2.0, maxval=2.0)

    _, timesteps = make_rollout(train_env, policy, 4)(jax.random.PRNGKey(0))
    np.testing.assert_array_equal(last_indices(timesteps), [2])
    assert np.all(np.asarray(timesteps.discount) == 1.0)


# ---------------------------------------------------------------------------------------------------- brax


@pytest.fixture(scope="module")
def ant():
    train_env, _ = make(env_config("brax", "ant", backend="spring", max_episode_steps=5))
    return train_env, jax.jit(train_env.reset), jax.jit(train_env.step)


def test_brax_truncation_and_auto_reset(ant):
    env, reset, step = ant
    assert env.action_space.shape == (8,) and env.max_episode_steps == 5
    state, timestep = reset(jax.random.PRNGKey(0))
    assert timestep.observation.agent_view.shape == env.observation_shape
    step_types, discounts = [], []
    for _ in range(6):
        state, timestep = step(state, jnp.zeros((8,)))
        step_types.append(int(timestep.step_type))
        discounts.append(float(timestep.discount))
        if timestep.last():
            last_timestep = timestep
            assert not np.array_equal(timestep.extras["next_obs"].agent_view, timestep.observation.agent_view)
            assert int(timestep.extras["episode_metrics"]["episode_length"]) == 5
            assert not bool(timestep.extras["episode_metrics"]["ended_by_termination"])
    assert step_types == [1, 1, 1, 1, 2, 1]
    assert discounts == [1.0] * 6
    assert int(last_timestep.observation.step_count) == 0 and int(timestep.observation.step_count) == 1


def test_brax_termination_gives_discount_zero(ant):
    env, reset, step = ant
    state, _ = reset(jax.random.PRNGKey(0))
    # Lift the ant 5 m: above Ant's healthy_z_range (0.2, 1.0), so brax sets done on the next step.
    # Done by editing the spring pipeline state so that the already compiled step is reused.
    inner = state.env_state.env_state  # AutoReset -> EpisodeMetrics -> BraxAdapter state
    pipeline_state = inner.env_state.pipeline_state
    lift = lambda transform: transform.replace(pos=transform.pos.at[:, 2].add(5.0))
    pipeline_state = pipeline_state.replace(x=lift(pipeline_state.x), x_i=lift(pipeline_state.x_i))
    inner = inner._replace(env_state=inner.env_state.replace(pipeline_state=pipeline_state))
    state = state._replace(env_state=state.env_state._replace(env_state=inner))

    _, timestep = step(state, jnp.zeros((8,)))
    assert timestep.last() and float(timestep.discount) == 0.0
    assert bool(timestep.extras["episode_metrics"]["ended_by_termination"])
    assert float(timestep.extras["next_obs"].agent_view[0]) > 1.0  # obs[0] is the torso height


# ---------------------------------------------------------------------------------------------------- jumanji


@pytest.fixture(scope="module")
def snake():
    train_env, _ = make(env_config("jumanji", "Snake-v1", time_limit=20))  # Snake's own limit
    always_up = make_rollout(train_env, lambda key, timestep: jnp.int32(0), 13)
    random_legal = make_rollout(train_env, random_discrete_policy, 22)
    return train_env, always_up, random_legal


def test_snake_wall_is_termination_with_mask(snake):
    env, always_up, _ = snake
    assert env.action_space == DiscreteActionSpace(4) and env.max_episode_steps == 20
    assert env.observation_shape == (12 * 12 * 5,)
    first_timestep, timesteps = always_up(jax.random.PRNGKey(3))
    ends = last_indices(timesteps)
    assert len(ends) >= 1 and ends[0] <= 11  # 12 rows: moving up hits the wall
    assert float(timesteps.discount[ends[0]]) == 0.0
    # The step before the crash has the head on the top row: UP (action 0) is masked out there.
    before_crash = timesteps if ends[0] > 0 else jax.tree_util.tree_map(lambda x: x[None], first_timestep)
    mask_before_crash = before_crash.observation.action_mask[max(ends[0] - 1, 0)]
    assert mask_before_crash.dtype == jnp.bool_ and mask_before_crash.shape == (4,)
    assert not bool(mask_before_crash[0])


def test_snake_mask_equals_jumanji_mask(snake):
    env, _, _ = snake
    state, timestep = env.reset(jax.random.PRNGKey(0))
    for action in (0, 0, 1):
        state, timestep = env.step(state, jnp.int32(action))
        jumanji_state = state.env_state.env_state.env_state  # AutoReset -> EpisodeMetrics -> adapter
        np.testing.assert_array_equal(timestep.observation.action_mask, jumanji_state.action_mask)


def test_snake_time_limit_is_truncation(snake):
    # jumanji itself ends Snake at its time limit with termination() (discount 0); the adapter must not.
    _, _, random_legal = snake
    _, timesteps = random_legal(jax.random.PRNGKey(0))
    np.testing.assert_array_equal(last_indices(timesteps), [19])
    assert np.all(np.asarray(timesteps.discount) == 1.0)
    assert int(timesteps.extras["episode_metrics"]["episode_length"][19]) == 20
    assert_next_obs_convention(timesteps)


def test_game2048_gets_a_truncating_time_limit():
    # Game2048 has no time limit of its own; the adapter supplies one (default 2000) and truncates there.
    train_env, _ = make(env_config("jumanji", "Game2048-v1"))
    assert train_env.max_episode_steps == 2000 and train_env.observation_shape == (16,)
    train_env, _ = make(env_config("jumanji", "Game2048-v1", max_episode_steps=3))
    _, timesteps = make_rollout(train_env, random_discrete_policy, 4)(jax.random.PRNGKey(0))
    np.testing.assert_array_equal(last_indices(timesteps), [2])
    assert np.all(np.asarray(timesteps.discount) == 1.0)
    assert timesteps.observation.action_mask.shape == (4, 4)


# ---------------------------------------------------------------------------------------------------- factory, configs


def test_unknown_suite_lists_available_suites():
    with pytest.raises(ValueError, match="gymnax.*brax.*jumanji"):
        make(env_config("dmcontrol", "walker"))


@pytest.mark.parametrize(
    "suite, listed_name",
    [("gymnax", "CartPole-v1"), ("brax", "halfcheetah"), ("jumanji", "Snake-v1")],
)
def test_unknown_env_name_lists_available_names(suite, listed_name):
    with pytest.raises(ValueError, match=listed_name):
        make(env_config(suite, "NoSuchEnv-v0"))


def _registered_names(suite: str) -> set:
    if suite == "gymnax":
        import gymnax

        return set(gymnax.registered_envs)
    if suite == "brax":
        from brax import envs

        return set(envs._envs)
    if suite == "playground":
        from mujoco_playground import dm_control_suite

        return set(dm_control_suite.ALL_ENVS)
    import jumanji

    return set(jumanji.registered_environments())


@pytest.mark.parametrize("path", ENV_CONFIGS, ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_env_config_has_exact_keys_and_registered_name(path):
    config = yaml.safe_load(path.read_text())
    assert config.pop("defaults")[0] == "/schema/env@_here_"  # typed by stoix_like.config.schemas.EnvSchema
    assert set(config) == {"suite", "scenario", "kwargs", "max_episode_steps", "resets_per_step", "observed_indices",
                           "observation_layout", "eval_metric", "solved_return"}
    assert config["max_episode_steps"] is None or config["max_episode_steps"] >= 1
    assert config["suite"] == path.parent.name
    if config["suite"] in ("gymnax", "brax", "jumanji", "playground"):  # the optional suites' names: tests/test_suites.py
        assert config["scenario"]["name"] in _registered_names(config["suite"])
    assert config["eval_metric"] == "episode_return"
    assert isinstance(config["kwargs"], dict)


def test_env_configs_exist():
    names = {f"{path.parent.name}/{path.stem}" for path in ENV_CONFIGS}
    assert names >= {
        "gymnax/cartpole", "gymnax/acrobot", "gymnax/pendulum",
        "brax/ant", "brax/halfcheetah", "brax/hopper", "brax/walker2d", "brax/humanoid",
        "jumanji/snake", "jumanji/game2048",
    }  # fmt: skip


def test_importing_stoix_like_imports_no_suite():
    code = "import sys, stoix_like.envs; print(sorted({'brax', 'jumanji', 'gymnax'} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, check=True)
    assert result.stdout.strip() == "[]"
