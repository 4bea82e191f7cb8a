"""Every config key has a type and a valid range (stoix_like/config/validation.py), checked before any long work.

A bad value is refused in one line on stderr, `error: <key>=<value> ... must be <range> (<meaning>).`, with exit
code 2 and no traceback, before envs, setup or compilation. The table of bad inputs below runs through the real
Hydra entry: every row in one interpreter (each row calls the entry's `main` as `python -m experiments.<algo>`
would), and a few rows as real `python -m experiments.<algo>` subprocesses for the exit code and the absence of
a traceback.
"""

from __future__ import annotations

import json
import os
import time

import pytest
from conftest import compose_config, run_python
from omegaconf import OmegaConf

from stoix_like.config import validation
from stoix_like.config.compose import CONFIG_DIR, available_options
from stoix_like.errors import ConfigError
from stoix_like.systems import fit

ALGORITHMS = sorted(name[: -len(".yaml")] for name in os.listdir(CONFIG_DIR)
                    if name.endswith(".yaml") and name not in ("hydra_settings.yaml", "evaluate.yaml"))
EVALUATE = ["checkpoint=/no/such/checkpoint"]  # validation comes before the checkpoint is looked for


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    """(label, config) for every config/<algo>.yaml with its defaults, and every option of the env, network and
    system groups composed into ppo's config (composition only: nothing is built, so almost any pairing composes)."""
    results = tmp_path_factory.mktemp("results")
    compose = lambda name, overrides=(): compose_config(name, overrides, base_exp_path=results)
    configs = [(name, compose(name)) for name in ALGORITHMS]
    configs.append(("evaluate", compose_config("evaluate", EVALUATE)))  # no logger group: no base_exp_path
    # CPU suites are stepped by Sebulba's actor threads: they compose with arch=sebulba
    cpu_arch = lambda env: ["arch=sebulba"] if env.split("/")[0] in ("gymnasium", "envpool") else []  # noqa: E731
    # an env that keeps its observations as images (Atari frames) is read by an image network
    image_network = lambda env: ["network=resnet_ppo"] if OmegaConf.select(  # noqa: E731
        OmegaConf.load(os.path.join(CONFIG_DIR, "env", f"{env}.yaml")), "observation_layout") == "image" else []
    configs += [(f"ppo env={env}", compose("ppo", [f"env={env}", *cpu_arch(env), *image_network(env)]))
                for env in available_options("env")]
    # a CNN reads grids: it is paired with an env that keeps its observations as images
    image_env = ["env=gymnax/breakout", "env.observation_layout=image"]
    # and a recurrent network goes with the system that carries its hidden state
    recurrent_system = ["system=rec_ppo"]
    configs += [(f"ppo network={network}", compose("ppo", [f"network={network}",
                                                           *(image_env if network.startswith(("cnn", "resnet"))
                                                             else []),
                                                           *(recurrent_system if network.startswith(("lstm", "gru"))
                                                             else [])]))
                for network in available_options("network")]
    # a Q-function is a q_network in these systems (PPO's critic_network is a state value): give them one; recurrent
    # PPO's and R2D2's networks are recurrent
    q_networks = {"sac": "mlp_sac", "td3": "mlp_td3", "ddpg": "mlp_td3", "d4pg": "mlp_d4pg",
                  "rec_ppo": "lstm_rec_ppo", "r2d2": "lstm_r2d2"}
    configs += [(f"ppo system={system}",
                 compose("ppo", [f"system={system}", f"network={q_networks.get(system, 'mlp_ppo')}"]))
                for system in available_options("system")]
    return configs


# ------------------------------------------------------------------------------------------ the table itself

def test_every_numeric_key_of_every_shipped_config_has_a_range(shipped):
    """A new key without a row in validation.SPECS (or an explicit FREE_FORM exemption) fails here."""
    unranged = {label: validation.unranged_keys(config) for label, config in shipped}
    unranged = {label: keys for label, keys in unranged.items() if keys}
    assert not unranged, (f"keys without a range: {unranged}; add them to stoix_like/config/validation.py SPECS "
                          f"(or FREE_FORM for free-form strings)")


def test_a_key_without_a_range_is_reported(compose):
    config = compose("ppo", ["+system.new_coefficient=0.5", "+network.critic_network.critic_head.scale=2"])
    assert validation.unranged_keys(config) == ["system.new_coefficient", "network.critic_network.critic_head.scale"]


def test_every_shipped_config_validates_clean(shipped):
    for label, config in shipped:
        assert validation.problems(config) == [], label


