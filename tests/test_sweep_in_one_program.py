"""`sweep.system.<key>=[...]`: grid points × seeds as the members of one compiled program (stoix_like/config/sweep.py).

Member k of a grid point is the single run with that point's values and that seed, as seed k of `arch.num_seeds`
is the run `arch.seed + k` (tests/test_seeds.py): compared here through the final learner states, allclose to the
same tolerance (batched members run batched kernels, so the floats may differ in their last bits). Each member is
logged as its own run in a Hydra multirun's layout, which the report groups by grid point with no code of its own.
"""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest
from omegaconf import OmegaConf
from conftest import compose_config, run_python

from stoix_like.config import validation
from stoix_like.learner import hyperparams
from stoix_like.report import runs as report_runs
from stoix_like.run import experiment
from stoix_like.runtime import parallel
from stoix_like.systems.on_policy import ppo, pqn
from stoix_like.systems.q_learning import dqn

SMALL_NETWORK = ["network.actor_network.pre_torso.layer_sizes=[16]",
                 "network.critic_network.pre_torso.layer_sizes=[16]"]
RUN = ["arch.total_num_envs=4", "system.rollout_length=8", "system.num_minibatches=2", "arch.num_evaluation=2",
       "arch.num_eval_episodes=2", "arch.total_timesteps=64"] + SMALL_NETWORK
# every key PPO sweeps, each away from its default so that a value read from the config instead would show
ONE_VALUE_EACH = {"critic_lr": 3e-3, "ent_coef": 0.05, "vf_coef": 0.7, "gamma": 0.9, "gae_lambda": 0.8,
                  "reward_scale": 0.5, "clip_eps": 0.1}
LEARNING_RATES = (1e-4, 1e-2)  # two grid points; seeds 42, 43 each: members 0..3, point-major


@pytest.fixture(scope="module")
def sweep_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("sweep")
    config = compose_config("ppo", [*RUN, "arch.num_seeds=2", f"sweep.system.actor_lr={list(LEARNING_RATES)}",
                                    *(f"sweep.system.{name}=[{value}]" for name, value in ONE_VALUE_EACH.items())],
                            base_exp_path=run_dir)
    assert validation.SWEEPABLE["ppo"] == ("actor_lr", *ONE_VALUE_EACH)  # the test covers every sweepable key
    return run_dir, experiment.train(config, ppo.learner_setup, "ppo")


def test_a_member_is_the_single_run_with_its_grid_points_values_and_its_seed(sweep_run, tmp_path):
    _, swept = sweep_run
    single_config = compose_config("ppo", [*RUN, "arch.seed=43", f"system.actor_lr={LEARNING_RATES[1]}",
                                           *(f"system.{name}={value}" for name, value in ONE_VALUE_EACH.items())],
                                   base_exp_path=tmp_path)
    single = experiment.train(single_config, ppo.learner_setup, "ppo")
    member = 3  # the second grid point's second seed (43)
    member_leaves = jax.tree_util.tree_leaves(swept.learner_state)
    single_leaves = jax.tree_util.tree_leaves(single.learner_state)
    assert len(member_leaves) == len(single_leaves) > 10
    for leaf, single_leaf in zip(member_leaves, single_leaves):
        leaf, single_leaf = np.asarray(leaf), np.asarray(single_leaf)
        assert leaf.shape[1] == 4 and leaf[:, member].shape == single_leaf.shape
        if np.issubdtype(leaf.dtype, np.floating):
            np.testing.assert_allclose(leaf[:, member], single_leaf, rtol=1e-5, atol=1e-6)
        else:  # keys, counters, discrete env state: exactly the same
            np.testing.assert_array_equal(leaf[:, member], single_leaf)
    assert swept.absolute_returns[member] == single.absolute_returns[0]
    assert swept.final_returns[member] == single.final_returns[0]
    # the other grid point, same seed: its own learning rate was read, not the first member's or this one's
    actor_params = jax.tree_util.tree_leaves(swept.learner_state.params.actor)
    assert not all(np.allclose(np.asarray(leaf)[:, 1], np.asarray(leaf)[:, 3]) for leaf in actor_params)


Q_LEARNERS = {
    # PQN reads its learning rate, γ, λ, reward scale and ε's ends per member
    "pqn": (pqn.learner_setup, ["system.rollout_length=8", "system.num_minibatches=2", "arch.total_timesteps=64"],
            {"gamma": 0.9, "q_lambda": 0.5, "reward_scale": 0.5, "epsilon_start": 0.8, "epsilon_end": 0.2}),
    # DQN its learning rate, γ (in its n-step targets), τ and ε's ends
    "dqn": (dqn.learner_setup, ["system.rollout_length=4", "system.warmup_rollout_length=8",
                                "system.total_buffer_size=256", "system.total_batch_size=16",
                                "arch.total_timesteps=96"],
            {"gamma": 0.9, "tau": 0.5, "epsilon_start": 0.8, "epsilon_end": 0.2}),
}


