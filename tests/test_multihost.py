"""Many hosts, for real on one machine: two processes on 127.0.0.1 with gloo CPU collectives and two forced
CPU devices each train one PPO run together. Both end with identical params, the global step count is the
budget, and only process 0 writes logs and checkpoints (the whole state of all four devices).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import jax
import numpy as np
import orbax.checkpoint as ocp
from conftest import REPO_ROOT

SMALL_NETWORK = ["network.actor_network.pre_torso.layer_sizes=[16]",
                 "network.critic_network.pre_torso.layer_sizes=[16]"]
# 4 devices × 1 batch × 2 envs; 2 evaluations × 1 update × 8 steps × 8 envs = 128 steps
TOTAL = 128
RUN = ["arch.total_num_envs=8", "system.rollout_length=8", "system.num_minibatches=2", "arch.num_evaluation=2",
       "arch.num_eval_episodes=2", f"arch.total_timesteps={TOTAL}", "logger.checkpointing.save_model=True"
       ] + SMALL_NETWORK

PROCESS = """
import json, sys
sys.path.insert(0, TESTS)
import jax, numpy as np
from conftest import compose_config
from stoix_like import experiment
from stoix_like.systems import ppo

def flat(tree):  # leaf path -> leaf, the path spelt the same for a live state and an orbax restore
    def name(key):
        return str(getattr(key, "name", getattr(key, "key", getattr(key, "idx", key))))
    return {".".join(map(name, path)): leaf for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]}

process_id, port, work = int(sys.argv[1]), sys.argv[2], sys.argv[3]
config = compose_config("ppo", RUN + ["arch.coordinator_address=127.0.0.1:" + port, "arch.num_processes=2",
                                          "arch.process_id=" + str(process_id)], work + "/process_" + str(process_id))
result = experiment.train(config, ppo.learner_setup, "ppo")
state = jax.device_get(result.learner_state)
np.savez(work + "/state_" + str(process_id) + ".npz", **flat(state))
np.savez(work + "/params_" + str(process_id) + ".npz", **flat(state.params))
print("RESULT " + json.dumps(dict(steps=result.steps_done, devices=jax.device_count(),
                                  local_devices=jax.local_device_count(), processes=jax.process_count())))
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_two_processes_train_one_run(tmp_path, compilation_cache_dir):
    environment = dict(os.environ, PYTHONPATH=str(REPO_ROOT), XLA_FLAGS="--xla_force_host_platform_device_count=2",
                       JAX_COMPILATION_CACHE_DIR=str(compilation_cache_dir),
                       JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0", JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="-1")
    script = f"TESTS, RUN = {str(REPO_ROOT / 'tests')!r}, {RUN!r}\n" + PROCESS
    port = str(free_port())
    processes = [subprocess.Popen([sys.executable, "-c", script, str(i), port, str(tmp_path)], cwd=tmp_path,
                                  env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for i in range(2)]
    outputs = []
    try:
        for process in processes:
            outputs.append(process.communicate(timeout=600))
    finally:
        for process in processes:
            process.kill()
    for process, (stdout, stderr) in zip(processes, outputs):
        assert process.returncode == 0, stdout + stderr

    results = [json.loads(stdout.split("RESULT ")[1]) for stdout, _ in outputs]
    assert results[0] == results[1] == {"steps": TOTAL, "devices": 4, "local_devices": 2, "processes": 2}
    main_log = outputs[0][0]
    assert "(4 devices × 1 batch × 2 envs)" in main_log and "on 2 processes" in main_log
    assert f"[eval] step {TOTAL}" in main_log
    assert "[train]" not in outputs[1][0] and "[eval]" not in outputs[1][0]

    def leaves(name):
        return dict(np.load(tmp_path / name))

    # both processes end with the same params, in every one of their devices
    params = [leaves(f"params_{i}.npz") for i in range(2)]
    assert params[0].keys() == params[1].keys() and len(params[0]) > 0
    for path, leaf in params[0].items():
        np.testing.assert_array_equal(leaf, params[1][path])
    # the checkpoint holds the whole state of every process's devices, in process order: 2 local + 2 remote
    states = [leaves(f"state_{i}.npz") for i in range(2)]
    saved = ocp.PyTreeCheckpointer().restore(str(tmp_path / "process_0" / "checkpoints" / str(TOTAL) / "learner_state"))
    saved = {".".join(str(getattr(key, "key", getattr(key, "idx", key))) for key in path): leaf
             for path, leaf in jax.tree_util.tree_flatten_with_path(saved)[0]}
    assert saved.keys() == states[0].keys() == states[1].keys()
    for path, saved_leaf in saved.items():
        np.testing.assert_array_equal(saved_leaf, np.concatenate([states[0][path], states[1][path]]))

    assert (tmp_path / "process_0" / "metrics.json").exists()
    assert not (tmp_path / "process_1").exists()  # process 1 wrote no log and no checkpoint