def test_each_default_lies_inside_its_range(shipped):
    outside = []
    for label, config in shipped:
        for key, value in validation.leaves(config):
            spec = validation.spec_of(key)
            if spec is not None and spec.problem(value) is not None:
                outside.append(f"{label}: {key}={value!r} ({spec.describe()})")
    assert not outside, outside


def test_no_row_of_the_table_is_stale(shipped):
    """Every spec and exemption matches some key of a shipped config: the table describes the configs we have."""
    keys = {key for _, config in shipped for key, _ in validation.leaves(config)}
    stale = [pattern for pattern in [*validation.SPECS, *validation.FREE_FORM]
             if not any(validation._matches(pattern, key) for key in keys)]
    assert not stale, stale


def test_enumerations_are_the_code_s_own_choices():
    from stoix_like.run import logging as logging_lib
    from stoix_like.envs import environment, factory
    from stoix_like.networks import torsos
    from stoix_like.systems.q_learning import distributional_dqn, dqn

    assert set(validation.TD_TARGETS) == set(dqn.TD_ERRORS)
    assert set(validation.DISTRIBUTIONAL_TD_TARGETS) == set(distributional_dqn.NEXT_ACTION_SELECTORS)
    assert set(validation.DISTRIBUTIONS) == set(distributional_dqn.DISTRIBUTIONS)
    assert set(validation.ACTIVATIONS) == set(torsos._ACTIVATIONS)
    assert set(validation.KERNEL_INITS) == set(torsos.KERNEL_INITS)
    assert set(validation.CONVOLUTIONS) == set(torsos.CONVOLUTIONS)
    assert set(validation.PADDINGS) == set(torsos.PADDINGS)
    assert set(validation.ENV_SUITES) == set(factory.AVAILABLE_SUITES)
    assert set(validation.OBSERVATION_LAYOUTS) == set(environment.OBSERVATION_LAYOUTS)
    assert set(validation.NEPTUNE_MODES) == set(logging_lib.NEPTUNE_MODES)
    assert validation.MUNCHAUSEN_KEYS == dqn.EXTRA_KEYS["munchausen"][0]
    from stoix_like.systems.search import mcts

    assert set(validation.SEARCH_POLICIES) == set(mcts.SEARCH_POLICIES)
    from stoix_like.runtime import parallel

    assert set(validation.SEED_LOOPS) == set(parallel.SEED_LOOPS)


# ------------------------------------------------------------------------------------------ what a spec accepts

@pytest.mark.parametrize("key, value, problem", [
    ("arch.num_seeds", True, "is not an integer"),  # a bool is not an int
    ("arch.num_seeds", 2.5, "is not an integer"),
    ("arch.num_seeds", "2", "is not an integer"),
    ("arch.num_seeds", None, "is not set"),
    ("system.gamma", float("nan"), "is not a number"),
    ("system.gamma", True, "is not a number"),
    ("system.gamma", 0, "is out of range"),
    ("system.gamma", 1.0000001, "is out of range"),
    ("system.standardize_advantages", 1, "is not a boolean"),
    ("system.standardize_advantages", "True", "is not a boolean"),
    ("network.actor_network.pre_torso.layer_sizes", [64, 64.5], "is not a list of integers"),
    ("network.actor_network.pre_torso.layer_sizes", 64, "is not a list of integers"),
    ("network.q_network.q_head.num_atoms", 1, "is out of range"),
    ("system.td_target", "Q_learning", "is not one of the choices"),
])
def test_a_spec_refuses(key, value, problem):
    line = validation.check_key(key, value)
    assert line is not None and line.startswith(f"{key}={validation.show(value)} {problem}: "), line


@pytest.mark.parametrize("key, value", [
    ("system.gamma", 1), ("system.gamma", 1.0), ("system.actor_lr", 1), ("system.gae_lambda", 0),
    ("arch.num_processes", None), ("greedy", None), ("greedy", False), ("env.solved_return", None),
    ("network.actor_network.pre_torso.layer_sizes", []), ("system.epsilon_end", 0),
    ("system.munchausen_clip_value_min", -1), ("arch.collective_timeout_seconds", 0.5),
    ("network.unknown_part.pre_torso.activation", "gelu"),
])
def test_a_spec_accepts(key, value):
    assert validation.check_key(key, value) is None


