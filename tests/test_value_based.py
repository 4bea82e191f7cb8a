"""The value-based family: DQN, Double DQN, M-DQN, DQN-Reg (systems/q_learning/dqn.py), C51, QR-DQN and Rainbow
(systems/q_learning/distributional_dqn.py), all on q_learning/value_based.py and the off-policy skeleton.

Heads and noisy layers, how the variants compose, action masks, configurations refused before anything
compiles, gradients averaged over two devices, and (`pytest -m learning`) every algorithm learning CartPole.
"""

from __future__ import annotations

import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import assert_population_learns, run_python
from stoix_like import envs as envs_lib
from stoix_like.learner import budget as budget_lib
from stoix_like.errors import ConfigError
from stoix_like.networks import heads
from stoix_like.networks.noisy import NoisyDense
from stoix_like.ops import losses
from stoix_like.learner.replay import Transition
from stoix_like.systems.q_learning import distributional_dqn
from stoix_like.systems.q_learning import dqn
from stoix_like.systems.q_learning import value_based
from stoix_like.types import Observation, OnlineAndTarget

# ------------------------------------------------------------------------------------------ heads, noisy layers


def test_dueling_head_centres_advantages_on_the_state_value():
    head = heads.DiscreteQHead(num_actions=3, dueling=True)
    features = jax.random.normal(jax.random.PRNGKey(0), (5, 8))
    params = head.init(jax.random.PRNGKey(1), features)
    q_values = head.apply(params, features)
    value = features @ params["params"]["Dense_0"]["kernel"] + params["params"]["Dense_0"]["bias"]  # [5, 1]
    assert q_values.shape == (5, 3)
    # with advantages centred over actions, the mean Q-value of a state is its value
    np.testing.assert_allclose(q_values.mean(axis=-1), value[:, 0], atol=1e-5)


@pytest.mark.parametrize("dueling", [False, True])
def test_distributional_heads_expect_their_distribution(dueling):
    features = jax.random.normal(jax.random.PRNGKey(0), (4, 8))
    categorical = heads.CategoricalQHead(num_actions=2, num_atoms=5, v_min=-2.0, v_max=2.0, dueling=dueling)
    output = categorical.apply(categorical.init(jax.random.PRNGKey(1), features), features)
    assert output.logits.shape == (4, 2, 5)
    np.testing.assert_allclose(output.atoms, [-2.0, -1.0, 0.0, 1.0, 2.0])
    expected = (jax.nn.softmax(output.logits, axis=-1) * output.atoms).sum(-1)
    np.testing.assert_allclose(output.q_values, expected, atol=1e-6)

    quantile = heads.QuantileQHead(num_actions=2, num_quantiles=7, dueling=dueling)
    output = quantile.apply(quantile.init(jax.random.PRNGKey(1), features), features)
    assert output.quantiles.shape == (4, 2, 7)
    np.testing.assert_allclose(output.q_values, output.quantiles.mean(-1), atol=1e-6)


def test_noisy_dense_uses_mean_weights_without_a_noise_stream_and_fresh_noise_with_one():
    layer = NoisyDense(features=3)
    x = jax.random.normal(jax.random.PRNGKey(0), (4, 5))
    params = layer.init(jax.random.PRNGKey(1), x)
    p = params["params"]
    # paper initialisation: σ = 0.5 / √inputs everywhere
    np.testing.assert_allclose(p["kernel_sigma"], 0.5 / np.sqrt(5.0), rtol=1e-6)

    mean_output = layer.apply(params, x)
    np.testing.assert_allclose(mean_output, x @ p["kernel_mean"] + p["bias_mean"], atol=1e-5)

    noisy = lambda key: layer.apply(params, x, rngs={"noise": key})
    np.testing.assert_array_equal(noisy(jax.random.PRNGKey(2)), noisy(jax.random.PRNGKey(2)))
    assert not np.allclose(noisy(jax.random.PRNGKey(2)), noisy(jax.random.PRNGKey(3)))
    assert not np.allclose(noisy(jax.random.PRNGKey(2)), mean_output)

    # the noise is σ-scaled: with σ = 0 a noisy pass is the mean pass
    silent = {"params": {**p, "kernel_sigma": jnp.zeros_like(p["kernel_sigma"]),
                         "bias_sigma": jnp.zeros_like(p["bias_sigma"])}}
    np.testing.assert_allclose(layer.apply(silent, x, rngs={"noise": jax.random.PRNGKey(2)}), mean_output, atol=1e-5)

    # σ is learnt: the loss of a noisy pass has a gradient with respect to it
    grads = jax.grad(lambda q: jnp.sum(layer.apply(q, x, rngs={"noise": jax.random.PRNGKey(2)}) ** 2))(params)
    assert np.abs(grads["params"]["kernel_sigma"]).sum() > 0


