"""The system contract (stoix_like/learner/system_contract.py) holds for every registered system, statically checkable parts
checked here at run time too: what each module supplies, what `get_learner_fn` means, which learner-state fields
the shared on-policy helpers read."""

from __future__ import annotations

import ast
import inspect
import pathlib
import typing

import pytest

from stoix_like.learner import system_contract
from stoix_like.systems import MODULE_OF, off_policy, system_module
from stoix_like.systems.on_policy import rollout
from stoix_like.systems.on_policy.ppo_penalty import PPOPenaltyLearnerState
from stoix_like.systems.on_policy.pqn import PQNLearnerState
from stoix_like.systems.on_policy.recurrent_ppo import RecurrentLearnerState
from stoix_like.types import OnPolicyLearnerState

SYSTEM_MODULES = sorted(set(MODULE_OF.values()))
# every module that builds a learner: the systems and the family modules they share
LEARNER_BUILDERS = ["policy_gradient", "recurrent_ppo", "pqn", "vmpo", "off_policy", "alphazero"]


@pytest.mark.parametrize("algorithm", sorted(MODULE_OF))
def test_every_registered_system_supplies_the_system_protocol(algorithm):
    assert isinstance(system_module(algorithm), system_contract.System)


def _entry_calls(path: pathlib.Path) -> list:
    """The `hydra_entry(...)` calls in an `experiments/<name>.py`, as (positional args, keyword names)."""
    calls = [node for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Call)
             and getattr(node.func, "id", None) == "hydra_entry"]
    return [([ast.literal_eval(arg) for arg in call.args], [kw.arg for kw in call.keywords]) for call in calls]


def test_one_registry_every_entry_names_its_algorithm_only():
    """`systems.MODULE_OF` is the only name -> module map: each algorithm's entry passes its name alone, and every
    registered algorithm has an entry."""
    experiments = pathlib.Path(__file__).resolve().parents[1] / "experiments"
    entries = {path.stem: _entry_calls(path) for path in experiments.glob("*.py")}
    algorithm_entries = {name: calls for name, calls in entries.items() if name in MODULE_OF}
    assert set(algorithm_entries) == set(MODULE_OF)
    for name, calls in algorithm_entries.items():
        assert calls == [([name], [])], f"experiments/{name}.py should be `hydra_entry({name!r})`, got {calls}"


@pytest.mark.parametrize("module_name", SYSTEM_MODULES + ["off_policy", "on_policy.rollout", "on_policy.policy_gradient",
                                                          "q_learning.value_based",
                                                          "actor_critic.deterministic_policy_gradient",
                                                          "actor_critic.continuous_control", "dual_variables",
                                                          "search.mcts"])
def test_get_learner_fn_means_one_thing_everywhere(module_name):
    module = __import__(f"stoix_like.systems.{module_name}", fromlist=["_"])
    get_learner_fn = getattr(module, "get_learner_fn", None)
    if module_name.split(".")[-1] in LEARNER_BUILDERS:
        assert get_learner_fn is not None
    if get_learner_fn is not None:
        assert typing.get_type_hints(get_learner_fn)["return"] is system_contract.Learner


def test_off_policy_warm_up_and_batch_steps_have_their_own_names():
    assert typing.get_type_hints(off_policy.make_warmup_fn)["return"] is not system_contract.Learner
    for module_name in ("actor_critic.td3", "actor_critic.d4pg", "actor_critic.sac", "actor_critic.awr",
                        "actor_critic.mpo"):
        module = __import__(f"stoix_like.systems.{module_name}", fromlist=["_"])
        assert typing.get_type_hints(module.make_learn_from_batch)["return"] is off_policy.LearnFromBatch


@pytest.mark.parametrize("state_type", [OnPolicyLearnerState, PQNLearnerState, PPOPenaltyLearnerState,
                                        RecurrentLearnerState])
def test_on_policy_learner_states_have_every_field_the_shared_helpers_read(state_type):
    members = {name for name, _ in inspect.getmembers(rollout.OnPolicyState) if not name.startswith("__")}
    properties = {name for name in members if isinstance(getattr(rollout.OnPolicyState, name), property)}
    assert properties == {"params", "opt_states", "obs_norm", "key", "env_state", "timestep"}
    assert properties <= set(state_type._fields)