def test_a_whole_number_written_as_a_float_is_an_int(compose):
    """`arch.total_timesteps=1e6` is how budgets are written; Hydra reads it as 1000000.0, which the int field
    would refuse: the entry and compose_config pass it on as 1000000."""
    config = compose("ppo", ["arch.total_timesteps=1e6", "arch.num_seeds=2.0"])
    validation.validate(config)
    assert config.arch.total_timesteps == 1_000_000 and isinstance(config.arch.total_timesteps, int)
    assert config.arch.num_seeds == 2 and isinstance(config.arch.num_seeds, int)


def test_the_message_names_key_value_range_and_meaning():
    with pytest.raises(ConfigError) as error:
        validation.validate({"system": {"gamma": 1.5}})
    assert str(error.value) == "system.gamma=1.5 is out of range: gamma must be in (0, 1] (the discount)."


def test_keys_added_on_purpose_are_not_refused(compose):
    validation.validate(compose("ppo", ["+system.my_note=anything", "+network.actor_network.pre_torso.x=3"]))


def test_a_missing_required_value_is_named():
    with pytest.raises(ConfigError, match=r"^checkpoint is required: pass checkpoint=\.\.\."):
        validation.validate(compose_config("evaluate"))


def test_more_problems_are_counted_on_the_one_line(compose):
    with pytest.raises(ConfigError) as error:
        validation.validate(compose("ppo", ["system.gamma=2", "system.gae_lambda=2"]))
    # the schema types gamma as a float: the composed value is 2.0
    assert str(error.value).startswith("system.gamma=2.0 is out of range") and "(1 more problem" in str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("algorithm, overrides, named", [
    ("dqn", ["system.total_buffer_size=32"], "system.total_buffer_size=32 is smaller than system.total_batch_size=64"),
    ("dqn", ["system.epsilon_start=0.01"], "system.epsilon_end=0.04 is above system.epsilon_start=0.01"),
    ("c51", ["network.q_network.q_head.v_min=100"], "network.q_network.q_head.v_min=100 is not below"),
    ("d4pg", ["network.q_network.q_head.v_max=-2000"], "v_max=-2000"),
    ("ppo", ["arch.num_processes=2", "arch.process_id=2"], "arch.process_id=2 is out of range"),
    ("c51", ["system.td_target=munchausen"], "not available to distributional systems"),
    ("dqn", ["system.td_target=munchausen"], "needs system.entropy_temperature"),
    ("d4pg", ["system.n_step=200"], "system.n_step=200 is longer than"),
])
def test_cross_key_rules(compose, algorithm, overrides, named):
    with pytest.raises(ConfigError) as error:
        validation.validate(compose(algorithm, overrides))
    assert named in str(error.value)


def test_every_renamed_key_and_option_has_a_refusal_row():
    keys = [(algorithm, override.lstrip("+").split("=", 1)[0]) for algorithm, overrides, _ in RENAMED_INPUTS
            for override in overrides]
    untested = [rename.old for rename in validation.RENAMED
                if not any(rename.applies(key, algorithm) for algorithm, key in keys)]
    assert not untested, untested
    options = {(key, value) for _, overrides, _ in RENAMED_INPUTS for override in overrides
               for key, value in [override.split("=", 1)]}
    assert {(group, old) for group, renames in validation.RENAMED_OPTIONS.items() for old in renames} <= options


@pytest.mark.parametrize("algorithm, overrides", [
    ("ppo", ["system.critic_lr=1e-3"]),  # PPO's critic is a state value V: critic_lr is its name
    ("ppo", ["system.epochs=2"]),  # on-policy epochs are passes over the rollout
    ("pqn", ["system.epochs=2"]),
    ("ppo", ["network.critic_network.pre_torso.layer_sizes=[32]"]),
])
def test_an_old_name_stays_valid_where_it_was_not_renamed(compose, algorithm, overrides):
    from stoix_like.config.compose import check_overrides

    assert check_overrides(algorithm, overrides) is None
    validation.validate(compose(algorithm, overrides))


def test_a_valid_command_line_is_composed_once_by_the_pre_check(monkeypatch):
    """The one-line pre-check composes a command line Hydra accepts once (~0.25 s), not once for its options and
    again for everything; only a refused one is taken apart to name what is wrong."""
    from stoix_like.config import compose

    composed = []
    real_compose = compose.compose_config
    monkeypatch.setattr(compose, "compose_config", lambda *args: composed.append(args) or real_compose(*args))
    assert compose.check_overrides("ppo", ["env=gymnax/acrobot", "arch.seed=3", "system.epochs=2"]) is None
    assert len(composed) == 1
    problem = compose.check_overrides("ppo", ["env=gymnax/acrobot", "system.epoch=2"])
    assert problem is not None and problem.startswith("unknown config key 'system.epoch'; did you mean system.epochs?")