def test_noisy_factorised_noise_is_an_outer_product_of_input_and_output_noise():
    # one input: the weight noise ε_in·ε_out[j] and the bias noise ε_out[j] share the output factor, so the
    # kernel's perturbation divided by the bias's is the same number (ε_in) for every output unit j
    layer = NoisyDense(features=4)
    params = layer.init(jax.random.PRNGKey(0), jnp.ones((1, 1)))
    ones = {"params": {**params["params"], "kernel_mean": jnp.zeros((1, 4)), "bias_mean": jnp.zeros(4),
                       "kernel_sigma": jnp.ones((1, 4)), "bias_sigma": jnp.ones(4)}}
    key = jax.random.PRNGKey(5)
    weight_and_bias = layer.apply(ones, jnp.ones((1, 1)), rngs={"noise": key})[0]
    bias_only = layer.apply(ones, jnp.zeros((1, 1)), rngs={"noise": key})[0]
    ratio = (weight_and_bias - bias_only) / bias_only
    np.testing.assert_allclose(ratio, ratio[0], rtol=1e-4)


# ------------------------------------------------------------------------------------------ how variants compose


def fixed_network(values_by_view):
    """A stand-in network: observation.agent_view[:, 0] indexes a table of outputs."""

    def network(observation):
        return jax.tree_util.tree_map(lambda table: table[observation.agent_view[:, 0].astype(jnp.int32)],
                                      values_by_view)

    return network


def two_state_batch(action_mask_t=((True, True), (True, False))):
    """Two transitions, s_tm1 = view 0 → s_t = view 1; the second has action 1 illegal at s_t."""

    def observation(view, mask):
        return Observation(agent_view=jnp.full((2, 1), view, jnp.float32), action_mask=jnp.asarray(mask),
                           step_count=jnp.zeros(2, jnp.int32))

    return Transition(observation=observation(0, [[True, True]] * 2), action=jnp.asarray([0, 1], jnp.int32),
                      reward=jnp.asarray([1.0, 0.5]), discount=jnp.asarray([0.9, 0.9]), last=jnp.zeros(2, bool),
                      next_observation=observation(1, action_mask_t))


def compose_system(compose, name, overrides=()):
    return compose(name, list(overrides)).system


def test_dqn_reg_is_the_dqn_loss_plus_the_weighted_q_value(compose):
    system = compose_system(compose, "dqn_reg")
    assert float(system.regularization_weight) == 0.1 and float(system.huber_delta) == 0.0
    batch = two_state_batch()
    online = fixed_network(jnp.asarray([[1.0, 2.0], [3.0, 4.0]]))
    target = fixed_network(jnp.asarray([[0.5, 0.0], [2.0, 5.0]]))
    per_example, priorities, _ = dqn.scalar_q_loss(system)(online, target, batch)
    # TD: 1 + 0.9·5 - Q(s, 0)=1 = 4.5; with action 1 illegal at s_t: 0.5 + 0.9·2 - Q(s, 1)=2 = 0.3.
    # loss: ½TD² + 0.1·Q(s, a) = 10.125 + 0.1 and 0.045 + 0.2
    np.testing.assert_allclose(per_example, [10.225, 0.245], atol=1e-5)
    np.testing.assert_allclose(priorities, [4.5, 0.3], atol=1e-6)  # |TD|


def test_munchausen_regresses_on_the_target_networks_policy_at_both_states(compose):
    system = compose_system(compose, "mdqn")
    batch = two_state_batch()
    online = fixed_network(jnp.asarray([[1.0, 2.0], [3.0, 4.0]]))
    target = fixed_network(jnp.asarray([[0.5, 0.0], [2.0, 5.0]]))
    per_example, _, _ = dqn.scalar_q_loss(system)(online, target, batch)
    munchausen = losses.munchausen_q_target(
        target(batch.next_observation), target(batch.observation), batch.action, batch.reward, batch.discount,
        float(system.entropy_temperature), float(system.munchausen_coefficient),
        float(system.munchausen_clip_value_min), batch.next_observation.action_mask, batch.observation.action_mask)
    np.testing.assert_allclose(per_example, 0.5 * (munchausen - jnp.asarray([1.0, 2.0])) ** 2, atol=1e-5)


