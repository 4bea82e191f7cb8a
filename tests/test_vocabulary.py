"""One name per idea (docs/glossary.md): every shipped config/<algo>.yaml, composed with Hydra, speaks one
vocabulary. A shared block of keys is all-or-nothing in each system, no system carries a key outside the
vocabulary, learning rates are named after the network they train, and file and key names follow one scheme.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import shutil
import re

import pytest
from omegaconf import OmegaConf
from conftest import compose_config

from stoix_like.config import validation, schemas
from stoix_like.config.compose import CONFIG_DIR, available_options

ALGORITHMS = sorted(name[: -len(".yaml")] for name in os.listdir(CONFIG_DIR)
                    if name.endswith(".yaml") and name not in ("hydra_settings.yaml", "evaluate.yaml"))

# A block is an idea several systems share: a system that has one of its keys has all of them, by these names.
BLOCKS = {
    "rollout": {"rollout_length"},
    "optimizer": {"decay_learning_rates", "max_grad_norm"},
    "discount": {"gamma"},
    "observation normalization": {"normalize_observations"},
    "on-policy batches": {"epochs", "num_minibatches"},
    "replay": {"warmup_rollout_length", "gradient_steps_per_update", "total_batch_size", "total_buffer_size"},
    "n-step returns": {"n_step"},
    "sequence replay": {"sequence_length"},
    "prioritized replay": {"prioritized_replay", "priority_exponent", "importance_sampling_exponent"},
    "epsilon-greedy exploration": {"epsilon_start", "epsilon_end", "epsilon_decay_fraction", "evaluation_epsilon"},
    "target network": {"tau", "target_update_period"},
    "deterministic policy": {"policy_frequency", "target_policy_noise", "target_noise_clip", "exploration_noise"},
    "munchausen": set(validation.MUNCHAUSEN_KEYS),
    "dual variables": {"init_temperature", "init_kl_multiplier", "temperature_kl_bound", "mean_kl_bound",
                       "scale_kl_bound", "categorical_kl_bound"},
    "tree search": {"search_policy", "num_simulations", "max_depth"},
}
# Every system has these blocks.
EVERY_SYSTEM = ("rollout", "optimizer", "discount", "observation normalization")
# Learning rates are named after the network they train (a Q-function is a q_network everywhere).
LEARNING_RATES = {"actor_lr": "actor_network", "critic_lr": "critic_network", "q_lr": "q_network",
                  "alpha_lr": None,  # SAC's entropy temperature is a parameter, not a network
                  "dual_lr": None,  # nor are MPO's and V-MPO's temperature and KL multipliers
                  # MuZero's model is three networks trained as one
                  "model_lr": ("representation_network", "dynamics_network", "prediction_network")}
# Keys of one system or a few, outside any block.
OWN_KEYS = {"system_name", "td_target", "distribution", "huber_delta", "regularization_weight", "num_critics",
            "init_alpha", "target_entropy_scale", "reward_scale", "q_lambda", "gae_lambda", "clip_eps",
            "clip_value_loss", "ent_coef", "vf_coef",
            "standardize_advantages", "recompute_advantages", "advantage_temperature", "max_advantage_weight",
            "num_sampled_actions", "top_k_fraction",
            "kl_target", "init_kl_coef", "drift_alpha", "drift_beta",
            "burn_in", "priority_max_weight", "epsilon_actor_exponent",  # R2D2's
            "rho_clip", "c_clip",  # IMPALA's V-trace
            "unroll_steps", "num_atoms", "support_max", "max_abs_reward", "bootstrap_from",
            "evaluate_with_search",  # MuZero's
            "num_particles", "search_depth", "resample_period"}  # SPO's particle filter
VOCABULARY = set().union(*BLOCKS.values(), LEARNING_RATES, OWN_KEYS)
BRITISH = re.compile(r"(prioritis|regularis|normalis|standardis|optimis|parameteris)")


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    return {name: compose_config(name, base_exp_path=results) for name in ALGORITHMS}


def test_the_blocks_do_not_overlap():
    names = [key for block in BLOCKS.values() for key in block] + list(LEARNING_RATES) + list(OWN_KEYS)
    assert len(names) == len(set(names))


def test_a_system_has_all_of_a_block_or_none_of_it(configs):
    partial = {}
    for name, config in configs.items():
        keys = set(config.system)
        for block, block_keys in BLOCKS.items():
            if keys & block_keys and not block_keys <= keys:
                partial[f"{name}: {block}"] = sorted(block_keys - keys)
    assert not partial, f"blocks with keys missing: {partial}"


def test_every_system_has_the_blocks_every_system_needs(configs):
    for name, config in configs.items():
        for block in EVERY_SYSTEM:
            assert BLOCKS[block] <= set(config.system), (name, block)


def test_no_system_key_lies_outside_the_vocabulary(configs):
    outside = {name: sorted(set(config.system) - VOCABULARY) for name, config in configs.items()}
    assert not {name: keys for name, keys in outside.items() if keys}, outside


def test_learning_rates_are_named_after_the_network_they_train(configs):
    for name, config in configs.items():
        rates = [key for key in config.system if key.endswith("_lr")]
        assert rates, name
        for rate in rates:
            assert rate in LEARNING_RATES, (name, rate)
            trained = LEARNING_RATES[rate]
            for network in (trained,) if isinstance(trained, str) else trained or ():
                assert network in config.network, f"{name}: {rate} but no network.{network}"
        for network in config.network:
            trained_by = [rate for rate, trains in LEARNING_RATES.items()
                          if trains == network or (isinstance(trains, tuple) and network in trains)]
            assert set(trained_by) & set(rates), f"{name}: network.{network} has no learning rate"


def test_every_system_names_itself(configs):
    for name, config in configs.items():
        assert config.system.system_name == name


def test_sizes_summed_over_devices_and_slots_say_total(configs):
    for name, config in configs.items():
        for key in config.system:
            assert not key.endswith("_size") or key.startswith("total_"), (name, key)


def test_keys_are_spelt_the_american_way(configs):
    for name, config in configs.items():
        british = [key for key, _ in validation.leaves(config) if BRITISH.search(key)]
        assert not british, (name, british)


def test_network_files_are_named_torso_system_variant():
    systems = "|".join(sorted(ALGORITHMS, key=len, reverse=True))  # longest first: qr_dqn before dqn
    # at most two variant words: a network, then how its heads share it (cnn_ppo_nature_shared)
    pattern = re.compile(rf"^(mlp|cnn|resnet|lstm|gru)_({systems})(_[a-z0-9]+){{0,2}}$")
    misnamed = [option for option in available_options("network") if not pattern.match(option)]
    assert not misnamed, misnamed


def test_every_env_has_the_one_time_limit_key(tmp_path):
    for env in available_options("env"):
        config = compose_config("ppo", [f"env={env}"], base_exp_path=tmp_path)
        assert "max_episode_steps" in config.env, env
        assert not {"episode_length", "max_episode_steps"} & set(config.env.kwargs or {}), env


def test_each_system_config_has_exactly_the_keys_of_its_schema(configs):
    """The schema (stoix_like/config/schemas.py) lists the keys the system's code reads; its YAML holds their values."""
    for name, config in configs.items():
        schema = schemas.SYSTEM_SCHEMAS[str(config.system.system_name)]
        assert set(config.system) == schemas.schema_keys(name), (name, schema.__name__)


