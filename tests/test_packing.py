"""ops/packing: a tree packed into uint32 words comes back bit for bit, alone or stacked by a loop, and the on-policy
rollout that writes its steps packed returns the very trajectory it returned field by field."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stoix_like import envs as envs_lib
from stoix_like.envs import VmapWrapper
from stoix_like.ops import packing
from stoix_like.systems.on_policy import rollout
from stoix_like.types import OnPolicyLearnerState


class Record(NamedTuple):
    floats: jax.Array
    nested: Any


def awkward_record() -> Record:
    """Every kind of leaf a rollout step can hold, with the bit patterns a float conversion would lose."""
    nan_with_payload = np.array([0x7FC12345], np.uint32).view(np.float32)[0]
    floats = np.array([0.0, -0.0, np.inf, -np.inf, 1e-45, 3.4e38, nan_with_payload, -1.5], np.float32)
    return Record(
        floats=jnp.asarray(floats),
        nested={
            "done": jnp.array([True, False, True]),
            "action": jnp.array([[-(2 ** 31), 2 ** 31 - 1], [0, -1]], jnp.int32),
            "words": jnp.array([0, 2 ** 32 - 1], jnp.uint32),
            "small_ints": (jnp.array([-128, 127, -1], jnp.int8), jnp.array([0, 255], jnp.uint8),
                           jnp.array([-32768, 32767], jnp.int16), jnp.array([65535], jnp.uint16)),
            "half": (jnp.array([1.0, -0.0, 65504.0, np.nan], jnp.float16),
                     jnp.array([1.0, -3.0e38, 1e-38], jnp.bfloat16)),
            "scalar": jnp.float32(7.25),
        })


def assert_same_bits(got: Any, want: Any) -> None:
    got_leaves, got_tree = jax.tree_util.tree_flatten(got)
    want_leaves, want_tree = jax.tree_util.tree_flatten(want)
    assert got_tree == want_tree
    for got_leaf, want_leaf in zip(got_leaves, want_leaves):
        got_leaf, want_leaf = np.asarray(got_leaf), np.asarray(want_leaf)
        assert got_leaf.dtype == want_leaf.dtype and got_leaf.shape == want_leaf.shape
        assert got_leaf.tobytes() == want_leaf.tobytes()


def test_a_record_round_trips_bit_for_bit():
    record = awkward_record()
    words, layout = packing.pack(record)
    assert words.dtype == jnp.uint32 and words.shape == (layout.num_words,)
    assert_same_bits(jax.jit(lambda w: packing.unpack(w, layout))(words), record)


def test_records_stacked_by_a_loop_unpack_into_stacked_leaves():
    """What the rollout does: a scan stacks one packed record per step; unpacked, each leaf gains the step axis,
    exactly as if the scan had stacked the record's fields one by one."""
    record = awkward_record()
    layouts = []

    def step(carry, _):
        record_now = jax.tree_util.tree_map(lambda leaf: leaf + carry.astype(leaf.dtype), record)
        words, layout = packing.pack(record_now)
        layouts.append(layout)
        return carry + 1, (words, record_now)

    _, (words, fields) = jax.lax.scan(step, jnp.int32(0), None, length=4)
    assert_same_bits(packing.unpack(words, layouts[-1]), fields)


def test_64_bit_leaves_take_two_words_each():
    with jax.enable_x64(True):
        record = {"count": jnp.array([-(2 ** 63), 2 ** 63 - 1], jnp.int64),
                  "value": jnp.array([np.pi, -0.0], jnp.float64)}
        words, layout = packing.pack(record)
        assert layout.num_words == 8
        assert_same_bits(packing.unpack(words, layout), record)


def test_empty_trees_and_refusals():
    words, layout = packing.pack({})
    assert words.shape == (0,) and packing.unpack(words, layout) == {}
    with pytest.raises(TypeError, match="complex"):
        packing.pack(jnp.array([1 + 2j]))
    with pytest.raises(TypeError, match="key_data"):
        packing.pack({"key": jax.random.key(0)})
    words, layout = packing.pack(jnp.zeros(3))
    with pytest.raises(ValueError, match="2 words given, the layout has 3"):
        packing.unpack(words[:2], layout)


def test_the_rollout_returns_the_trajectory_it_returned_field_by_field(monkeypatch):
    """The same acting loop with packing switched off (each field stacked on its own, as before) gives the same
    trajectory and the same final state, bit for bit."""
    train_env, _ = envs_lib.make({"suite": "gymnax", "scenario": {"name": "CartPole-v1"}, "kwargs": {}})
    env = VmapWrapper(train_env)
    num_envs, num_actions = 6, train_env.action_space.num_actions
    env_state, timestep = env.reset(jax.random.split(jax.random.PRNGKey(1), num_envs))
    state = OnPolicyLearnerState(params=jnp.float32(0.3), opt_states=(), key=jax.random.PRNGKey(2),
                                 env_state=env_state, timestep=timestep, obs_norm=())

    def act(params, observation, key):
        action = jax.random.randint(key, (num_envs,), 0, num_actions)
        extras = {"log_prob": params * observation.agent_view[:, 0], "first": observation.agent_view[:, :1] > 0}
        return action, action, extras

    def collect():
        return jax.jit(lambda s: rollout.collect_rollout(env, act, s, rollout_length=23, unroll=1))(state)

    packed = collect()
    monkeypatch.setattr(packing, "pack", lambda tree: (tree, None))
    monkeypatch.setattr(packing, "unpack", lambda records, layout: records)
    field_by_field = collect()
    assert_same_bits(packed, field_by_field)
    assert np.asarray(packed[1].done).any()  # episodes ended inside the rollout: resets were written too
