"""`arch.pbt`: population-based training of a run's seeds inside its compiled learner (stoix_like/learner/pbt.py).

Checked here: the exploit/explore step's arithmetic; a real PBT run of PPO on CartPole, whose copies take their
source's state but not its key, whose values stay in their ranges and whose lineage is logged; a resumed PBT run
ending bit-identically to an uninterrupted one; the population ranked the same on two devices (replicas equal);
and the bad inputs refused in one line. Whether PBT learns is benchmarks/pbt_learning_check.py's (README).
"""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import compose_config, run_python

from stoix_like.config import validation
from stoix_like.learner import pbt
from stoix_like.run import experiment
from stoix_like.systems.on_policy import ppo

SMALL_NETWORK = ["network.actor_network.pre_torso.layer_sizes=[16]",
                 "network.critic_network.pre_torso.layer_sizes=[16]"]
UPDATES_PER_EVALUATION = 2
STEPS_PER_EVALUATION = UPDATES_PER_EVALUATION * 8 * 4  # updates × rollout × envs
RUN = ["arch.total_num_envs=4", "system.rollout_length=8", "system.num_minibatches=2", "arch.num_evaluation=4",
       "arch.num_eval_episodes=2", f"arch.total_timesteps={4 * STEPS_PER_EVALUATION}"] + SMALL_NETWORK
RANGES = {"actor_lr": (1e-5, 1e-1), "ent_coef": (0.0, 0.05)}
PBT = ["arch.num_seeds=4", f"arch.pbt.interval={UPDATES_PER_EVALUATION}",
       *(f"arch.pbt.ranges.{name}=[{low},{high}]" for name, (low, high) in RANGES.items())]


def test_the_bottom_fraction_copies_the_top_and_perturbs_or_resamples_what_it_copied():
    fitness = jnp.array([5.0, -1.0, 9.0, 3.0, 7.0, 0.0, 8.0, 2.0])  # worst: 1, 5; best: 6, 2
    values = {"actor_lr": jnp.arange(1, 9, dtype=jnp.float32) * 1e-3}
    for key in range(20):
        source, explored = pbt.exploit_and_explore(jax.random.PRNGKey(key), fitness, values, {"actor_lr": (1e-5, 1.0)},
                                                   fraction=0.25, resample_probability=0.0)
        source, new = np.asarray(source), np.asarray(explored["actor_lr"])
        kept = [0, 2, 3, 4, 6, 7]
        assert list(source[kept]) == kept and set(source[[1, 5]]) <= {2, 6}
        np.testing.assert_array_equal(new[kept], np.asarray(values["actor_lr"])[kept])
        for member in (1, 5):
            copied = float(values["actor_lr"][source[member]])
            assert any(np.isclose(new[member], copied * factor) for factor in pbt.PERTURB_FACTORS), (member, new)
    resampled = [float(pbt.exploit_and_explore(jax.random.PRNGKey(key), fitness, values, {"actor_lr": (1e-5, 1e-4)},
                                               0.25, resample_probability=1.0)[1]["actor_lr"][1]) for key in range(20)]
    assert all(1e-5 <= value <= 1e-4 for value in resampled) and len(set(resampled)) == 20


def test_members_start_at_their_own_values_drawn_in_their_ranges_from_their_seeds():
    config = compose_config("ppo", [*RUN, *PBT, "arch.num_seeds=8"])
    starts = pbt.initial_values(config, range(42, 50))
    assert starts[:4] == pbt.initial_values(config, range(42, 46))  # a member's start depends on its seed alone
    for name, (low, high) in RANGES.items():
        drawn = [start[name] for start in starts]
        assert all(low <= value <= high for value in drawn) and len(set(drawn)) == 8
    lrs = np.log10([start["actor_lr"] for start in starts])  # log-uniform over the decades
    assert lrs.max() - lrs.min() > 1.5


@pytest.fixture(scope="module")
def pbt_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("pbt")
    config = compose_config("ppo", [*RUN, *PBT, "logger.checkpointing.save_model=True",
                                    f"logger.checkpointing.directory={root / 'checkpoints'}"], base_exp_path=root)
    return root, experiment.train(config, ppo.learner_setup, "ppo")


def _member(tree, member: int):
    """One member's leaves (devices, members, ...) -> (devices, ...), as numpy."""
    return [np.asarray(leaf)[:, member] for leaf in jax.tree_util.tree_leaves(tree)]


def test_a_member_that_copied_holds_its_sources_state_but_its_own_key(pbt_run):
    root, result = pbt_run
    state = result.learner_state
    assert isinstance(state, pbt.PBTState)
    last = _last_lineage(root)
    copies = {member: source for member, source in enumerate(last) if source != member}
    assert len(copies) == 1  # a quarter of 4 members
    (member, source), = copies.items()
    for leaf, source_leaf in zip(_member(state.learner.params, member), _member(state.learner.params, source)):
        np.testing.assert_array_equal(leaf, source_leaf)
    for leaf, source_leaf in zip(_member(state.learner.opt_states, member), _member(state.learner.opt_states, source)):
        np.testing.assert_array_equal(leaf, source_leaf)
    assert not np.array_equal(np.asarray(state.learner.key)[:, member], np.asarray(state.learner.key)[:, source])
    # the copy's values are its source's, perturbed or drawn again, and stay in range
    for name, (low, high) in RANGES.items():
        values = np.asarray(state.hyperparams[name])[0]
        assert np.all((low <= values) & (values <= high)), (name, values)
    assert int(np.asarray(state.updates_done)[0, 0]) == 4 * UPDATES_PER_EVALUATION