def test_a_saved_config_with_old_names_is_brought_up_to_date(compose):
    """Checkpoints written before the renames store the old names; upgrading one gives the config that today's
    defaults compose, so an old run restores with the same behaviour."""
    from omegaconf import OmegaConf

    from stoix_like.config.upgrade import upgrade_saved_config

    def as_saved_before_the_renames(algorithm, rename_back, drop=(), extra=None):
        current = OmegaConf.to_container(compose(algorithm), resolve=False)

        def flatten(node, prefix=""):  # an empty mapping ({} kwargs) is a leaf here
            for key, value in node.items():
                if isinstance(value, dict) and value:
                    yield from flatten(value, f"{prefix}{key}.")
                else:
                    yield f"{prefix}{key}", value

        flat = dict(flatten(current))
        old = {}
        for key, value in flat.items():
            if key in drop:
                continue
            for new, former in rename_back.items():
                if key == new or key.startswith(new + "."):
                    key = former + key[len(new):]
            old[key] = value
        old.update(extra or {})
        tree = {}
        for key, value in old.items():
            *parents, leaf = key.split(".")
            node = tree
            for parent in parents:
                node = node.setdefault(parent, {})
            node[leaf] = value
        return current, tree

    current, saved = as_saved_before_the_renames(
        "td3", {"system.gradient_steps_per_update": "system.epochs", "system.total_batch_size": "system.batch_size",
                "system.total_buffer_size": "system.buffer_size", "system.q_lr": "system.critic_lr",
                "network.q_network.q_head": "network.q_network.critic_head", "network.q_network": "network.critic_network"},
        drop=("system.target_update_period", "system.prioritized_replay", "system.priority_exponent",
              "system.importance_sampling_exponent", "env.max_episode_steps"))
    assert upgrade_saved_config(saved, "td3") == current

    current, saved = as_saved_before_the_renames(
        "pqn", {"system.epsilon_end": "system.training_epsilon",
                "system.epsilon_decay_fraction": "system.exploration_fraction"},
        drop=("system.epsilon_start", "system.system_name"))
    assert upgrade_saved_config(saved, "pqn") == current

    current, saved = as_saved_before_the_renames(
        "qr_dqn", {"system.gradient_steps_per_update": "system.epochs", "system.huber_delta": "system.quantile_huber_parameter",
                   "system.prioritized_replay": "system.prioritised_replay", "system.total_batch_size": "system.batch_size",
                   "system.total_buffer_size": "system.buffer_size"},
        extra={"system.huber_loss_parameter": 0.0, "system.regularisation_weight": 0.0, "system.batch_size": 32})
    upgraded = upgrade_saved_config(saved, "qr_dqn", batch_slots=2)
    assert upgraded["system"]["total_batch_size"] == 64  # 32 per slot × 2 slots
    assert upgraded == current
    assert upgrade_saved_config(current, "qr_dqn") == current  # an up-to-date config is left as it is

    current, saved = as_saved_before_the_renames("sac", {}, drop=("system.target_entropy_scale",))
    assert current["system"]["target_entropy_scale"] == 1.0  # the default is the −|A| such a run aimed at
    assert upgrade_saved_config(saved, "sac") == current


def test_rainbow_s_equal_epsilons_are_fine(compose):
    validation.validate(compose("rainbow", ["system.epsilon_start=0.0", "system.epsilon_end=0.0"]))


# ------------------------------------------------------------------------------------------ where it is called

def test_training_validates_before_the_budget_and_the_envs(compose, monkeypatch):
    from stoix_like.run import experiment
    from stoix_like.systems.on_policy import ppo

    def must_not_run(*args, **kwargs):
        raise AssertionError("reached long work with an invalid config")

    monkeypatch.setattr(experiment.budget_lib, "make_budget", must_not_run)
    monkeypatch.setattr(experiment.envs_lib, "make", must_not_run)
    with pytest.raises(ConfigError, match=r"^system\.gamma=1\.5 is out of range"):
        experiment.run(compose("ppo", ["system.gamma=1.5"]), ppo.learner_setup, "ppo")


def test_evaluation_validates_before_reading_the_checkpoint():
    from stoix_like.run import evaluate_saved

    with pytest.raises(ConfigError, match=r"^num_episodes=0 is out of range"):
        evaluate_saved.evaluate_checkpoint(compose_config("evaluate", EVALUATE + ["num_episodes=0"]))


# ------------------------------------------------------------------------------ bad inputs on the command line

