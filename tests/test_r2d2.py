"""R2D2: its pieces on hand-worked cases (sequence priorities, burn-in, rescaled n-step double-Q targets, per-actor
ε), its refusals, a resume that continues bit-identically with the recurrent states, and one learning population."""

from __future__ import annotations

import pathlib
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest
from conftest import compose_config, run_python

from stoix_like.config import validation
from stoix_like.errors import ConfigError
from stoix_like.learner.exploration import per_actor_epsilons
from stoix_like.networks.heads import q_head
from stoix_like.networks.recurrent import RecurrentCore, RecurrentQNetwork
from stoix_like.networks.torsos import MLPTorso
from stoix_like.envs.environment import DiscreteActionSpace
from stoix_like.ops import losses, returns
from stoix_like.systems.q_learning import r2d2
from stoix_like.types import Observation


# ------------------------------------------------------------------------------------------ the pieces, by hand

def test_a_sequence_priority_mixes_the_max_and_the_mean_td_error():
    td = jnp.array([[1.0, -3.0], [-2.0, 1.0], [0.0, 1.0]])  # (T=3, B=2)
    # sequence 0: |δ| = 1, 2, 0: 0.9·2 + 0.1·1 = 1.9; sequence 1: 3, 1, 1: 0.9·3 + 0.1·5/3
    np.testing.assert_allclose(losses.sequence_priorities(td, 0.9), [1.9, 2.7 + 0.5 / 3], rtol=1e-6)
    np.testing.assert_allclose(losses.sequence_priorities(td, 0.0), [1.0, 5 / 3], rtol=1e-6)  # the mean alone


@pytest.mark.parametrize("terminated, expected", [
    # step 2 ends its episode. Terminated: its bootstrap is dropped. γ = 0.5, n = 2, v = [10, 20, 30, 40]:
    # G0 = 1 + .5·2 + .25·20 = 7; G1 = 2 + .5·3 + .25·0·30 = 3.5; G2 = 3; G3 = 4 + .5·40 = 24 (the sequence's end)
    (True, [7.0, 3.5, 3.0, 24.0]),
    # truncated (discount 1): the sum still stops at step 2, bootstrapped from its true successor's value 30
    (False, [7.0, 2 + 1.5 + 0.25 * 30, 3 + 0.5 * 30, 24.0]),
])
def test_n_step_returns_stop_at_episode_ends_and_bootstrap_only_at_truncation(terminated, expected):
    rewards = jnp.array([[1.0], [2.0], [3.0], [4.0]])
    discounts = jnp.array([[1.0], [1.0], [0.0 if terminated else 1.0], [1.0]])
    last = jnp.array([[False], [False], [True], [False]])
    values = jnp.array([[10.0], [20.0], [30.0], [40.0]])
    got = returns.n_step_returns(rewards, discounts, last, values, n_step=2, gamma=0.5)
    np.testing.assert_allclose(got[:, 0], expected, rtol=1e-6)


def h(x):
    """Pohlen et al.'s h, written out again: the test checks the op against the formula, not against itself."""
    return np.sign(x) * (np.sqrt(np.abs(x) + 1) - 1) + 1e-3 * x


def test_the_target_is_rescaled_n_step_double_q():
    # one sequence of two steps, two actions, γ = 1, n = 2. The online network picks action 1 at each successor,
    # although the target network values action 0 higher there: double Q takes the target's value of action 1.
    # Target values are h(3) and h(8), so h⁻¹ gives back 3 and 8 exactly.
    q_tm1 = jnp.array([[[0.5, 0.0]], [[0.0, 0.25]]])
    actions = jnp.array([[0], [1]])
    rewards = jnp.array([[1.0], [2.0]])
    discounts = jnp.ones((2, 1))
    last = jnp.zeros((2, 1), bool)
    q_t_value = jnp.array([[[100.0, h(3.0)]], [[100.0, h(8.0)]]], jnp.float32)
    q_t_selector = jnp.array([[[0.0, 1.0]], [[0.0, 1.0]]])
    mask = jnp.ones((2, 1, 2), bool)
    td = losses.rescaled_n_step_double_q_td_errors(q_tm1, actions, rewards, discounts, last, q_t_value, q_t_selector,
                                                   mask, n_step=2, gamma=1.0)
    # step 0: 1 + 2 + h⁻¹(h(8)) = 11 (two rewards, then step 1's successor); step 1: 2 + 8 = 10 (the sequence's end)
    np.testing.assert_allclose(td[:, 0], [h(11.0) - 0.5, h(10.0) - 0.25], rtol=1e-4)
    # nothing flows into the target
    grads = jax.grad(lambda v: losses.rescaled_n_step_double_q_td_errors(
        q_tm1, actions, rewards, discounts, last, v, q_t_selector, mask, 2, 1.0).sum())(q_t_value)
    assert not np.any(grads)


