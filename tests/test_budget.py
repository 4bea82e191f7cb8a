"""Exact step budgets (stoix_like.learner.budget) and the batch-split check every system shares.

A budget either multiplies back to exactly `arch.total_timesteps`, or is refused with a message that names
values that work; the values it names are checked to work too.
"""

from __future__ import annotations

import re

import jax
import pytest

from stoix_like import envs as envs_lib
from stoix_like.run import experiment
from stoix_like.learner import budget as budget_lib
from stoix_like.learner.budget import Budget, check_divides, exact_budget, split_envs
from stoix_like.config.compose import compose_config
from stoix_like.errors import ConfigError
from stoix_like.systems.on_policy import ppo


def budget_kwargs(**overrides):
    """The CartPole defaults of config/arch/anakin.yaml + config/system/ppo.yaml on one device."""
    kwargs = dict(total_timesteps=500_000, total_num_envs=16, n_devices=1, update_batch_size=1,
                  rollout_length=125, num_evaluation=10, warmup_rollout_length=0)
    kwargs.update(overrides)
    return kwargs


def nearest_budgets(message: str) -> list[int]:
    match = re.search(r"nearest budgets that work: ([\d, ]+)\.", message)
    assert match, f"no suggested budgets in: {message}"
    return [int(value) for value in match.group(1).split(",")]


# ---------------------------------------------------------------------------------------------- exact counts

@pytest.mark.parametrize(
    "kwargs, expected",
    [
        # 500,000 = 10 evaluations × 25 updates × 125 steps × 16 envs
        (budget_kwargs(), dict(num_envs=16, updates_per_evaluation=25, num_updates=250, steps_per_update=2000,
                               warmup_steps=0)),
        # 2 devices × 4 batch × 2 envs = 16 envs; 64,000 = 4 × 125 × 8 × 16
        (budget_kwargs(total_timesteps=64_000, n_devices=2, update_batch_size=4, rollout_length=8,
                       num_evaluation=4),
         dict(num_envs=2, updates_per_evaluation=125, num_updates=500, steps_per_update=128, warmup_steps=0)),
        # PureJaxRL's CartPole: 4 envs × 128 steps, 976 updates; 8 evaluations × 122 updates = 499,712
        (budget_kwargs(total_timesteps=499_712, total_num_envs=4, rollout_length=128, num_evaluation=8),
         dict(num_envs=4, updates_per_evaluation=122, num_updates=976, steps_per_update=512, warmup_steps=0)),
        # warm-up: 16 envs × 10 steps = 160 warm-up steps, then 5 evaluations × 3 updates × 4 steps × 16 envs
        (budget_kwargs(total_timesteps=1_120, rollout_length=4, num_evaluation=5, warmup_rollout_length=10),
         dict(num_envs=16, updates_per_evaluation=3, num_updates=15, steps_per_update=64, warmup_steps=160)),
    ],
)
def test_budget_multiplies_back_to_total_timesteps(kwargs, expected):
    budget = exact_budget(**kwargs)
    for field, value in expected.items():
        assert getattr(budget, field) == value, field
    assert budget.total_num_envs == kwargs["total_num_envs"]
    assert budget.warmup_rollout_length == kwargs["warmup_rollout_length"]
    learning_steps = (budget.num_evaluation * budget.updates_per_evaluation * budget.rollout_length
                      * budget.n_devices * budget.update_batch_size * budget.num_envs)
    assert budget.warmup_steps + learning_steps == kwargs["total_timesteps"]
    assert budget.warmup_steps + budget.num_evaluation * budget.steps_per_evaluation == kwargs["total_timesteps"]


def test_experiment_budget_reads_the_composed_config(compose):
    config = compose("ppo", ["arch.total_timesteps=64000", "arch.total_num_envs=8", "system.rollout_length=16",
                             "arch.num_evaluation=5"])
    budget = budget_lib.make_budget(config)
    assert (budget.n_devices, budget.num_envs, budget.updates_per_evaluation) == (jax.device_count(), 8, 100)
    assert budget.total_timesteps == 64_000