# (algorithm, overrides, what stderr must name). The first three are the issue's.
BAD_INPUTS = [
    ("ppo", ["system.actor_lr=-1e-3"], "system.actor_lr=-0.001"),
    ("ppo", ["system.gamma=1.5"], "system.gamma=1.5"),
    ("ppo", ["arch.num_eval_episodes=0"], "arch.num_eval_episodes=0"),
    ("ppo", ["system.gae_lambda=1.2"], "system.gae_lambda=1.2"),
    ("ppo", ["system.clip_eps=0"], "system.clip_eps=0"),
    ("ppo", ["system.epochs=2.5"], "system.epochs=2.5"),
    ("ppo", ["system.standardize_advantages=1"], "system.standardize_advantages=1"),
    ("ppo", ["network.actor_network.pre_torso.activation=sigmoid"], "pre_torso.activation=sigmoid"),
    ("ppo", ["network.critic_network.pre_torso.layer_sizes=[64,0]"], "critic_network.pre_torso.layer_sizes=[64, 0]"),
    ("ppo", ["arch.num_evaluation=0"], "arch.num_evaluation=0"),
    ("ppo", ["arch.total_num_envs=0"], "arch.total_num_envs=0"),
    ("ppo", ["arch.num_seeds=0"], "arch.num_seeds=0"),
    ("ppo", ["system.max_grad_norm=0"], "system.max_grad_norm=0"),
    ("ppo", ["arch.heartbeat_timeout_seconds=-5"], "arch.heartbeat_timeout_seconds=-5"),
    ("ppo", ["logger.checkpointing.keep_last=0"], "logger.checkpointing.keep_last=0"),
    ("dqn", ["system.tau=0"], "system.tau=0"),
    ("dqn", ["system.total_buffer_size=32"], "system.total_buffer_size=32"),
    ("dqn", ["system.epsilon_start=0.01"], "system.epsilon_start=0.01"),
    ("dqn", ["system.n_step=0"], "system.n_step=0"),
    ("dqn", ["system.priority_exponent=1.5"], "system.priority_exponent=1.5"),
    ("dqn", ["system.td_target=sarsa"], "system.td_target=sarsa"),
    ("c51", ["network.q_network.q_head.num_atoms=1"], "network.q_network.q_head.num_atoms=1"),
    ("c51", ["network.q_network.q_head.v_min=200.0"], "network.q_network.q_head.v_min=200.0"),
    ("c51", ["system.distribution=gaussian"], "system.distribution=gaussian"),
    ("rainbow", ["system.importance_sampling_exponent=2"], "system.importance_sampling_exponent=2"),
    ("mdqn", ["system.munchausen_clip_value_min=1"], "system.munchausen_clip_value_min=1"),
    ("pqn", ["system.q_lambda=1.5"], "system.q_lambda=1.5"),
    ("pqn", ["system.epsilon_end=2"], "system.epsilon_end=2"),
    ("pqn", ["system.epsilon_decay_fraction=-0.1"], "system.epsilon_decay_fraction=-0.1"),
    ("ppo_penalty", ["system.kl_target=0"], "system.kl_target=0"),
    ("ppo_penalty", ["system.init_kl_coef=-1"], "system.init_kl_coef=-1"),
    ("dpo", ["system.drift_alpha=0"], "system.drift_alpha=0"),
    ("dpo", ["system.drift_beta=-0.6"], "system.drift_beta=-0.6"),
    ("reinforce", ["system.gae_lambda=1.5"], "system.gae_lambda=1.5"),
    ("reinforce", ["system.epochs=0"], "system.epochs=0"),
    ("reinforce", ["system.clip_eps=0.2"], "system.clip_eps"),  # REINFORCE clips nothing: not one of its keys
    ("sac", ["system.gradient_steps_per_update=0"], "system.gradient_steps_per_update=0"),
    ("sac", ["system.target_update_period=0"], "system.target_update_period=0"),
    ("qr_dqn", ["system.huber_delta=-1"], "system.huber_delta=-1"),
    ("sac", ["env=brax/ant", "env.max_episode_steps=0"], "env.max_episode_steps=0"),
    ("sac", ["system.init_alpha=0"], "system.init_alpha=0"),
    ("sac", ["system.num_critics=0"], "system.num_critics=0"),
    ("td3", ["system.policy_frequency=0"], "system.policy_frequency=0"),
    ("td3", ["system.exploration_noise=-0.1"], "system.exploration_noise=-0.1"),
    ("d4pg", ["network.q_network.q_head.v_max=-2000"], "network.q_network.q_head.v_max=-2000"),
    ("mpo", ["system.mean_kl_bound=0"], "system.mean_kl_bound=0"),
    ("mpo", ["system.temperature_kl_bound=-0.1"], "system.temperature_kl_bound=-0.1"),
    ("vmpo", ["system.categorical_kl_bound=0"], "system.categorical_kl_bound=0"),
    ("vmpo", ["system.top_k_fraction=0"], "system.top_k_fraction=0"),
    ("vmpo", ["system.top_k_fraction=1.5"], "system.top_k_fraction=1.5"),
    ("az", ["system.num_simulations=0"], "system.num_simulations=0"),
    ("az", ["system.search_policy=alphago"], "system.search_policy=alphago"),
    ("mz", ["system.num_simulations=0"], "system.num_simulations=0"),
    ("spo", ["system.num_particles=0"], "system.num_particles=0"),
    ("spo", ["system.search_depth=0"], "system.search_depth=0"),
    ("spo", ["system.advantage_temperature=0"], "system.advantage_temperature=0"),
    ("mz", ["system.unroll_steps=0"], "system.unroll_steps=0"),
    ("mz", ["env=gymnax/pendulum"], "Pendulum-v1 has continuous actions; mz searches over discrete ones"),
    # h⁻¹(5) ≈ 35 < 1 / (1 − 0.99): CartPole's returns would not fit the value support
    ("mz", ["system.support_max=5"], "system.support_max=5.0 reaches returns of ±34.6"),
    ("evaluate", EVALUATE + ["num_episodes=0"], "num_episodes=0"),
    ("evaluate", EVALUATE + ["params=worst"], "params=worst"),
    ("ppo", ["+arch.seed=3"], "Could not append to config. An item is already at 'arch.seed'"),  # Hydra's, one line
    # another algorithm's config group (stoix_like/systems/fit.py): named, with the options that fit
    ("ppo", ["network=mlp_dqn"], "network=mlp_dqn has no actor_network, which ppo builds"),
    ("sac", ["network=mlp_ppo"], "network=mlp_ppo has no q_network, which sac builds"),
    ("ppo", ["system=dqn"], "system=dqn is trained by experiments.dqn, not by experiments.ppo"),
    ("td3", ["system=sac"], "or choose system=ddpg / system=td3"),
]
# Old names (docs/glossary.md): each is refused with its new name, on the command line (the pre-check) and when a
# composed config carries it (`+key=...` skips the pre-check, so validate() answers).
RENAMED_INPUTS = [
    ("pqn", ["system.training_epsilon=0.1"], "system.training_epsilon was renamed to system.epsilon_end (for pqn)"),
    ("pqn", ["system.exploration_fraction=0.1"],
     "system.exploration_fraction was renamed to system.epsilon_decay_fraction (for pqn)"),
    ("dqn", ["system.epochs=8"], "system.epochs was renamed to system.gradient_steps_per_update (for dqn)"),
    ("sac", ["system.epochs=8"], "system.epochs was renamed to system.gradient_steps_per_update (for sac)"),
    ("dqn", ["system.buffer_size=1000"], "system.buffer_size was renamed to system.total_buffer_size;"),
    ("td3", ["system.batch_size=128"], "system.batch_size was renamed to system.total_batch_size;"),
    ("sac", ["system.critic_lr=3e-4"], "system.critic_lr was renamed to system.q_lr (for sac)"),
    ("sac", ["+system.critic_lr=3e-4"], "system.critic_lr was renamed to system.q_lr (for sac)"),
    ("d4pg", ["network.critic_network.critic_head.v_max=100"],
     "network.critic_network.critic_head.v_max was renamed to network.q_network.q_head.v_max (for d4pg)"),
    ("td3", ["network.q_network.critic_head._target_=x"],
     "network.q_network.critic_head._target_ was renamed to network.q_network.q_head._target_ (for td3)"),
    ("dqn", ["system.huber_loss_parameter=1.0"], "system.huber_loss_parameter was renamed to system.huber_delta"),
    ("qr_dqn", ["system.quantile_huber_parameter=0.5"],
     "system.quantile_huber_parameter was renamed to system.huber_delta"),
    ("rainbow", ["system.prioritised_replay=False"],
     "system.prioritised_replay was renamed to system.prioritized_replay"),
    ("dqn_reg", ["system.regularisation_weight=0.2"],
     "system.regularisation_weight was renamed to system.regularization_weight"),
    ("sac", ["env=brax/ant", "env.kwargs.episode_length=100"],
     "env.kwargs.episode_length was renamed to env.max_episode_steps"),
    ("pqn", ["env=jumanji/snake", "+env.kwargs.max_episode_steps=100"],
     "env.kwargs.max_episode_steps was renamed to env.max_episode_steps"),
    ("ppo", ["network=mlp"], "network=mlp was renamed to network=mlp_ppo"),
    ("td3", ["network=mlp_dpg"], "network=mlp_dpg was renamed to network=mlp_td3"),
    ("dqn", ["network=mlp_dueling_dqn"], "network=mlp_dueling_dqn was renamed to network=mlp_dqn_dueling"),
    ("rainbow", ["network=mlp_noisy_dueling_c51"], "network=mlp_noisy_dueling_c51 was renamed to network=mlp_rainbow"),
]
BAD_INPUTS += RENAMED_INPUTS
# A CPU suite for a system without a Sebulba learner: what to do instead, not arch=sebulba (which it cannot run).
BAD_INPUTS += [
    ("dqn", ["env=envpool/pong"], "dqn has no Sebulba learner: train ppo or impala on it"),
    ("reinforce", ["arch=sebulba", "env=gymnasium/cartpole"], "reinforce has no Sebulba learner"),
]
# Rows also run as real `python -m experiments.<algo>` processes: the exit code, one line, no traceback.
AS_SUBPROCESS = {"system.actor_lr=-1e-3", "system.gamma=1.5", "arch.num_eval_episodes=0", "system.total_buffer_size=32",
                 "system.init_alpha=0", "num_episodes=0", "system.critic_lr=3e-4", "network=mlp_dpg",
                 "system.top_k_fraction=1.5", "system.num_simulations=0",
                 "system.num_particles=0", "network=mlp_dqn", "system=dqn", "env=envpool/pong"}