def test_a_replayed_sequence_resets_after_each_episode_end_but_not_at_its_start():
    last = jnp.array([[True, False], [False, False], [True, True], [False, False]])
    np.testing.assert_array_equal(r2d2.sequence_resets(last),
                                  [[False, False], [True, False], [False, False], [True, True]])


def _tiny_network_and_params(steps: int, batch: int):
    network = RecurrentQNetwork(pre_torso=MLPTorso(layer_sizes=[8]), recurrent_core=RecurrentCore("lstm", 8),
                                q_head=q_head(DiscreteActionSpace(num_actions=2)))
    observation = Observation(agent_view=jax.random.normal(jax.random.PRNGKey(1), (steps, batch, 3)),
                              action_mask=jnp.ones((steps, batch, 2), bool),
                              step_count=jnp.zeros((steps, batch), jnp.int32))
    start = network.recurrent_core.initial_hidden(batch)
    params = network.init(jax.random.PRNGKey(0), start, observation, jnp.zeros((steps, batch), bool))
    return network, params, observation, start


def test_burn_in_warms_the_hidden_state_up_without_gradient():
    steps, batch, burn_in = 6, 2, 2
    network, params, observation, start = _tiny_network_and_params(steps, batch)
    apply = r2d2.make_apply(network)
    reset = jnp.zeros((steps, batch), bool)

    def learnt_q(agent_view):
        q_values, _ = r2d2.unroll_after_burn_in(lambda *a, **k: apply(params, *a, **k), start,
                                                observation._replace(agent_view=agent_view), reset, burn_in)
        return q_values

    q_values = learnt_q(observation.agent_view)
    assert q_values.shape == (steps - burn_in, batch, 2)  # the loss sees the steps after the burn-in only
    grads = jax.grad(lambda view: learnt_q(view).sum())(observation.agent_view)
    assert not np.any(grads[:burn_in]) and np.all(np.any(grads[burn_in:] != 0, axis=-1))
    # the burn-in does change the state the learnt steps start from
    _, cold = apply(params, start, jax.tree_util.tree_map(lambda x: x[burn_in:], observation), reset[burn_in:])
    assert not np.allclose(cold, q_values)


def test_evaluation_is_greedy_or_epsilon_greedy_over_legal_actions_at_system_evaluation_epsilon():
    batch = 64
    network, params, _, _ = _tiny_network_and_params(1, batch)
    apply = r2d2.make_apply(network)
    observation = Observation(agent_view=jax.random.normal(jax.random.PRNGKey(2), (batch, 3)),
                              action_mask=jnp.ones((batch, 2), bool), step_count=jnp.zeros(batch, jnp.int32))
    reset, key = jnp.ones(batch, bool), jax.random.PRNGKey(3)

    def evaluated(epsilon, observation):
        policy = r2d2.evaluation_policy(apply, network, epsilon)
        action, _ = policy.act((params, ()), observation, reset, policy.initial_memory(batch), key)
        return np.asarray(action)

    hidden = network.recurrent_core.initial_hidden(batch)
    _, q_values = apply(params, hidden, jax.tree_util.tree_map(lambda x: x[None], observation), reset[None])
    np.testing.assert_array_equal(evaluated(0.0, observation), np.argmax(np.asarray(q_values[0]), axis=-1))
    assert set(evaluated(1.0, observation).tolist()) == {0, 1}  # ε = 1: uniform over the legal actions
    only_second = observation._replace(action_mask=jnp.asarray([[False, True]] * batch))
    np.testing.assert_array_equal(evaluated(1.0, only_second), 1)  # ... and never an illegal one


def test_each_actor_explores_at_its_own_epsilon():
    np.testing.assert_allclose(per_actor_epsilons(jnp.float32(0.5), 3, 2.0), [0.5, 0.25, 0.125], rtol=1e-6)
    np.testing.assert_allclose(per_actor_epsilons(jnp.float32(0.3), 4, 0.0), [0.3] * 4, rtol=1e-6)
    np.testing.assert_allclose(per_actor_epsilons(jnp.float32(1.0), 4, 7.0), [1.0] * 4)  # fully random stays so