@pytest.mark.parametrize("algorithm", sorted(Q_LEARNERS))
def test_a_q_learning_member_is_the_single_run_with_its_grid_points_values(algorithm, tmp_path):
    """2 grid points of q_lr × 1 seed, every other key the system sweeps at one value away from its default."""
    learner_setup, budget, values = Q_LEARNERS[algorithm]
    run = ["arch.total_num_envs=4", "arch.num_evaluation=2", "arch.num_eval_episodes=2",
           "network.q_network.pre_torso.layer_sizes=[16]", *budget]
    assert validation.SWEEPABLE[algorithm] == ("q_lr", *values)
    swept = experiment.train(compose_config(algorithm, [
        *run, "sweep.system.q_lr=[1e-4,1e-2]", *(f"sweep.system.{name}=[{value}]" for name, value in values.items())
    ], base_exp_path=tmp_path / "sweep"), learner_setup, algorithm)
    single = experiment.train(compose_config(algorithm, [
        *run, "system.q_lr=1e-2", *(f"system.{name}={value}" for name, value in values.items())
    ], base_exp_path=tmp_path / "single"), learner_setup, algorithm)
    for leaf, single_leaf in zip(jax.tree_util.tree_leaves(swept.learner_state.params),
                                 jax.tree_util.tree_leaves(single.learner_state.params), strict=True):
        np.testing.assert_allclose(np.asarray(leaf)[:, 1], np.asarray(single_leaf), rtol=1e-5, atol=1e-6)
    assert swept.absolute_returns[1] == single.absolute_returns[0]


@pytest.mark.parametrize("seed_loop", ["vmap", "map"])
@pytest.mark.parametrize("values", [(0.5,), (0.5, 2.0, 3.0)])
def test_each_member_reads_its_own_values_batched_in_sequence_or_alone(seed_loop, values):
    """The members' axis as `arch.seed_loop` runs it (vmap: by axis_index; map: by the mapped index), and a sweep of
    one member, whose state has no members' axis."""
    system = OmegaConf.create({"actor_lr": 1.0, "gamma": 0.9})

    def learner(state):
        return state * hyperparams.value(system, "actor_lr") + hyperparams.value(system, "gamma"), {}

    learn = parallel.distribute(hyperparams.per_member(learner, {"actor_lr": list(values)}), len(values), seed_loop,
                                member_indexed=True)
    members_axis = (len(values),) if len(values) > 1 else ()
    state = np.ones((1, *members_axis, 1, 3), np.float32)
    learnt, _ = learn(state)
    expected = np.asarray(values, np.float32).reshape((1, *members_axis, 1, 1)) + np.float32(0.9)
    np.testing.assert_array_equal(np.asarray(learnt), np.broadcast_to(expected, state.shape))


def test_a_swept_learning_rate_is_read_when_the_optimiser_updates_and_a_plain_one_stays_a_number():
    """An optimiser is built at setup, from the first member's setup: a swept rate must reach it as a function."""
    system = OmegaConf.create({"actor_lr": 1e-3, "critic_lr": 3e-3})
    with hyperparams.sweeping(frozenset({"actor_lr"})):
        swept_rate = hyperparams.learning_rate(system, "actor_lr")
        assert callable(swept_rate) and hyperparams.learning_rate(system, "critic_lr") == 3e-3
        with hyperparams.member_values({"actor_lr": np.float32(0.5)}):
            assert swept_rate() == np.float32(0.5)
    assert hyperparams.learning_rate(system, "actor_lr") == 1e-3  # no sweep: the number, a constant to XLA


def test_each_member_is_logged_as_its_own_run_and_the_report_groups_them_by_grid_point(sweep_run):
    run_dir, _ = sweep_run
    assert sorted(path.name for path in run_dir.iterdir() if path.is_dir()) == [
        "0_seed42", "1_seed43", "2_seed42", "3_seed43"]
    record = json.loads((run_dir / "3_seed43" / "run.json").read_text())
    assert record["seeds"] == [43] and record["config"]["arch"]["num_seeds"] == 1
    assert record["config"]["system"]["actor_lr"] == LEARNING_RATES[1] and "sweep" not in record["config"]
    groups = report_runs.group_runs(report_runs.load_runs([str(run_dir)]))
    assert [(group.label, group.seed_numbers, len(group.runs)) for group in groups] == [
        ("ppo system.actor_lr=0.0001", [42, 43], 2), ("ppo system.actor_lr=0.01", [42, 43], 2)]


def test_a_key_that_changes_shapes_is_refused_in_one_line_before_any_work(tmp_path):
    result = run_python(["-m", "experiments.ppo", "sweep.system.rollout_length=[8,16]"], cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and "changes array shapes" in result.stderr
    assert "-m system.rollout_length=v1,v2" in result.stderr


@pytest.mark.parametrize("config_name, overrides, expected", [
    ("ppo", ["sweep.arch.total_num_envs=[4,8]"], "changes array shapes"),
    ("ppo", ["sweep.network.actor_network.pre_torso.layer_sizes=[[16],[32]]"], "changes array shapes"),
    ("ppo", ["sweep.system.clip_value_loss=[True,False]"], "is a switch"),
    ("ppo", ["sweep.system.max_grad_norm=[0.5,1.0]"], "reads it as a constant"),
    ("ppo", ["sweep.system.actor_lr=[3e-4,-1.0]"], "sweep.system.actor_lr[1]=-1.0 is out of range"),
    ("ppo", ["sweep.system.actor_lr=3e-4"], "must be a non-empty list"),
    ("ppo", ["sweep.system.actor_lr=[3e-4]", "logger.checkpointing.save_model=True"], "does not save or load"),
    ("sac", ["sweep.system.q_lr=[1e-3,3e-4]"], "systems that can: ppo, ppo_penalty, dpo, reinforce, pqn, dqn, ddqn"),
    ("pqn", ["sweep.system.epsilon_end=[0.05,0.5]", "sweep.system.epsilon_start=[0.2]"],
     "sweep grid point epsilon_end=0.5 epsilon_start=0.2: system.epsilon_end=0.5 is above"),
])
def test_what_cannot_be_swept_in_one_program_is_refused_in_one_line(config_name, overrides, expected):
    found = validation.problems(compose_config(config_name, overrides))
    assert len(found) == 1 and expected in found[0] and "\n" not in found[0], found