# A refusal comes before any long work: no learner compiled (checked in the output) and well within a training
# run's first minute. The bound is loose on purpose: under a loaded CPU (two xdist workers beside other jobs, load
# 8 on 2 cores) a refusal that builds its env first took 14 s; a late refusal (after compiling) takes minutes.
SECONDS = 40.0

# One interpreter runs every row through the entry's `main`, as `python -m experiments.<algo> <overrides>` would.
IN_PROCESS = r"""
import contextlib, importlib, io, json, signal, sys, time

rows, out_path = json.loads(sys.argv[1]), sys.argv[2]

def still_running(*_):
    raise TimeoutError("still running: the command line was not refused")

signal.signal(signal.SIGALRM, still_running)
results = []
for algorithm, overrides in rows:
    main = importlib.import_module(f"experiments.{algorithm}").main  # imported before the clock starts
    sys.argv = [f"experiments/{algorithm}.py", *overrides]
    stdout, stderr, code = io.StringIO(), io.StringIO(), 0
    start = time.perf_counter()
    signal.alarm(60)
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            main()
    except SystemExit as exit:
        code = exit.code
    except BaseException as error:
        code = f"raised {type(error).__name__}: {error}"
    finally:
        signal.alarm(0)
    results.append(dict(rc=code, stdout=stdout.getvalue(), stderr=stderr.getvalue(),
                        seconds=time.perf_counter() - start))
with open(out_path, "w") as out:
    json.dump(results, out)
"""