# ------------------------------------------------------------------------------------------------ refusals

@pytest.mark.parametrize("algorithm, overrides, refusal", [
    ("r2d2", ["system.burn_in=8"], r"system\.burn_in=8 is not below system\.sequence_length=8"),
    ("r2d2", ["system.sequence_length=12", "system.burn_in=2"],
     r"system\.sequence_length=12 does not divide system\.rollout_length=16: .*e\.g\. system\.sequence_length=8"),
    ("dqn", ["network=lstm_rec_ppo"], r"network\.\w+ is recurrent .* dqn has no hidden state to carry"),
    ("dqn", ["network=lstm_r2d2"], r"network\.q_network is recurrent .* dqn has no hidden state to carry"),
    ("r2d2", ["network=mlp_dqn"], r"r2d2 needs recurrent networks, .* choose network=lstm_r2d2"),
])
def test_bad_sequence_settings_and_unfit_networks_are_refused(algorithm, overrides, refusal):
    config = compose_config(algorithm, overrides)
    with pytest.raises(ConfigError, match=refusal) as error:
        validation.validate(config)
    assert "\n" not in str(error.value)


def test_the_entry_point_refuses_a_recurrent_network_for_dqn_in_one_line(tmp_path):
    completed = run_python(["-m", "experiments.dqn", "network=lstm_rec_ppo"], cwd=tmp_path,
                           env={"JAX_PLATFORMS": "cpu"}, timeout=300)
    assert completed.returncode == 2, completed.stderr[-2000:]
    error_lines = [line for line in completed.stderr.splitlines() if line.strip()]
    assert len(error_lines) == 1 and "has no hidden state to carry" in error_lines[0], completed.stderr


# ------------------------------------------------------------------------------------------------ resume

# 4 evaluations × 1 update × 8 steps × 4 envs + 8 warm-up steps × 4 envs, tiny networks
RESUME_RUN = ["arch.total_num_envs=4", "system.rollout_length=8", "system.sequence_length=8", "system.burn_in=2",
              "system.warmup_rollout_length=8", "system.gradient_steps_per_update=2", "system.total_batch_size=4",
              "system.total_buffer_size=512", "system.target_update_period=2", "arch.num_evaluation=4",
              "arch.num_eval_episodes=2", "arch.total_timesteps=160", "network.q_network.pre_torso.layer_sizes=[8]",
              "network.q_network.recurrent_core.hidden_size=8"]


def _checkpointed_steps(directory: pathlib.Path) -> list:
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())


def _learner_state(step_dir: pathlib.Path):
    return ocp.PyTreeCheckpointer().restore(str(step_dir / "learner_state"))


def test_a_resumed_run_continues_bit_identically_with_its_recurrent_states(tmp_path, compilation_cache_dir):
    def r2d2_run(directory: pathlib.Path, run_dir: str, *more: str):
        result = run_python(["-m", "experiments.r2d2", *RESUME_RUN, "logger.checkpointing.save_model=True",
                             f"logger.checkpointing.directory={directory}", f"hydra.run.dir={tmp_path / run_dir}",
                             *more], cwd=tmp_path, compilation_cache_dir=compilation_cache_dir)
        assert result.returncode == 0, result.stdout + result.stderr
        return result

    uninterrupted = tmp_path / "uninterrupted"
    r2d2_run(uninterrupted, "first")
    steps = _checkpointed_steps(uninterrupted)
    final = _learner_state(uninterrupted / str(steps[-1]))
    # the actors' hidden states travel in the checkpoint: they are what the next rollout continues from
    memory = jax.tree_util.tree_leaves(final["memory"])
    assert memory and all(np.any(np.asarray(leaf) != 0) for leaf in memory)

    interrupted = tmp_path / "interrupted"  # the same run, as if killed after its second evaluation's checkpoint
    shutil.copytree(uninterrupted, interrupted)
    for step in steps[-2:]:
        shutil.rmtree(interrupted / str(step))
    resumed = r2d2_run(interrupted, "second", "logger.checkpointing.resume=True")
    assert f"resumed from {interrupted / str(steps[-3])}" in resumed.stdout
    got = jax.tree_util.tree_leaves(_learner_state(interrupted / str(steps[-1])))
    want = jax.tree_util.tree_leaves(final)
    assert len(got) == len(want)
    for leaf, expected in zip(got, want):
        np.testing.assert_array_equal(leaf, expected)
