"""Every continuous-action system of the policy-optimisation and continuous-control families learns on a brax env:
one learn call of two updates each, the learners of one env in one process (so both action dimensions meet
on-policy and replay updates).

Brax's physics dominates the cost (it is compiled into every learner and evaluator: ~70 CPU-seconds per entry-point
run), so the learners run with XLA's backend optimisation off and evaluate nothing; the entry points with evaluation
on brax are checked once per family elsewhere (PPO in test_end_to_end.py, SAC in test_continuous.py). The check is
that each learner compiles for the env's action dimension, its losses stay finite, and its parameters move.
"""

from __future__ import annotations

import os

import pytest
from conftest import run_python, unoptimized_xla

TINY = ["env.max_episode_steps=16", "arch.total_num_envs=2", "arch.num_evaluation=1", "arch.num_eval_episodes=1",
        "network.actor_network.pre_torso.layer_sizes=[16]"]
ON_POLICY = ["system.rollout_length=4", "system.num_minibatches=2", "arch.total_timesteps=16",
             "network.critic_network.pre_torso.layer_sizes=[16]"]
REPLAY = ["system.rollout_length=4", "system.warmup_rollout_length=0", "arch.total_timesteps=16",
          "system.gradient_steps_per_update=1", "system.total_buffer_size=64"]
DETERMINISTIC_ACTOR = [*REPLAY, "system.total_batch_size=8", "network.q_network.pre_torso.layer_sizes=[16]"]
SMOKE_OF = {
    "reinforce": ON_POLICY,
    "ppo_penalty": ON_POLICY,
    "dpo": ON_POLICY,
    # V-MPO's defaults are CartPole's (discrete): continuous actions take the Gaussian KL bounds instead
    "vmpo": [*ON_POLICY, "system.epochs=1", "system.categorical_kl_bound=null", "system.mean_kl_bound=0.01",
             "system.scale_kl_bound=1e-4"],
    "mpo": [*REPLAY, "system.total_batch_size=8", "system.num_sampled_actions=4",
            "network.q_network.pre_torso.layer_sizes=[16]"],
    # no warm-up: the first rollout stores 4 steps per env, one sequence of 4 each
    "awr": [*REPLAY, "system.sequence_length=4", "system.total_batch_size=2",
            "network.critic_network.pre_torso.layer_sizes=[16]"],
    # the continuous-control family beside SAC, whose entry point runs on brax in test_continuous.py
    "td3": DETERMINISTIC_ACTOR,
    "ddpg": DETERMINISTIC_ACTOR,
    "d4pg": [*DETERMINISTIC_ACTOR, "system.n_step=2"],
}
ENVS = {"brax/ant": 8, "brax/halfcheetah": 6}  # env -> its action dimension
# Each system on one env, not both: a system that compiles for one brax action dimension compiles for another,
# and the six learners on both envs cost ~370 of CI's worker-seconds for no further check.
# Alternating down SMOKE_OF: ant takes REINFORCE, DPO, MPO, TD3 and D4PG; halfcheetah PPO-penalty, V-MPO, AWR and
# DDPG.
SYSTEMS_OF = {env_name: list(SMOKE_OF)[i::len(ENVS)] for i, env_name in enumerate(ENVS)}

SMOKE = r"""
import json, sys, time
import jax, numpy as np
sys.path.insert(0, sys.argv[2])  # tests/, for conftest
from conftest import compose_config
from stoix_like import envs as envs_lib
from stoix_like.learner import budget as budget_lib
from stoix_like.runtime import parallel
from stoix_like.systems import system_module

smoke_of, env_names = json.loads(sys.argv[3]), json.loads(sys.argv[4])
for env_name in env_names:
    train_env = None  # one env object per suite task: the jitted initial states compile once for the systems sharing them
    for algorithm, overrides in smoke_of.items():
        start = time.perf_counter()
        config = compose_config(algorithm, [f"env={env_name}", *overrides], base_exp_path=sys.argv[1])
        budget = budget_lib.make_budget(config)
        train_env = train_env or envs_lib.make(config.env)[0]
        setup = system_module(algorithm).learner_setup(train_env, jax.random.PRNGKey(0), config, budget)
        state, output = parallel.distribute(setup.learner_fn)(setup.learner_state)
        metrics = {name: np.asarray(value) for name, value in output.train_metrics.items()}
        updates = next(iter(metrics.values())).shape[-1]
        finite = all(np.isfinite(value).all() for value in metrics.values())
        moved = any((np.asarray(a) != np.asarray(b)).any() for a, b in zip(
            jax.tree_util.tree_leaves(state.params), jax.tree_util.tree_leaves(setup.learner_state.params)))
        print(f"smoke: {algorithm} {env_name} action_dim={train_env.action_space.action_dim} updates={updates} "
              f"finite={finite} moved={moved}", flush=True)
        print(f"took {algorithm} {env_name} {time.perf_counter() - start:.1f}s", flush=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize("env_name", list(ENVS))  # one test per env, so that two workers can share them
def test_every_continuous_action_learner_runs_on_brax(tmp_path, env_name):
    import json

    # run in tmp_path: brax's MuJoCo model loader writes MUJOCO_LOG.TXT into the working directory
    result = run_python(["-c", SMOKE, str(tmp_path), os.path.dirname(os.path.abspath(__file__)),
                         json.dumps({algorithm: [*TINY, *SMOKE_OF[algorithm]] for algorithm in SYSTEMS_OF[env_name]}),
                         json.dumps([env_name])], cwd=tmp_path, env=unoptimized_xla(),
                        timeout=1500)
    assert result.returncode == 0, result.stderr[-3000:]
    print("\n".join(line for line in result.stdout.splitlines() if line.startswith("took ")))
    lines = [line[len("smoke: "):] for line in result.stdout.splitlines() if line.startswith("smoke: ")]
    # 16 steps of 2 envs in rollouts of 4: two updates in the one learn call
    expected = [f"{algorithm} {env_name} action_dim={ENVS[env_name]} updates=2 finite=True moved=True"
                for algorithm in SYSTEMS_OF[env_name]]
    assert lines == expected, result.stdout[-3000:]

