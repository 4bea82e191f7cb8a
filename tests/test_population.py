"""The statistics a learning claim is made of: IQM, its bootstrap interval, and a target's verdict."""

from __future__ import annotations

import numpy as np
import pytest

from stoix_like.claims.learning_targets import SEBULBA_TARGETS, TARGETS, LearningTarget, shortfalls
from stoix_like.claims.population import bootstrap_interval, interquartile_mean, summarize


def test_iqm_is_the_mean_of_the_middle_half():
    # 8 values: the lowest two and highest two are trimmed, whatever their size
    assert interquartile_mean([1, 2, 3, 4, 5, 6, 7, 8]) == pytest.approx(4.5)
    assert interquartile_mean([-1e9, 2, 3, 4, 5, 6, 7, 1e9]) == pytest.approx(4.5)
    assert interquartile_mean([500.0] * 7 + [9.0]) == pytest.approx(500.0)  # one collapsed seed does not move it


def test_bootstrap_interval_brackets_the_iqm_and_is_reproducible():
    values = np.random.default_rng(3).normal(400.0, 50.0, size=8)
    low, high = bootstrap_interval(values)
    assert min(values) <= low <= interquartile_mean(values) <= high <= max(values)
    assert (low, high) == bootstrap_interval(values)  # fixed resampling seed
    assert bootstrap_interval([500.0] * 8) == (500.0, 500.0)


def test_summary_counts_solved_seeds_and_says_so():
    summary = summarize([500.0, 480.0, 474.9, 300.0], seeds=[1000, 1001, 1002, 1003], solved_return=475.0)
    assert summary.num_solved == 2 and summary.seeds == (1000, 1001, 1002, 1003)
    assert "2/4 solved (≥ 475)" in summary.describe() and "1000..1003" in summary.describe()
    no_threshold = summarize([-150.0, -180.0], seeds=[0, 1], solved_return=None)
    assert no_threshold.num_solved is None and "solved" not in no_threshold.describe()
    with pytest.raises(ValueError):
        summarize([1.0, 2.0], seeds=[0], solved_return=None)


def test_a_target_needs_the_iqm_and_allows_only_so_many_seeds_below_its_floor():
    target = LearningTarget("gymnax/cartpole", iqm_at_least=475.0, seed_floor=400.0, max_seeds_below_floor=1,
                            solved_return=475.0)
    seeds = list(range(8))
    assert shortfalls(target, summarize([500.0] * 7 + [10.0], seeds, 475.0)) == []  # one straggler is allowed
    two_low = shortfalls(target, summarize([500.0] * 6 + [10.0, 399.0], seeds, 475.0))
    assert len(two_low) == 1 and "2 seeds below 400" in two_low[0] and "seed 7 at 399.0" in two_low[0]
    low_iqm = shortfalls(target, summarize([470.0] * 8, seeds, 475.0))
    assert low_iqm == ["IQM 470.0 < 475"]


def test_every_algorithm_has_a_target_on_a_config_that_exists():
    import os

    from omegaconf import OmegaConf

    from stoix_like.config.compose import CONFIG_DIR
    from stoix_like.systems import MODULE_OF

    # an algorithm whose default arch is Sebulba (IMPALA) has its reference target in SEBULBA_TARGETS alone
    sebulba_only = {algorithm: (target,) for algorithm, target in SEBULBA_TARGETS.items() if algorithm not in TARGETS}
    assert set(TARGETS) | set(sebulba_only) == set(MODULE_OF)
    for algorithm, targets in {**TARGETS, **sebulba_only}.items():
        assert os.path.exists(os.path.join(CONFIG_DIR, f"{algorithm}.yaml"))
        assert len({target.env for target in targets}) == len(targets), f"{algorithm}: one target per task"
        # the first target is the reference task: the env config/<algo>.yaml trains on by default
        defaults = OmegaConf.load(os.path.join(CONFIG_DIR, f"{algorithm}.yaml")).defaults
        assert {"env": targets[0].env} in defaults, f"{algorithm}'s first target is not its default env"
        for target in targets:
            assert os.path.exists(os.path.join(CONFIG_DIR, "env", f"{target.env}.yaml"))
            assert target.seed_floor <= target.iqm_at_least


def test_learning_table_replaces_readme_s_block_and_nothing_else(tmp_path, monkeypatch):
    """`--from-logs` writes the rendered block between README's markers; the text around it stays as it was."""
    from conftest import REPO_ROOT
    monkeypatch.syspath_prepend(str(REPO_ROOT / "benchmarks"))
    learning_table = __import__("learning_table")
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{learning_table.TABLE_START}\n| old | table |\n\nold footer\n"
                      f"{learning_table.TABLE_END}\noutro\n")
    monkeypatch.setattr(learning_table, "README", str(readme))
    learning_table.update_readme("| new | table |\n\nnew footer")
    assert learning_table.readme_table() == "| new | table |\n\nnew footer"
    text = readme.read_text()
    assert text.startswith("intro\n") and text.endswith("outro\n") and "old" not in text