# ------------------------------------------------------------------------------------------------- refusals

def test_env_split_that_is_not_exact_names_valid_values():
    with pytest.raises(ConfigError) as error:
        split_envs(total_num_envs=6, n_devices=2, update_batch_size=2)
    message = str(error.value)
    assert "arch.total_num_envs=6" in message
    assert "2 × 2 = 4" in message
    match = re.search(r"try arch\.total_num_envs=(\d+) or (\d+)\.", message)
    assert match, message
    suggested = [int(value) for value in match.groups()]
    assert suggested == [4, 8]
    for total_num_envs in suggested:
        assert split_envs(total_num_envs, n_devices=2, update_batch_size=2) == total_num_envs // 4


@pytest.mark.parametrize("total_num_envs", [0, 3])
def test_fewer_envs_than_slots_is_refused(total_num_envs):
    with pytest.raises(ConfigError, match=r"try arch\.total_num_envs=4 or 8"):
        exact_budget(**budget_kwargs(total_num_envs=total_num_envs, n_devices=2, update_batch_size=2))


def test_budget_smaller_than_one_update_is_refused_with_working_budgets():
    kwargs = budget_kwargs(total_timesteps=1_000)  # one update is 125 × 16 = 2,000 steps, × 10 evaluations
    with pytest.raises(ConfigError) as error:
        exact_budget(**kwargs)
    message = str(error.value)
    assert "arch.total_timesteps=1000 is smaller than one update per evaluation" in message
    assert "125 × 16 = 2000" in message
    assert nearest_budgets(message) == [20_000, 40_000]
    for total_timesteps in nearest_budgets(message):
        assert exact_budget(**{**kwargs, "total_timesteps": total_timesteps}).total_timesteps == total_timesteps


@pytest.mark.parametrize(
    "kwargs, expected_suggestions",
    [
        (budget_kwargs(total_timesteps=500_001), [500_000, 520_000]),
        (budget_kwargs(total_timesteps=510_000), [500_000, 520_000]),
        # warm-up steps are part of the total: 160 + k × (4 × 16 × 5)
        (budget_kwargs(total_timesteps=1_200, rollout_length=4, num_evaluation=5, warmup_rollout_length=10),
         [1_120, 1_440]),
    ],
)
def test_budget_not_a_whole_number_of_updates_names_the_nearest_working_budgets(kwargs, expected_suggestions):
    with pytest.raises(ConfigError) as error:
        exact_budget(**kwargs)
    message = str(error.value)
    assert f"arch.total_timesteps={kwargs['total_timesteps']} is not a whole number of updates" in message
    if kwargs["warmup_rollout_length"]:
        assert "after 160 warm-up steps" in message
    suggestions = nearest_budgets(message)
    assert suggestions == expected_suggestions
    assert suggestions[0] < kwargs["total_timesteps"] < suggestions[1]
    for total_timesteps in suggestions:
        assert exact_budget(**{**kwargs, "total_timesteps": total_timesteps}).total_timesteps == total_timesteps


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (dict(num_evaluation=0), r"arch\.num_evaluation=0 must be at least 1"),
        (dict(rollout_length=0), r"system\.rollout_length=0 must be at least 1"),
    ],
)
def test_degenerate_schedules_are_refused(overrides, expected):
    with pytest.raises(ConfigError, match=expected):
        exact_budget(**budget_kwargs(**overrides))


def test_composed_config_with_a_bad_budget_is_refused_before_anything_compiles(compose):
    config = compose("ppo", ["arch.total_timesteps=12345"])
    with pytest.raises(ConfigError, match="nearest budgets that work"):
        budget_lib.make_budget(config)


# ----------------------------------------------------------------------------------------- minibatch split

