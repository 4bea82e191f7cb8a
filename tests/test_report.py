"""`python -m experiments.report`: a report built from two small real runs (PPO and DQN, 2 seeds each), read back.

The runs are tiny (a few updates on CartPole): what is checked is that the figures exist with their sizes, that
every number of the tables is the JSON logs' own, that a sweep's jobs group by the keys that differ, and that
the report's statistics agree with the core's (stoix_like/claims/population.py). No learning is claimed here.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import sys

import numpy as np
import pytest
from conftest import compose_config
from scipy import stats

from stoix_like.run import experiment
from stoix_like.claims import population
from stoix_like.report import runs as report_runs
from stoix_like.systems import system_module

pytest.importorskip("rliable", reason="the report extra: pip install -e '.[report]'")

from stoix_like.report import build, command, statistics  # noqa: E402

TINY = {
    # 4 evaluations × 1 update × 8 steps × 4 envs
    "ppo": ["arch.total_num_envs=4", "system.rollout_length=8", "system.num_minibatches=2", "arch.num_evaluation=4",
            "arch.num_eval_episodes=2", "arch.total_timesteps=128", "network.actor_network.pre_torso.layer_sizes=[16]",
            "network.critic_network.pre_torso.layer_sizes=[16]"],
    # 32 warm-up steps, then 4 evaluations × 2 updates × 4 steps × 4 envs
    "dqn": ["arch.total_num_envs=4", "arch.num_evaluation=4", "arch.num_eval_episodes=2", "arch.total_timesteps=160",
            "system.rollout_length=4", "system.warmup_rollout_length=8", "system.gradient_steps_per_update=2",
            "system.total_buffer_size=400", "system.total_batch_size=16",
            "network.q_network.pre_torso.layer_sizes=[16]"],
}
REPS = 200  # enough to exercise the bootstrap; the default is statistics.DEFAULT_REPS


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory) -> pathlib.Path:
    """<dir>/ppo and <dir>/dqn: seeds 0 and 1 of each, trained in one program per algorithm."""
    root = tmp_path_factory.mktemp("report_runs")
    for algorithm, overrides in TINY.items():
        config = compose_config(algorithm, [*overrides, "arch.num_seeds=2", "arch.seed=0"],
                                base_exp_path=root / algorithm)
        experiment.train(config, system_module(algorithm).learner_setup, algorithm)
    return root


@pytest.fixture(scope="module")
def report(results_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    return build.build_report([str(results_dir)], str(out), reps=REPS, say=lambda line: None), out


def logged(run_dir: pathlib.Path, algorithm: str) -> dict:
    """seed -> (steps, mean return per evaluation, absolute return, final params' return), straight from
    metrics.json."""
    seeds = json.loads((run_dir / "metrics.json").read_text())["gymnax"]["CartPole-v1"][algorithm]
    out = {}
    for key, entries in seeds.items():
        evaluations = [entries[f"step_{i}"] for i in range(sum(name.startswith("step_") for name in entries))]
        out[int(key.split("_")[1])] = ([entry["step_count"] for entry in evaluations],
                                       [float(np.mean(entry["episode_return"])) for entry in evaluations],
                                       float(np.mean(entries["absolute_metrics"]["episode_return"])),
                                       float(np.mean(entries["absolute_metrics"]["final_episode_return"])))
    return out


def png_size(path: pathlib.Path) -> tuple:
    """(width, height) of a PNG, decoded in full (a truncated file fails here)."""
    import matplotlib.image

    height, width, _ = matplotlib.image.imread(path).shape
    return width, height


def table_rows(markdown: str, first_cell: str) -> dict:
    rows = {}
    for line in markdown.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] in TINY and len(cells) == 8 and cells[1] != first_cell:
            rows[cells[0]] = cells
    return rows


def test_a_run_saves_its_record_and_its_console_lines(results_dir):
    record = json.loads((results_dir / "ppo" / "run.json").read_text())
    assert (record["algorithm"], record["suite"], record["task"], record["seeds"]) == ("ppo", "gymnax", "CartPole-v1",
                                                                                      [0, 1])
    assert record["status"] == "done" and record["config"]["system"]["rollout_length"] == 8
    assert record["learned_steps"] == 2 * 128 and 0 < record["learn_seconds"] < record["wall_seconds"]
    console = (results_dir / "ppo" / "ppo.log").read_text()
    assert console.startswith("ppo on gymnax/CartPole-v1: 128 steps")
    assert "[eval seed 1] step 128 |" in console and "\ndone: 128 steps per seed" in console
    assert "population: absolute return IQM" in console


def test_report_figures_exist_and_decode_at_their_size(report):
    built, out = report
    assert {pathlib.Path(path).name for path in built.files} == {
        "curves_gymnax_CartPole-v1.png", "aggregates.png", "sample_efficiency.png", "report.md", "report.json"}
    assert png_size(out / "curves_gymnax_CartPole-v1.png") == (880, 550)  # 8 × 5 inches at 110 dpi
    assert png_size(out / "sample_efficiency.png") == (770, 495)  # one env: one 7 × 4.5 panel
    assert png_size(out / "aggregates.png") == (1848, 231)  # IQM, median, mean, P(X > Y): 4 × 4.2 inches wide


def test_report_tables_hold_the_json_logs_numbers(report, results_dir):
    built, out = report
    markdown = (out / "report.md").read_text()
    rows = table_rows(markdown, first_cell="seeds")
    assert sorted(rows) == ["dqn", "ppo"]
    numbers = json.loads((out / "report.json").read_text())["envs"]["gymnax/CartPole-v1"]
    for algorithm, cells in rows.items():
        seeds = logged(results_dir / algorithm, algorithm)
        record = json.loads((results_dir / algorithm / "run.json").read_text())
        absolute = [seeds[seed][2] for seed in (0, 1)]
        best = [max(seeds[seed][1]) for seed in (0, 1)]
        iqm = stats.trim_mean(absolute, 0.25)
        exact = numbers["groups"][algorithm]
        final = [seeds[seed][3] for seed in (0, 1)]
        assert exact["absolute_returns"] == absolute and exact["absolute"]["IQM"]["point"] == iqm
        assert exact["final_params_returns"] == final
        low, high = exact["absolute"]["IQM"]["low"], exact["absolute"]["IQM"]["high"]
        assert min(absolute) <= low <= iqm <= high <= max(absolute)
        assert exact["best_eval_iqm"] == stats.trim_mean(best, 0.25)
        assert cells[1] == "2 (0..1)"
        assert cells[2] == f"{seeds[0][0][-1]:,}" == f"{record['total_timesteps']:,}"
        assert cells[3] == f"{iqm:.1f} [{low:.1f}, {high:.1f}]"
        assert cells[4] == f"{stats.trim_mean(final, 0.25):.1f}"
        assert cells[5] == f"{stats.trim_mean(best, 0.25):.1f}"
        assert cells[6] == f"{record['wall_seconds']:.0f} s"
        assert cells[7] == f"{record['learned_steps'] / record['learn_seconds']:,.0f}"
    # the curves are the logged evaluations: the mean over seeds at each logged step
    results = built.envs[0]
    for algorithm in TINY:
        seeds = logged(results_dir / algorithm, algorithm)
        assert results.mean_curves[algorithm].steps.tolist() == seeds[0][0]
        np.testing.assert_allclose(results.mean_curves[algorithm].point, np.mean([seeds[0][1], seeds[1][1]], axis=0))
    (pair,) = results.improvements
    assert set(pair) == {"ppo", "dqn"} and "| X | Y | P(X > Y) [95% CI] |" in markdown


def test_learning_table_cells_are_the_logs_final_and_absolute_returns_with_the_targets_verdict(report, results_dir):
    """README's learning-table cells for one population: the IQM [CI] of the final params' and of the best params'
    returns as logged, the seeds solved on each, and the target judged on both (a few updates solve nothing)."""
    from stoix_like.claims.learning_targets import target_of
    from stoix_like.report import learning_table

    built, _ = report
    (group,) = [group for group in built.envs[0].groups if group.label == "ppo"]
    target = target_of("ppo")
    logged_population = learning_table.summarized(group, target)
    seeds = logged(results_dir / "ppo", "ppo")
    assert list(logged_population.final.returns) == [seeds[seed][3] for seed in (0, 1)]
    assert list(logged_population.absolute.returns) == [seeds[seed][2] for seed in (0, 1)]
    final_cell, absolute_cell, solved = learning_table._population_cells(logged_population, REPS)
    final_iqm = stats.trim_mean([seeds[seed][3] for seed in (0, 1)], 0.25)
    assert final_cell.startswith(f"{final_iqm:.1f} [") and absolute_cell.startswith(
        f"{built.envs[0].aggregates['ppo']['IQM'].point:.1f} [")
    assert solved == "0/2, 0/2"
    verdict = learning_table.verdict(target, logged_population, None)
    assert verdict.startswith("**MISSED** (0..7 absolute: IQM") and "0..7 final: IQM" in verdict


def test_a_sweeps_jobs_group_by_the_keys_that_differ(results_dir, tmp_path):
    """A multirun's jobs (one seed each) pool their seeds per swept value; seeds never split a group."""
    source = results_dir / "ppo"
    metrics, record = json.loads((source / "metrics.json").read_text()), json.loads((source / "run.json").read_text())
    for job, (learning_rate, seed) in enumerate([(a, s) for a in (1e-3, 3e-4) for s in (0, 1)]):
        job_dir = tmp_path / "sweep" / f"{job}_seed{seed}"
        job_dir.mkdir(parents=True)
        runs = metrics["gymnax"]["CartPole-v1"]["ppo"]
        (job_dir / "metrics.json").write_text(json.dumps(
            {"gymnax": {"CartPole-v1": {"ppo": {f"seed_{seed}": runs[f"seed_{seed}"]}}}}))
        config = json.loads(json.dumps(record["config"]))
        config["system"]["actor_lr"], config["arch"]["seed"], config["arch"]["num_seeds"] = learning_rate, seed, 1
        config["logger"]["base_exp_path"] = str(job_dir)
        (job_dir / "run.json").write_text(json.dumps({**record, "seeds": [seed], "config": config}))
    groups = report_runs.group_runs(report_runs.load_runs([str(tmp_path / "sweep")]))
    assert [(group.label, group.seed_numbers, len(group.runs)) for group in groups] == [
        ("ppo system.actor_lr=0.0003", [0, 1], 2), ("ppo system.actor_lr=0.001", [0, 1], 2)]
    # a glob of job directories reads the same runs
    assert len(report_runs.load_runs([str(tmp_path / "sweep" / "*_seed*")])) == 4


def test_the_command_line_names_a_missing_extra_or_a_bad_path_in_one_line(tmp_path, monkeypatch, capsys):
    assert command.main([str(tmp_path / "nowhere")]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and "no such run directory" in error and error.count("\n") == 1
    monkeypatch.setitem(sys.modules, "rliable.library", None)  # as if the extra were not installed
    assert command.main([str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert 'pip install -e ".[report]"' in error and error.count("\n") == 1


def test_report_and_core_iqm_agree_exactly(results_dir):
    """population.py (core: run lines, learning tests) and rliable (reports) give the same IQM, and intervals
    from their two bootstraps within a small fraction of the spread."""
    from rliable import metrics

    rng = np.random.default_rng(0)
    for size in range(1, 10):
        values = rng.normal(100, 30, size)
        assert population.interquartile_mean(values) == metrics.aggregate_iqm(values[:, None])
        assert population.interquartile_mean(values) == statistics.aggregate_estimates(
            {"x": values}, reps=REPS)["x"]["IQM"].point
    values = rng.normal(100, 30, 8)
    core = population.bootstrap_interval(values)
    rliable = statistics.aggregate_estimates({"x": values}, reps=statistics.DEFAULT_REPS)["x"]["IQM"]
    spread = values.max() - values.min()
    assert abs(core[0] - rliable.low) < 0.05 * spread and abs(core[1] - rliable.high) < 0.05 * spread


def test_a_groups_interval_does_not_depend_on_the_other_groups():
    """Adding a group to a report leaves every other group's bootstrap interval, curve band and pairwise estimate
    as it was: each is drawn from a stream of its own."""
    rng = np.random.default_rng(1)
    finals = {label: rng.normal(100, 30, 8) for label in ("a", "b", "c")}
    curves = {label: (np.arange(4), rng.normal(100, 30, (8, 4))) for label in finals}
    fewer = {label: finals[label] for label in ("b", "c")}
    assert statistics.aggregate_estimates(finals, reps=REPS)["c"] == statistics.aggregate_estimates(
        fewer, reps=REPS)["c"]
    with_a = statistics.curve_estimates(curves, "IQM", reps=REPS)["c"]
    without_a = statistics.curve_estimates({label: curves[label] for label in ("b", "c")}, "IQM", reps=REPS)["c"]
    assert np.array_equal(with_a.low, without_a.low) and np.array_equal(with_a.high, without_a.high)
    assert statistics.improvement_estimates(finals, [("a", "b"), ("b", "c")], reps=REPS)[("b", "c")] == \
        statistics.improvement_estimates(finals, [("b", "c")], reps=REPS)[("b", "c")]


@pytest.mark.parametrize("num_seeds", [4, 7, 8])
def test_the_learning_tables_iqm_estimate_is_the_reports(num_seeds):
    """README's learning table bootstraps the IQM alone (statistics.iqm_estimate, 4x cheaper); its point and interval
    equal the report's IQM estimate from the same resamples, to the float's last bits."""
    returns = np.random.default_rng(num_seeds).normal(300, 120, num_seeds)
    alone = statistics.iqm_estimate(returns, "pop", reps=REPS)
    reported = statistics.aggregate_estimates({"pop": returns}, reps=REPS)["pop"]["IQM"]
    assert np.allclose(alone, reported, rtol=1e-12, atol=0), (alone, reported)


def test_an_unfinished_run_is_reported_from_its_last_evaluation(results_dir, tmp_path):
    shutil.copytree(results_dir / "dqn", tmp_path / "dqn")
    metrics = json.loads((tmp_path / "dqn" / "metrics.json").read_text())
    for entries in metrics["gymnax"]["CartPole-v1"]["dqn"].values():
        del entries["absolute_metrics"], entries["step_3"]
    (tmp_path / "dqn" / "metrics.json").write_text(json.dumps(metrics))
    (group,) = report_runs.group_runs(report_runs.load_runs([str(tmp_path / "dqn" / "metrics.json")]))
    seeds = logged(results_dir / "dqn", "dqn")
    assert not group.finished and group.absolute_returns().tolist() == [seeds[0][1][2], seeds[1][1][2]]
    assert group.final_params_returns() is None  # no final params' return logged: none is made up
    assert "did not finish" in group.notes[0]


def test_a_task_that_hides_observation_entries_is_reported_apart_from_its_scenario():
    from stoix_like.run import run_record

    cartpole, masked = (compose_config("ppo", [f"env=gymnax/{option}"]).env
                        for option in ("cartpole", "cartpole_masked"))
    assert run_record.task_name(cartpole) == "CartPole-v1"
    assert run_record.task_name(masked) == "CartPole-v1[observed 0,2]"
    # a report maps each logged task back to the env option it came from, never the masked one to CartPole's
    assert report_runs.env_option_of("gymnax", "CartPole-v1") == "gymnax/cartpole"
    assert report_runs.env_option_of("gymnax", "CartPole-v1[observed 0,2]") == "gymnax/cartpole_masked"