@pytest.fixture(scope="module")
def in_process_results(tmp_path_factory):
    where = tmp_path_factory.mktemp("bad_inputs")
    rows = [(algorithm, overrides) for algorithm, overrides, _ in BAD_INPUTS]
    completed = run_python(["-c", IN_PROCESS, json.dumps(rows), str(where / "results.json")], cwd=where, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    results = json.loads((where / "results.json").read_text())
    return {(algorithm, tuple(overrides)): result for (algorithm, overrides), result in zip(rows, results)}


def check_refusal(rc, stdout: str, stderr: str, seconds: float, named: str) -> None:
    assert rc == 2, f"rc={rc}\n{stderr[-3000:]}"
    assert "Traceback" not in stderr, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ") and named in lines[0], lines[0]
    assert "compiled the learner" not in stdout and "replay ratio" not in stdout, stdout
    assert seconds < SECONDS, f"refused after {seconds:.1f}s"


def test_the_table_covers_enough_algorithms():
    assert len(BAD_INPUTS) >= 25 and len({algorithm for algorithm, _, _ in BAD_INPUTS}) >= 5
    assert len([row for row in BAD_INPUTS if row[1][-1] in AS_SUBPROCESS]) >= 5


@pytest.mark.parametrize("algorithm, overrides, named", BAD_INPUTS,
                         ids=[f"{algorithm}:{' '.join(overrides)}" for algorithm, overrides, _ in BAD_INPUTS])
def test_a_bad_value_is_refused_in_one_line(in_process_results, algorithm, overrides, named):
    result = in_process_results[(algorithm, tuple(overrides))]
    check_refusal(result["rc"], result["stdout"], result["stderr"], result["seconds"], named)


SUBPROCESS_ROWS = [row for row in BAD_INPUTS if row[1][-1] in AS_SUBPROCESS]


@pytest.mark.parametrize("algorithm, overrides, named", SUBPROCESS_ROWS,
                         ids=[f"{algorithm}:{' '.join(overrides)}" for algorithm, overrides, _ in SUBPROCESS_ROWS])
def test_a_bad_value_exits_2_from_a_real_command_line(python_subprocess, tmp_path, algorithm, overrides, named):
    start = time.perf_counter()
    completed = python_subprocess(["-m", f"experiments.{algorithm}", *overrides], cwd=tmp_path, timeout=120)
    seconds = time.perf_counter() - start
    check_refusal(completed.returncode, completed.stdout, completed.stderr, seconds, named)
    print(f"{algorithm} {' '.join(overrides)}: rc {completed.returncode} in {seconds:.1f}s")


@pytest.mark.parametrize("algorithm, group, option", [
    ("dqn", "system", "ddqn"), ("dqn", "system", "mdqn"), ("ddpg", "system", "td3"), ("ppo", "network", "mlp_dpo"),
    ("ppo", "network", "cnn_ppo"), ("impala", "network", "mlp_impala_shared"), ("dqn", "network", "mlp_dqn_dueling"),
    ("rec_ppo", "network", "gru_rec_ppo"), ("ppo", "network", "mlp_ppo"), ("ppo", "network", "resnet_ppo"),
    ("ppo", "network", "cnn_ppo_nature"), ("ppo", "network", "cnn_ppo_nature_shared"),
    ("impala", "network", "resnet_impala"),
])
def test_an_option_of_the_same_algorithm_fits(compose, algorithm, group, option):
    config = compose(algorithm, [f"{group}={option}"])
    assert fit.misfit(algorithm, config, option if group == "network" else None) is None


# ------------------------------------------------------------------------------------------ --describe

def test_describe_lists_every_key_with_its_type_default_and_meaning(python_subprocess, tmp_path):
    completed = python_subprocess(["-m", "experiments.sac", "--describe"], cwd=tmp_path, timeout=120)
    assert completed.returncode == 0, completed.stderr[-3000:]
    lines = completed.stdout.splitlines()
    config = compose_config("sac", base_exp_path=tmp_path)
    described = [line.split()[0] for line in lines[1:]]
    assert described == [key for key, _ in validation.leaves(config)]
    q_lr = next(line for line in lines if line.startswith("system.q_lr "))
    assert "greater than 0" in q_lr and f" {config.system.q_lr:g} " in q_lr
    assert "the q_network's (a Q-function) learning rate" in q_lr
    assert "compiled the learner" not in completed.stdout and "replay ratio" not in completed.stdout


def test_describe_refuses_an_old_option_in_one_line(python_subprocess, tmp_path):
    completed = python_subprocess(["-m", "experiments.td3", "--describe", "network=mlp_dpg"], cwd=tmp_path, timeout=120)
    assert completed.returncode == 2 and completed.stderr.strip() == "error: network=mlp_dpg was renamed to network=mlp_td3."


# ------------------------------------------------------------------------------------------ typed composition

def test_composition_types_every_group_by_its_schema(compose):
    from omegaconf import OmegaConf
    from omegaconf.errors import ValidationError

    from stoix_like.config import schemas

    config = compose("qr_dqn")
    assert OmegaConf.get_type(config.system) is schemas.QRDQNSchema
    assert OmegaConf.get_type(config.arch) is schemas.ArchSchema
    assert OmegaConf.get_type(config.env) is schemas.EnvSchema
    assert OmegaConf.get_type(config.logger) is schemas.LoggerSchema
    with pytest.raises(ValidationError):
        config.system.gradient_steps_per_update = "many"


def test_a_whole_number_written_as_a_float_reaches_the_run_as_an_int(python_subprocess, tmp_path):
    completed = python_subprocess(["-m", "experiments.ppo", "arch.total_timesteps=2e6", "--cfg", "job"],
                                  cwd=tmp_path, timeout=120)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "total_timesteps: 2000000\n" in completed.stdout