def test_check_divides_accepts_an_exact_split():
    check_divides("batch", 512, "system.num_minibatches", 4)  # raises on failure


@pytest.mark.parametrize("divisor, nearby", [(5, [3, 4, 6]), (0, [1, 2, 3]), (13, [8, 12, 16])])
def test_check_divides_names_the_nearest_divisors(divisor, nearby):
    value = 48  # divisors 1 2 3 4 6 8 12 16 24 48
    with pytest.raises(ConfigError) as error:
        check_divides("batch", value, "system.num_minibatches", divisor)
    message = str(error.value)
    assert f"system.num_minibatches={divisor} must divide batch=48" in message
    assert f"try one of {nearby}" in message
    for suggestion in nearby:
        check_divides("batch", value, "system.num_minibatches", suggestion)


def test_ppo_refuses_minibatches_that_do_not_divide_the_rollout(compose):
    # 8 steps × 4 envs = 32 transitions per slot: 3 minibatches would drop or duplicate data
    config = compose("ppo", ["arch.total_num_envs=4", "system.rollout_length=8", "system.num_minibatches=3",
                             "arch.num_evaluation=1", "arch.total_timesteps=32"])
    budget = budget_lib.make_budget(config)
    train_env, _ = envs_lib.make(config.env)
    with pytest.raises(ConfigError, match=r"system\.num_minibatches=3 must divide .*=32; try one of \[1, 2, 4\]"):
        ppo.learner_setup(train_env, jax.random.PRNGKey(0), config, budget)


def test_the_expected_wall_time_extends_the_first_interval_over_the_budget():
    # 40 s gone (setup and compilation included), the first of 10 intervals took 10 s: 90 s remain
    line = experiment.expected_wall_time(10.0, 9_700.0, 1, 10, 40.0)
    assert line.startswith("expected wall time: about 2m10s in all, 1m30s from now:"), line
    assert "9,700 steps/s per seed" in line and "took 10.0s" in line
    # resumed at interval 4 of 10, two intervals of 12 s each since: 6 remain
    assert "1m12s from now" in experiment.expected_wall_time(24.0, 1.0, 2, 8, 30.0)


def test_a_cpu_run_names_what_the_published_budget_would_cost_at_its_speed():
    # 5.12M of brax's 50M steps, learning at 10,000 steps/s: the published budget is 5,000 s away
    line = experiment.reference_budget_cost(5_120_000, 50_000_000, "brax's notebook", 10_000.0)
    assert "10% of the published recipe's 50,000,000 steps per seed (brax's notebook)" in line, line
    assert "would take this run about 1h23m20s at the speed" in line, line
    assert "()" not in experiment.reference_budget_cost(1, 2, None, 1.0)
    assert "the budget is 0.32% of" in experiment.reference_budget_cost(192_000, 60_000_000, None, 1.0)
    # 4 seeds learning at 2,500 steps/s each (a population reports its speed per seed): 20,000 s for the four
    assert "about 5h33m20s for its 4 seeds" in experiment.reference_budget_cost(1, 50_000_000, None, 2_500.0, 4)


def test_the_tuned_brax_ant_file_names_its_published_budget():
    config = compose_config("ppo", ["env=brax/ant"])
    assert config.arch.reference_timesteps == 50_000_000 and "brax" in config.arch.reference_source
    assert compose_config("ppo", [])["arch"]["reference_timesteps"] is None  # CartPole's recipe names none


def test_learned_steps_per_second_counts_every_call_of_the_interval():
    # 1,000 steps per call: 2 updates × 50 steps × 10 envs
    call_budget = Budget(total_timesteps=8_000, n_devices=1, update_batch_size=1, num_envs=10, rollout_length=50,
                         num_evaluation=8, updates_per_evaluation=2, warmup_steps=0)
    assert experiment.learned_steps_per_second(call_budget, 0.5, 4) == 8_000.0