def categorical_network(logits_by_view, atoms):
    """A stand-in C51 network: observation.agent_view[:, 0] indexes a table of logits [views, A, N]."""

    def network(observation):
        logits = logits_by_view[observation.agent_view[:, 0].astype(jnp.int32)]
        return heads.CategoricalQOutput((jax.nn.softmax(logits, -1) * atoms).sum(-1), logits, atoms)

    return network


@pytest.mark.parametrize("td_target, chooser", [("q_learning", "target"), ("double_q_learning", "online")])
def test_distributional_next_action_is_legal_and_greedy_for_the_configured_network(compose, td_target, chooser):
    system = compose_system(compose, "c51", [f"system.td_target={td_target}"])
    atoms = jnp.asarray([0.0, 1.0, 2.0])
    at_atom = lambda i: jnp.where(jnp.arange(3) == i, 9.0, 0.0)  # nearly all mass on atom i
    # at s_t (view 1) the target network prefers action 1 (return 2 vs 0), the online network action 0
    online = categorical_network(jnp.stack([jnp.zeros((2, 3)), jnp.stack([at_atom(2), at_atom(0)])]), atoms)
    target = categorical_network(jnp.stack([jnp.zeros((2, 3)), jnp.stack([at_atom(0), at_atom(2)])]), atoms)
    q_loss = distributional_dqn.DISTRIBUTIONS["categorical"].make_loss(
        system, distributional_dqn.NEXT_ACTION_SELECTORS[td_target])
    batch = two_state_batch()
    per_example, priorities, _ = q_loss(online, target, batch)
    np.testing.assert_allclose(priorities, per_example)

    preferred = {"target": 1, "online": 0}[chooser]
    # row 1 has action 1 illegal at s_t, so whatever the preference its next action is 0
    for row, next_action in enumerate([preferred, 0]):
        only_next_action = jnp.zeros((2, 2), bool).at[:, next_action].set(True)
        expected = losses.categorical_q_learning_loss(
            online(batch.observation).logits, atoms, batch.action, batch.reward, batch.discount,
            target(batch.next_observation).logits, jnp.zeros((2, 2)), only_next_action)
        np.testing.assert_allclose(per_example[row], expected[row], atol=1e-5)


# ------------------------------------------------------------------------------------------ action masks in acting


def test_acting_and_greedy_evaluation_never_pick_an_illegal_action(compose):
    system = compose_system(compose, "dqn")
    q_values = jnp.asarray([[9.0, 1.0, 0.0]] * 64)  # the illegal action 0 looks best
    apply = lambda params, observation, noise_key=None: q_values
    observation = Observation(agent_view=jnp.zeros((64, 1)), action_mask=jnp.asarray([[False, True, True]] * 64),
                              step_count=jnp.zeros(64, jnp.int32))
    act = value_based.make_act(apply, system, total_timesteps=1_000)
    params = OnlineAndTarget(None, None)
    exploring, _ = act(params, observation, jax.random.PRNGKey(0), jnp.asarray(0))  # ε = 1: uniform over legal
    greedy, _ = act(params, observation, jax.random.PRNGKey(0), jnp.asarray(10_000))  # ε = 0.05
    assert not (exploring == 0).any() and {1, 2} <= set(np.asarray(exploring).tolist())
    assert not (greedy == 0).any()
    evaluated = value_based.evaluation_policy(apply)((None, ()), observation, jax.random.PRNGKey(0))
    np.testing.assert_array_equal(evaluated, 1)
    # system.evaluation_epsilon: at ε = 1 every evaluated action is a uniform legal one (both legal actions appear,
    # the illegal best never); at ε = 0.005 nearly every one is the greedy action
    uniform = value_based.evaluation_policy(apply, 1.0)((None, ()), observation, jax.random.PRNGKey(1))
    assert not (uniform == 0).any() and {1, 2} <= set(np.asarray(uniform).tolist())
    slightly_off = value_based.evaluation_policy(apply, 0.005)((None, ()), observation, jax.random.PRNGKey(1))
    assert not (slightly_off == 0).any() and int((slightly_off == 1).sum()) >= 60