def test_the_blocks_here_are_the_schema_blocks():
    """The vocabulary this test checks and the schema's blocks are the same sets of names."""
    block_classes = {"replay": schemas.ReplayBlock, "n-step returns": schemas.NStepReturnsBlock,
                     "sequence replay": schemas.SequenceReplayBlock,
                     "prioritized replay": schemas.PrioritizedReplayBlock,
                     "epsilon-greedy exploration": schemas.EpsilonGreedyBlock,
                     "target network": schemas.TargetNetworkBlock, "on-policy batches": schemas.OnPolicyBatchesBlock,
                     "deterministic policy": schemas.DeterministicPolicyBlock, "munchausen": schemas.MunchausenBlock,
                     "dual variables": schemas.DualVariablesBlock, "tree search": schemas.TreeSearchBlock}
    for block, schema in block_classes.items():
        assert BLOCKS[block] == {field.name for field in dataclasses.fields(schema)}, block


def test_arch_env_and_logger_have_exactly_the_keys_of_their_schemas(configs, tmp_path):
    def keys(schema, prefix=""):
        for schema_field in dataclasses.fields(schema):
            nested = schema_field.default_factory
            if nested is not dataclasses.MISSING and dataclasses.is_dataclass(nested):
                yield from keys(nested, f"{prefix}{schema_field.name}.")
            else:
                yield f"{prefix}{schema_field.name}"

    def shipped_keys(node, prefix=""):
        for name, value in node.items():
            # env kwargs go to the suite as they are; arch.pbt.ranges holds the user's own keys
            if isinstance(value, dict) and name not in ("kwargs", "ranges"):
                yield from shipped_keys(value, f"{prefix}{name}.")
            else:
                yield f"{prefix}{name}"

    from omegaconf import OmegaConf

    configs = [compose_config("ppo", [f"env={env}"], base_exp_path=tmp_path) for env in available_options("env")]
    for config in configs:
        container = OmegaConf.to_container(config, resolve=False)
        for group, schema in schemas.GROUP_SCHEMAS.items():
            if group:
                assert set(shipped_keys(container[group])) == set(keys(schema)), group
    evaluate = OmegaConf.to_container(compose_config("evaluate", ["checkpoint=x"]), resolve=False)
    assert set(shipped_keys({key: value for key, value in evaluate.items() if key != "hydra"})) == set(
        keys(schemas.EvaluateSchema))