def _last_lineage(root) -> list:
    """Each member's `pbt/copied_from` at the last evaluation, from the run's metrics log."""
    metrics_file, = root.rglob("metrics.json")
    runs = json.loads(metrics_file.read_text())["gymnax"]["CartPole-v1"]["ppo"]
    sources = []
    for seed in range(42, 46):
        last = runs[f"seed_{seed}"]["step_3"]
        sources.append(int(round(float(np.mean(last[pbt.COPIED_FROM])))))
    return sources


def test_each_members_values_and_lineage_are_logged_at_every_evaluation(pbt_run):
    root, _ = pbt_run
    metrics_file, = root.rglob("metrics.json")
    runs = json.loads(metrics_file.read_text())["gymnax"]["CartPole-v1"]["ppo"]
    for seed in range(42, 46):
        for step in range(4):
            entry = runs[f"seed_{seed}"][f"step_{step}"]
            assert {pbt.COPIED_FROM, "pbt/actor_lr", "pbt/ent_coef"} <= set(entry), sorted(entry)
    first_lrs = {float(np.mean(runs[f"seed_{seed}"]["step_0"]["pbt/actor_lr"])) for seed in range(42, 46)}
    assert len(first_lrs) == 4  # each member trained with its own rate


def test_a_resumed_pbt_run_ends_bit_identically(pbt_run, tmp_path):
    root, uninterrupted = pbt_run
    halfway = root / "checkpoints" / str(2 * STEPS_PER_EVALUATION)  # as if killed after its second evaluation
    config = compose_config("ppo", [*RUN, *PBT, f"logger.checkpointing.resume_from={halfway}"], base_exp_path=tmp_path)
    resumed = experiment.train(config, ppo.learner_setup, "ppo")
    # every leaf bit for bit (tree_map also insists the two states have one structure), the members' values among them
    jax.tree_util.tree_map(np.testing.assert_array_equal, resumed.learner_state, uninterrupted.learner_state)
    assert resumed.final_returns == uninterrupted.final_returns


TWO_DEVICES_SCRIPT = """
import json, sys
import jax, numpy as np
from conftest import compose_config
from stoix_like.run import experiment
from stoix_like.systems.on_policy import ppo
assert jax.device_count() == 2
config = compose_config("ppo", json.loads(sys.argv[1]), base_exp_path=sys.argv[2])
state = experiment.train(config, ppo.learner_setup, "ppo").learner_state
same = all(np.array_equal(np.asarray(leaf)[0], np.asarray(leaf)[1]) for leaf in jax.tree_util.tree_leaves(
    (state.learner.params, state.learner.opt_states, state.hyperparams, state.fitness)))
print("RESULT", json.dumps({"replicas_equal": same, "values": np.asarray(state.hyperparams["actor_lr"])[0].tolist()}))
"""


def test_two_devices_rank_the_same_population_and_keep_their_replicas_equal(tmp_path):
    script = tmp_path / "two_devices.py"
    script.write_text(TWO_DEVICES_SCRIPT)
    result = run_python([str(script), json.dumps([*RUN, *PBT]), str(tmp_path)], cwd=tmp_path,
                        env={"XLA_FLAGS": "--xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu",
                             "PYTHONPATH": str(script.parent) + ":" + str(__import__("conftest").REPO_ROOT / "tests")})
    assert result.returncode == 0, result.stdout + result.stderr
    found = json.loads(next(line for line in result.stdout.splitlines() if line.startswith("RESULT"))[len("RESULT"):])
    assert found["replicas_equal"] and len(found["values"]) == 4
    assert "pbt at step" in result.stdout  # each copy announced


@pytest.mark.parametrize("config_name, overrides, expected", [
    ("ppo", [*PBT, "arch.pbt.ranges.rollout_length=[8,16]"], "PBT cannot tune system.rollout_length"),
    ("ppo", [*PBT, "arch.pbt.ranges.clip_eps=[0.3,0.1]"], "must be [low, high] with low < high"),
    ("ppo", [*PBT, "arch.pbt.ranges.clip_eps=[-1.0,0.1]"], "arch.pbt.ranges.clip_eps[0]=-1.0 is out of range"),
    ("ppo", [*PBT, "arch.num_seeds=3"], "a PBT population needs arch.num_seeds >= 4"),
    ("ppo", ["arch.pbt.interval=2", "arch.num_seeds=4"], "has nothing to tune"),
    ("ppo", ["arch.pbt.ranges.actor_lr=[1e-5,1e-1]"], "arch.pbt.interval is null"),
    ("ppo", [*PBT, "sweep.system.gamma=[0.9,0.99]"], "arch.pbt with sweep.*"),
    ("sac", ["arch.num_seeds=4", "arch.pbt.interval=2", "arch.pbt.ranges.q_lr=[1e-4,1e-2]"],
     "sac cannot train a PBT population yet"),
])
def test_what_pbt_cannot_do_is_refused_in_one_line(config_name, overrides, expected):
    found = validation.problems(compose_config(config_name, overrides))
    assert len(found) == 1 and expected in found[0] and "\n" not in found[0], found


def test_an_interval_off_the_learn_calls_is_refused_with_exit_2_before_compiling(tmp_path):
    result = run_python(["-m", "experiments.ppo", *RUN, *PBT, "arch.pbt.interval=3"], cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and "must be a multiple of the 2 updates one learn call runs" in result.stderr
    assert "compiled" not in result.stdout
