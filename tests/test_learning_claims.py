"""What README claims about learning is what the committed logs and the tests say, and nothing more.

- README's learning table is the rendering of docs/results/runs/ and docs/results/untuned/ (no row kept by hand);
- a target without logs is an error, not a row;
- every target declares how it is checked (learning_targets.COVERAGE), and a `ci` or `ci-reduced` declaration
  names a test that exists, is marked `learning`, and trains that algorithm with the helper that asserts it;
- every test that trains a population is marked `learning`, so `pytest -m learning` selects them all.
"""

from __future__ import annotations

import ast
import json
import os
import pathlib
from typing import Dict, List, Tuple

import pytest
from conftest import REPO_ROOT

from stoix_like.errors import ConfigError
from stoix_like.claims.learning_targets import COVERAGE, all_targets, coverage_of

TESTS = REPO_ROOT / "tests"
# the helpers that train a population and judge it: a test calling one is a learning check
POPULATION_HELPERS = {"assert_population_learns", "assert_population_clears", "train_population", "compare_memory"}
HELPER_OF_KIND = {"ci": {"assert_population_learns", "train_population", "compare_memory"},
                  "ci-reduced": {"assert_population_clears"}}


def module_test_functions() -> Dict[Tuple[str, str], ast.FunctionDef]:
    """(tests/<file>.py, function name) -> its definition, for every module-level test function."""
    found = {}
    for path in sorted(TESTS.glob("test_*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                found[(f"tests/{path.name}", node.name)] = node
    return found


def marked_learning(function: ast.FunctionDef) -> bool:
    return any(ast.unparse(decorator) == "pytest.mark.learning" for decorator in function.decorator_list)


def called_names(function: ast.FunctionDef) -> List[str]:
    return [node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            for node in ast.walk(function) if isinstance(node, ast.Call)]


def named_strings(function: ast.FunctionDef) -> List[str]:
    """Every string literal of the function, its decorators (a parametrize list) included."""
    return [node.value for part in (function, *function.decorator_list) for node in ast.walk(part)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def test_every_target_declares_how_it_is_checked_and_nothing_else_is_declared():
    targets = {(algorithm, target.env) for algorithm, target in all_targets()}
    assert set(COVERAGE) == targets
    for (algorithm, env), coverage in COVERAGE.items():
        assert coverage.kind in ("ci", "ci-reduced", "benchmark"), (algorithm, env)
        assert (coverage.test is None) == (coverage.kind == "benchmark"), (algorithm, env)
        assert (coverage.reduced is not None) == (coverage.kind == "ci-reduced"), (algorithm, env)
        assert bool(coverage.why_not_ci) == (coverage.kind != "ci"), f"{algorithm} on {env}: say why it is not ci"


def test_each_ci_declaration_names_a_learning_test_that_trains_that_algorithm():
    functions = module_test_functions()
    for (algorithm, env), coverage in COVERAGE.items():
        if coverage.test is None:
            continue
        file, name = coverage.test.split("::")
        function = functions.get((file, name))
        assert function is not None, f"{algorithm} on {env}: {coverage.test} does not exist"
        assert marked_learning(function), f"{coverage.test} is not marked learning"
        assert HELPER_OF_KIND[coverage.kind] & set(called_names(function)), (
            f"{coverage.test} calls none of {sorted(HELPER_OF_KIND[coverage.kind])}, as a {coverage.kind} check must")
        strings = named_strings(function)
        assert algorithm in strings, f"{coverage.test} does not train {algorithm}"
        if env != all_targets_first(algorithm):
            assert env in strings, f"{coverage.test} does not train {algorithm} on {env}"


def all_targets_first(algorithm: str) -> str:
    """The algorithm's reference task, which a test may leave implicit (env=None)."""
    return next(target.env for name, target in all_targets() if name == algorithm)


def test_every_test_that_trains_a_population_is_marked_learning():
    unmarked = [f"{file}::{name}" for (file, name), function in module_test_functions().items()
                if POPULATION_HELPERS & set(called_names(function)) and not marked_learning(function)]
    assert not unmarked, f"learning checks without @pytest.mark.learning: {unmarked}"


def test_a_ci_check_trains_the_seeds_its_coverage_declares():
    # the helpers read the seeds from the declaration: PPO keeps its 8 untuned seeds in CI
    assert coverage_of("ppo").describe("ppo", "gymnax/cartpole") == "ci: 8 seeds 1000..1007"
    assert coverage_of("mz").describe("mz", "gymnax/cartpole").startswith("ci-reduced: 4 seeds 0..3 at 25,856 steps")


@pytest.fixture(scope="module")
def learning_table_cli(tmp_path_factory):
    pytest.importorskip("rliable", reason="the report extra: pip install -e '.[report]'")
    import sys

    sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
    try:
        yield __import__("learning_table")
    finally:
        sys.path.remove(str(REPO_ROOT / "benchmarks"))


def test_readme_s_learning_table_is_what_the_committed_logs_render(learning_table_cli):
    """Every figure of the table comes from docs/results/runs/ and docs/results/untuned/: a hand-edited cell, or
    logs changed without `python benchmarks/learning_table.py --from-logs`, fails here."""
    assert learning_table_cli.readme_table() == learning_table_cli.rendered_table(), (
        "README.md's learning table is not what the logs render: run `python benchmarks/learning_table.py "
        "--from-logs`")


def test_a_target_without_logs_is_an_error_not_a_row(learning_table_cli, tmp_path):
    source = pathlib.Path(learning_table_cli.RUNS)
    runs = tmp_path / "runs"
    for run_json in source.glob("*/*/*/run.json"):
        if run_json.parent.relative_to(source).parts[0] != "sac":  # every target but SAC's keeps its logs
            target = runs / run_json.parent.relative_to(source)
            target.mkdir(parents=True)
            for name in ("run.json", "metrics.json"):
                (target / name).write_bytes((run_json.parent / name).read_bytes())
    with pytest.raises(ConfigError, match="no logged population for (.*, )?sac on gymnax/pendulum"):
        learning_table_cli.rendered_table(str(runs), learning_table_cli.UNTUNED)


def test_readme_s_continuous_control_table_is_what_the_committed_logs_render(learning_table_cli):
    assert learning_table_cli.readme_table(learning_table_cli.CONTINUOUS_BLOCK) == \
        learning_table_cli.rendered_continuous_table(), (
        "README.md's continuous-control table is not what docs/results/brax_peer renders: run `python "
        "benchmarks/learning_table.py --from-logs`")


def test_readme_s_pixels_table_is_what_the_committed_logs_render(learning_table_cli):
    assert learning_table_cli.readme_table(learning_table_cli.PIXELS_BLOCK) == \
        learning_table_cli.rendered_pixels_table(), (
        "README.md's pixels table is not what docs/results/rejax_peer renders: run `python "
        "benchmarks/learning_table.py --from-logs`")


def checked_by_commands(table: str) -> List[Tuple[str, str, List[str]]]:
    """(trainer, seeds cell, the benchmark's arguments) for each row of a peer-style README table, read from its
    `checked by` cell: benchmark: `python benchmarks/<script>.py <arguments>`."""
    import shlex

    header, _, *rows = table.splitlines()
    columns = [cell.strip() for cell in header.strip("|").split("|")]
    found = []
    for line in rows:
        cells = dict(zip(columns, (cell.strip() for cell in line.strip("|").split("|"))))
        command = cells["checked by"].split("`")[1]
        found.append((cells["trainer"], cells["seeds"], shlex.split(command)[1:]))
    return found


@pytest.mark.parametrize("block", ["CONTINUOUS_BLOCK", "PIXELS_BLOCK", "TORSO_CHECK_BLOCK", "ATARI_BLOCK"])
def test_each_benchmark_row_names_a_command_its_benchmark_accepts_for_that_row(learning_table_cli, block):
    """A `checked by` cell names the benchmark that re-measures its row: the script's own parser takes the command,
    for the row's seeds and, beside a peer, for the row's side alone."""
    import importlib

    rows = checked_by_commands(learning_table_cli.readme_table(getattr(learning_table_cli, block)))
    assert rows
    for trainer, seeds_cell, arguments in rows:
        script, *options = arguments
        assert script.startswith("benchmarks/") and (REPO_ROOT / script).is_file(), script
        module = importlib.import_module(f"benchmarks.{pathlib.Path(script).stem}")
        parsed = module.argument_parser().parse_args(options)
        count, seed_span = seeds_cell.split(" ", 1)
        first_seed = int(seed_span.strip("()").split("..")[0])
        assert parsed.first_seed == first_seed, (trainer, options)
        assert getattr(parsed, "num_seeds", getattr(parsed, "seeds", None)) == int(count), (trainer, options)
        if hasattr(parsed, "side"):
            assert parsed.side == ("ours" if trainer.startswith("ours") else trainer.split(".")[0].split(" ")[0]), \
                (trainer, options)


def test_a_playground_row_names_its_task_as_the_brax_benchmark_takes_it():
    """brax's benchmark names brax tasks bare (`--task ant`) and Playground's with their suite, so a Playground
    population's command must keep `playground/`."""
    from stoix_like.report.learning_table import BRAX, REJAX

    assert BRAX.command("sac", "playground/cheetah_run", [1001, 1002], "ours") == (
        "python benchmarks/brax_learning_peer.py --task playground/cheetah_run --algorithm sac --first-seed 1001 "
        "--num-seeds 2 --side ours")
    assert BRAX.task_argument("brax/ant") == "ant"
    assert REJAX.task_argument("gymnax/space_invaders") == "space_invaders"


def test_readme_s_gpu_brax_table_is_what_the_lease_s_logs_render(learning_table_cli):
    assert learning_table_cli.readme_table(learning_table_cli.GPU_BRAX_BLOCK) == \
        learning_table_cli.rendered_gpu_brax_table(), (
        "README.md's GPU brax table is not what docs/results/gpu/brax_ppo renders: run `python "
        "benchmarks/learning_table.py --from-logs`")


def test_the_gpu_brax_table_reads_how_far_a_cut_run_got_and_refuses_a_seed_logged_twice(learning_table_cli,
                                                                                          tmp_path):
    import shutil

    from stoix_like.report.gpu_budget_table import gpu_budget_table

    source = pathlib.Path(learning_table_cli.GPU_BRAX) / "ant"
    task = tmp_path / "ant"
    shutil.copytree(source / "ours_1001", task / "ours_1001")
    table = gpu_budget_table(str(tmp_path), reps=200)
    assert "no brax run in this lease" in table and "re-evaluated for 6 of 8 seeds" in table
    shutil.copy(source / "brax_1001.json", task / "brax_1001.json")
    assert "evaluation 7 of 10" in gpu_budget_table(str(tmp_path), reps=200)
    shutil.copy(source / "brax_1001.json", task / "brax_1001_again.json")
    with pytest.raises(ConfigError, match="brax seed 1001 is logged twice"):
        gpu_budget_table(str(tmp_path), reps=200)
    shutil.rmtree(task / "ours_1001")
    with pytest.raises(ConfigError, match="no run of ours"):
        gpu_budget_table(str(tmp_path), reps=200)


def test_ours_beside_a_peer_is_judged_on_the_final_iqm_and_the_wall_time():
    from stoix_like.report.learning_table import side_by_side
    from stoix_like.report.statistics import Estimate

    peer = Estimate(3000.0, 2500.0, 3500.0)
    assert side_by_side(Estimate(3100.0, 2900.0, 3300.0), peer, 100.0, 200.0) == \
        "ours against it: met: our final IQM ≥ its; met: our wall time 0.50× its"
    overlapping = side_by_side(Estimate(2600.0, 2200.0, 2600.0), peer, 300.0, 200.0)
    assert overlapping == ("ours against it: met at worst: our final IQM 400 lower, the intervals overlap; "
                           "**MISSED**: our wall time 1.50× its")
    # a MinAtar-sized gap keeps its figures instead of rounding to "0 lower"
    assert "our final IQM 0.25 lower, the intervals overlap" in side_by_side(
        Estimate(7.0, 6.5, 11.5), Estimate(7.25, 7.0, 7.5), 100.0, 200.0)
    assert "**MISSED**: our final IQM lower, the intervals apart" in side_by_side(
        Estimate(2000.0, 1900.0, 2400.0), peer, 100.0, 200.0)
    assert "our final returns are not logged" in side_by_side(None, peer, 100.0, 200.0)


def test_readme_s_pbt_table_is_what_the_committed_logs_render(learning_table_cli):
    assert learning_table_cli.readme_table(learning_table_cli.PBT_BLOCK) == learning_table_cli.rendered_pbt_table(), (
        "README.md's PBT table is not what docs/results/pbt renders: run `python benchmarks/learning_table.py "
        "--from-logs`")


def test_readme_s_sweep_speed_table_is_what_the_committed_logs_render(learning_table_cli):
    assert learning_table_cli.readme_table(learning_table_cli.SWEEP_SPEED_BLOCK) == \
        learning_table_cli.rendered_sweep_speed_table(), (
        "README.md's sweep-speed table is not what docs/results/sweep_in_one_program renders: run `python "
        "benchmarks/learning_table.py --from-logs`")


def test_a_sweep_speed_log_without_an_arm_is_an_error(learning_table_cli, tmp_path):
    import json

    from stoix_like.errors import ConfigError

    with open(os.path.join(learning_table_cli.SWEEP_SPEED, "steps_500000.json")) as file:
        log = json.load(file)
    del log["arms"]["multirun"]
    (tmp_path / "steps_500000.json").write_text(json.dumps(log))
    with pytest.raises(ConfigError, match="no multirun arm"):
        learning_table_cli.rendered_sweep_speed_table(str(tmp_path))
    with pytest.raises(ConfigError, match="no sweep-speed logs"):
        learning_table_cli.rendered_sweep_speed_table(str(tmp_path / "empty"))


def test_readme_s_resnet_check_table_is_what_the_committed_logs_render(learning_table_cli):
    assert learning_table_cli.readme_table(learning_table_cli.TORSO_CHECK_BLOCK) == \
        learning_table_cli.rendered_torso_check_table(), (
        "README.md's ResNet-on-MinAtar table is not what docs/results/torso_check renders: run `python "
        "benchmarks/learning_table.py --from-logs`")


def test_the_resnet_check_table_without_logs_is_an_error(learning_table_cli, tmp_path):
    from stoix_like.errors import ConfigError

    with pytest.raises(ConfigError, match="no logged population"):
        learning_table_cli.rendered_torso_check_table(str(tmp_path))


def test_readme_s_atari_table_is_what_the_committed_logs_render(learning_table_cli):
    assert learning_table_cli.readme_table(learning_table_cli.ATARI_BLOCK) == \
        learning_table_cli.rendered_atari_table(), (
        "README.md's Atari table is not what docs/results/atari renders: run `python "
        "benchmarks/learning_table.py --from-logs`")


def test_the_atari_table_refuses_no_logs_and_an_unfinished_run(learning_table_cli, tmp_path):
    import shutil

    from stoix_like.errors import ConfigError

    with pytest.raises(ConfigError, match="no logged Atari population"):
        learning_table_cli.rendered_atari_table(str(tmp_path))
    shutil.copytree(learning_table_cli.ATARI, tmp_path / "atari")
    record = next((tmp_path / "atari").rglob("run.json"))
    logged = json.loads(record.read_text())
    record.write_text(json.dumps({**logged, "status": "running"}))
    with pytest.raises(ConfigError, match="a run has not finished"):
        learning_table_cli.rendered_atari_table(str(tmp_path / "atari"))


def test_the_pbt_table_without_a_fixed_arm_is_an_error(learning_table_cli, tmp_path):
    import shutil

    from stoix_like.errors import ConfigError

    for name in os.listdir(learning_table_cli.PBT_RESULTS):
        if name.startswith("pbt_"):
            shutil.copytree(os.path.join(learning_table_cli.PBT_RESULTS, name), tmp_path / name)
    with pytest.raises(ConfigError, match="no fixed and PBT logs"):
        learning_table_cli.rendered_pbt_table(str(tmp_path))


def test_a_brax_target_without_a_logged_population_is_an_error(learning_table_cli, tmp_path):
    from stoix_like.errors import ConfigError

    with pytest.raises(ConfigError, match="no logged population for ppo on brax/ant"):
        learning_table_cli.rendered_continuous_table(str(tmp_path))


def test_a_brax_population_still_training_is_an_error(learning_table_cli, tmp_path):
    import json
    import shutil

    from stoix_like.errors import ConfigError

    logged = tmp_path / "ppo" / "ant" / "ours_1001"
    shutil.copytree(os.path.join(learning_table_cli.BRAX_PEER, "ppo", "ant", "ours_1001"), logged)
    record = json.loads((logged / "run.json").read_text())
    (logged / "run.json").write_text(json.dumps({**record, "status": "running"}))
    with pytest.raises(ConfigError, match="has not finished"):
        learning_table_cli.rendered_continuous_table(str(tmp_path))


def test_readme_s_sebulba_table_is_what_the_committed_logs_render(learning_table_cli):
    assert learning_table_cli.readme_table(learning_table_cli.SEBULBA_BLOCK) == \
        learning_table_cli.rendered_sebulba_table(), (
        "README.md's Sebulba table is not what docs/results/sebulba renders: run `python benchmarks/learning_table.py "
        "--from-logs`")