# ------------------------------------------------------------------------------------------ tuned defaults

def _tuned_files():
    root = pathlib.Path(CONFIG_DIR) / "tuned"
    return sorted(root.rglob("*.yaml")) if root.exists() else []


@pytest.mark.parametrize("path", _tuned_files(), ids=lambda p: str(p.relative_to(pathlib.Path(CONFIG_DIR) / "tuned")))
def test_every_tuned_file_is_composed_on_its_task(path):
    """config/tuned/<algo>/<suite>/<task>.yaml names a real algorithm and env, and `env=<suite>/<task>` composes
    exactly its values over the algorithm's defaults; config/tuned/<algo>/network/<name>.yaml likewise for a
    network variant and `network=<name>`."""
    algorithm, *parts = path.relative_to(pathlib.Path(CONFIG_DIR) / "tuned").with_suffix("").parts
    group, choice = ("network", parts[1]) if parts[0] == "network" else ("env", "/".join(parts))
    assert (pathlib.Path(CONFIG_DIR) / f"{algorithm}.yaml").exists(), f"no config/{algorithm}.yaml"
    assert (pathlib.Path(CONFIG_DIR) / group / f"{choice}.yaml").exists(), f"no config/{group}/{choice}.yaml"
    composed = compose_config(algorithm, [f"{group}={choice}"])
    for key, value in _tuned_leaves(path):
        assert OmegaConf.select(composed, key) == value, f"{key} is not {value} with {group}={choice}"


def _tuned_leaves(path: pathlib.Path):
    """A tuned file's (key, value) leaves, those of the tuned files its defaults list composes first included
    (config/tuned/td3/brax/ant.yaml is halfcheetah's recipe), its own last so that they win."""
    content = OmegaConf.load(path)
    leaves = {}
    for entry in content.get("defaults", []):
        if entry != "_self_":
            name = str(entry).split("@")[0]  # relative to the tuned group, or absolute (/tuned/...)
            included = pathlib.Path(CONFIG_DIR) / (name[1:] if name.startswith("/") else f"tuned/{name}")
            included = included.with_suffix(".yaml")
            assert included.exists(), f"{path}: its default {entry} is no file under config/tuned"
            leaves.update(_tuned_leaves(included))
    leaves.update(validation.leaves(OmegaConf.masked_copy(content, [k for k in content if k != "defaults"])))
    return leaves.items()


def test_tuned_defaults_follow_the_env_and_yield_to_the_command_line(tmp_path):
    """The mechanism itself, on a copy of config/ with one tuned file: chosen env -> overlay; other env -> none."""
    from hydra import compose, initialize_config_dir

    config_dir = tmp_path / "config"
    shutil.copytree(CONFIG_DIR, config_dir)
    tuned = config_dir / "tuned" / "ppo" / "gymnax" / "pendulum.yaml"
    tuned.parent.mkdir(parents=True, exist_ok=True)
    tuned.write_text("arch:\n  total_num_envs: 8\nsystem:\n  actor_lr: 0.003\n")
    with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
        on_task = compose("ppo", overrides=["env=gymnax/pendulum"])
        elsewhere = compose("ppo", overrides=["env=gymnax/acrobot"])
        overridden = compose("ppo", overrides=["env=gymnax/pendulum", "system.actor_lr=0.1"])
    assert (on_task.arch.total_num_envs, on_task.system.actor_lr) == (8, 0.003)
    assert (elsewhere.arch.total_num_envs, elsewhere.system.actor_lr) == (4, 2.5e-4)
    assert overridden.system.actor_lr == 0.1