# ------------------------------------------------------------------------------------------ refused before compiling


def setup_error(compose, name, overrides) -> str:
    config = compose(name, overrides)
    setup = distributional_dqn.learner_setup if name in ("c51", "qr_dqn", "rainbow") else dqn.learner_setup
    train_env, _ = envs_lib.make(config.env)
    with pytest.raises(ConfigError) as error:
        setup(train_env, jax.random.PRNGKey(0), config, budget_lib.make_budget(config))
    message = str(error.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("name, network, wanted", [
    ("c51", "mlp_dqn", "mlp_c51"), ("qr_dqn", "mlp_c51", "mlp_qr_dqn"), ("dqn", "mlp_qr_dqn", "mlp_dqn"),
    ("rainbow", "mlp_dqn_dueling", "mlp_rainbow"),
])
def test_a_head_that_does_not_fit_the_system_is_refused(compose, name, network, wanted):
    message = setup_error(compose, name, [f"network={network}"])
    assert "head" in message and wanted in message


@pytest.mark.parametrize("network", ["mlp_ppo", "mlp_sac", "mlp_td3"])
def test_an_actor_critic_network_is_refused_by_a_q_learning_system(compose, network):
    # mlp_sac and mlp_td3 have a q_network too, of Q(s, a): not one value per action
    message = setup_error(compose, "dqn", [f"network={network}"])
    assert "no q_network of one value per action" in message and "mlp_dqn" in message


def test_a_continuous_action_env_is_refused_by_a_discrete_system(compose):
    assert "continuous actions" in setup_error(compose, "dqn", ["env=gymnax/pendulum"])


def test_munchausen_without_its_hyperparameters_points_to_its_config(compose):
    assert "system=mdqn" in setup_error(compose, "dqn", ["system.td_target=munchausen"])


def test_distributional_systems_refuse_a_scalar_only_target(compose):
    assert "q_learning" in setup_error(compose, "c51", ["system.td_target=munchausen"])


def test_entry_point_reports_an_unfit_network_in_one_line(tmp_path):
    completed = run_python(["-m", "experiments.c51", "network=mlp_dqn"], cwd=tmp_path,
                           env={"JAX_PLATFORMS": "cpu"}, timeout=300)
    assert completed.returncode == 2, completed.stderr[-2000:]
    error_lines = [line for line in completed.stderr.splitlines() if line.strip()]
    assert len(error_lines) == 1 and error_lines[0].startswith("error: ") and "mlp_c51" in error_lines[0]
    assert "compiled" not in completed.stdout


# ------------------------------------------------------------------------------------------ two devices

# Runs in a fresh interpreter with 2 forced host devices: argv = [output npz, tests dir, json {name: overrides}].
TWO_DEVICE_SCRIPT = r'''
import json
import sys

import jax
import numpy as np

sys.path.insert(0, sys.argv[2])
from conftest import compose_config
from stoix_like import envs as envs_lib
from stoix_like.learner import budget as budget_lib
from stoix_like.runtime import parallel
from stoix_like.systems.q_learning import distributional_dqn
from stoix_like.systems.q_learning import dqn

assert jax.device_count() == 2, jax.devices()
results = {}
for name, overrides in json.loads(sys.argv[3]).items():
    config = compose_config(name, overrides)
    budget = budget_lib.make_budget(config)
    train_env, _ = envs_lib.make(config.env)
    system = dqn if name == "dqn" else distributional_dqn
    setup = system.learner_setup(train_env, jax.random.PRNGKey(0), config, budget)
    learn = parallel.distribute(setup.learner_fn)
    initial = jax.device_get(setup.learner_state.params.online)
    state = setup.learner_state
    for _ in range(budget.num_evaluation):
        state, _ = learn(state)
    final = jax.device_get(state)
    for prefix, params in (("initial", initial), ("final", final.params.online)):
        for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
            results[f"{name}/{prefix}/{jax.tree_util.keystr(path)}"] = np.asarray(leaf)
    results[f"{name}/buffer"] = np.asarray(final.buffer_state.experience.observation.agent_view)
    results[f"{name}/updates"] = np.asarray(final.update_count)
np.savez(sys.argv[1], **results)
'''

# 2 devices × 2 batch slots × 1 env; 16 warm-up steps per env, then 2 evaluations × 3 updates × 4 steps × 4 envs
TWO_DEVICE_OVERRIDES = ["arch.total_num_envs=4", "arch.update_batch_size=2", "arch.num_evaluation=2",
                        "arch.total_timesteps=160", "system.rollout_length=4", "system.warmup_rollout_length=16",
                        "system.gradient_steps_per_update=2", "system.total_buffer_size=400",
                        "system.total_batch_size=32",  # 8 per (device, batch) slot
                        "network.q_network.pre_torso.layer_sizes=[16]"]
TWO_DEVICE_RUNS = {"dqn": TWO_DEVICE_OVERRIDES}


@pytest.fixture(scope="module")
def two_device_results(tmp_path_factory):
    directory = tmp_path_factory.mktemp("value_based_two_devices")
    script, output = directory / "learn.py", directory / "results.npz"
    script.write_text(TWO_DEVICE_SCRIPT)
    completed = run_python([str(script), str(output), str(pathlib.Path(__file__).parent), json.dumps(TWO_DEVICE_RUNS)],
                           cwd=directory,
                           env={"XLA_FLAGS": "--xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu"})
    assert completed.returncode == 0, completed.stderr[-3000:]
    with np.load(output) as data:
        return {key: data[key] for key in data.files}


@pytest.mark.parametrize("name", sorted(TWO_DEVICE_RUNS))
def test_two_devices_keep_identical_params_while_their_replay_buffers_differ(two_device_results, name):
    slots = 4  # 2 devices × 2 batch slots
    # evaluations × updates × gradient steps per update
    np.testing.assert_array_equal(two_device_results[f"{name}/updates"], 2 * 3 * 2)
    initial = {k.split("/", 2)[2]: v for k, v in two_device_results.items() if k.startswith(f"{name}/initial/")}
    final = {k.split("/", 2)[2]: v for k, v in two_device_results.items() if k.startswith(f"{name}/final/")}
    assert final and final.keys() == initial.keys()
    for leaf_name, leaf in final.items():
        flat = leaf.reshape((slots,) + leaf.shape[2:])
        for slot in range(1, slots):
            np.testing.assert_array_equal(flat[slot], flat[0], err_msg=f"{leaf_name}: slot {slot} differs")
    assert any(not np.allclose(final[k], initial[k]) for k in final), "the params never moved"
    buffers = two_device_results[f"{name}/buffer"].reshape((slots, -1))
    assert len({row.tobytes() for row in buffers}) == slots, "two slots filled the same replay buffer"


# ------------------------------------------------------------------------------------------ learning CartPole
# Each algorithm's shipped config (budget included: config/<name>.yaml sets it, with its measured results), seeds
# 0..3 in one program (learning_targets.COVERAGE; README's rows are 8-seed populations), must meet CARTPOLE_VALUE_BASED in
# stoix_like/claims/learning_targets.py: an IQM of absolute returns ≥ 475 with at most 1 seed below 400. Never a bar on
# one seed: another CPU makes it another seed. (ddqn has no CI check: both its logged populations miss the target,
# learning_targets.COVERAGE says why.)


@pytest.mark.learning
def test_mdqn_learns_cartpole(compose):
    assert_population_learns(compose, "mdqn")


@pytest.mark.learning
def test_dqn_reg_learns_cartpole(compose):
    assert_population_learns(compose, "dqn_reg")


@pytest.mark.learning
def test_c51_learns_cartpole(compose):
    assert_population_learns(compose, "c51")


@pytest.mark.learning
def test_qr_dqn_learns_cartpole(compose):
    assert_population_learns(compose, "qr_dqn")


@pytest.mark.learning
def test_dqn_learns_cartpole_on_seeds_nobody_tuned_on(compose):
    # seeds 1000..1003, the family's shifted check, on DQN (in place of DQN's tuned seeds 0..7, README's row): the
    # scalar members share its settings and cost, the distributional ones cost 2-4x more. Every member was measured
    # on these seeds too (config/<name>.yaml).
    assert_population_learns(compose, "dqn")  # seeds: learning_targets.COVERAGE
