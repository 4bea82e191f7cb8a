"""Shared test helpers: compose a real Hydra config, run a real entry point in a fresh interpreter.

Fixtures return plain functions so that any test file can use them without importing this module:

    def test_something(compose):
        config = compose("ppo", ["env=gymnax/pendulum", "arch.total_timesteps=4000"])

`compose_config` and `run_python` are also importable (`from conftest import compose_config`) for module-level
helpers and subprocess scripts.
"""

from __future__ import annotations

import atexit
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, Optional, Sequence

import pytest
from omegaconf import DictConfig

from stoix_like.config import compose as config_compose

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def pytest_configure(config) -> None:
    """Command-line runs started by a test keep their compiled programs in a cache of this test process, never in
    the user's (compilation_cache.user_cache_directory): a test neither reads what an earlier session left there
    nor leaves anything behind."""
    directory = tempfile.mkdtemp(prefix="stoix_like_test_xla_cache_")
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    os.environ["STOIX_LIKE_CACHE_DIR"] = directory
    _size_xla_thread_pool_to_the_workers_share_of_cores()


def _size_xla_thread_pool_to_the_workers_share_of_cores() -> None:
    """Under pytest-xdist, each worker's XLA CPU client gets a thread pool of its share of the cores, not of them all.

    XLA sizes the pool once, when the backend starts, from the cores the process may run on. With `-n 2` on 2 cores,
    each worker's pool would be 2 threads wide, four busy threads on two cores; a learning population then contends
    with the other worker's. So the backend starts here with the process limited to its share, then the limit is
    lifted: the pool's threads keep their share, while the Python thread, and every subprocess a test starts (entry
    points, multi-process runs), may run anywhere. Measured with `-n 2` on 2 cores: SAC's and TD3's populations
    169 s -> 138 s together (the same for pinning the whole worker to one core); 25 compile-bound tests of
    test_value_based.py and test_policy_gradient.py 50.9 s -> 49.9 s. What a test checks is unchanged.
    """
    worker, workers = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not worker or not workers or not hasattr(os, "sched_setaffinity"):
        return
    cores = sorted(os.sched_getaffinity(0))
    share = max(1, len(cores) // int(workers))
    first = (int(worker.removeprefix("gw")) * share) % len(cores)
    os.sched_setaffinity(0, cores[first:first + share])
    try:
        import jax

        jax.devices()  # starts the CPU backend, which sizes its thread pool now
    finally:
        os.sched_setaffinity(0, cores)


def compose_config(config_name: str, overrides: Sequence[str] = (),
                   base_exp_path: Optional[os.PathLike] = None) -> DictConfig:
    """The config `python -m experiments.<config_name> <overrides>` would run, composed without launching.

    Struct mode stays on, as in a real run. `base_exp_path` (where a run writes when not launched through
    Hydra) is pointed at a test directory so that tests never litter the repository.

    Unless the overrides say otherwise, `arch.compilation_cache=False`: a test worker trains dozens of runs in one
    process, and jax's persistent cache inside one long process has crashed it twice with a segmentation fault
    (loading back an executable it wrote, and writing one: `put_executable_and_time`, CI check of stop 27). Off, a
    4-seed population sets up ~3 s slower (PPO-penalty on Pendulum: 45.0 s against 42.4 s, the same returns).
    """
    overrides = list(overrides)
    if base_exp_path is not None:
        overrides.append(f"logger.base_exp_path={base_exp_path}")
    config = config_compose.compose_config(config_name, overrides)
    if "arch" in config and "compilation_cache" in config.arch and not any(
            override.startswith("arch.compilation_cache=") for override in overrides):
        config.arch.compilation_cache = False
    return config


@pytest.fixture
def compose(tmp_path):
    """`compose(config_name, overrides=())` -> DictConfig, writing its logs under this test's tmp_path."""

    def _compose(config_name: str, overrides: Sequence[str] = ()) -> DictConfig:
        return compose_config(config_name, overrides, base_exp_path=tmp_path / "results")

    return _compose


def run_python(args: Sequence[str], cwd: os.PathLike, env: Optional[Dict[str, str]] = None,
               timeout: float = 600, compilation_cache_dir: Optional[os.PathLike] = None
               ) -> subprocess.CompletedProcess:
    """`python <args>` in a fresh interpreter (own XLA flags, own Hydra state), importing this checkout.

    Runs in `cwd` (so Hydra's outputs/ and multirun/ land there), with the repository on PYTHONPATH.
    With `compilation_cache_dir`, jax's persistent compilation cache is on: subprocesses that compile the same
    programs (the same learner with another seed, say) compile them once between them.
    """
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), full_env.get("PYTHONPATH")]))
    if compilation_cache_dir is not None:
        full_env.update(JAX_COMPILATION_CACHE_DIR=str(compilation_cache_dir),
                        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                        JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="-1")
    full_env.update(env or {})
    return subprocess.run([sys.executable, *args], cwd=cwd, env=full_env, capture_output=True, text=True,
                          timeout=timeout)


def unoptimized_xla() -> Dict[str, str]:
    """The env of a smoke-run subprocess: XLA's backend optimisation off.

    A smoke run executes a few steps of programs that take a minute to compile (brax's physics, Craftax's world,
    MJX), so compiling them unoptimised halves its cost; what it checks (that the programs build, run and log)
    does not depend on how fast the compiled code is.
    """
    return {"XLA_FLAGS": " ".join(filter(None, [os.environ.get("XLA_FLAGS"), "--xla_backend_optimization_level=0"]))}


@pytest.fixture(scope="session")
def compilation_cache_dir(tmp_path_factory) -> pathlib.Path:
    """One jax compilation cache for this test session's subprocesses; each session starts cold."""
    return tmp_path_factory.mktemp("jax_compilation_cache")


@pytest.fixture
def python_subprocess(compilation_cache_dir):
    """`python_subprocess(args, cwd, env=None, timeout=600)` -> CompletedProcess (see `run_python`),
    sharing this session's compilation cache."""

    def _run(args: Sequence[str], cwd: os.PathLike, env: Optional[Dict[str, str]] = None,
             timeout: float = 600) -> subprocess.CompletedProcess:
        return run_python(args, cwd, env=env, timeout=timeout, compilation_cache_dir=compilation_cache_dir)

    return _run


# CI's populations train 4 seeds (0..3 unless a target's coverage shifts them), not the 8 of a learning claim. Thirty
# populations at 8 seeds took ~3,600 of CI's ~6,400 worker-seconds and held it at 53-61 minutes, over its 45;
# off-policy learners on a CPU cost about linearly in vmapped seeds. A CI population is a regression check on the
# shipped defaults (the same target: an IQM bar and at most one seed below a floor, on the absolute and the final
# returns); the claims README states are 8-seed populations, seeds 0..7 and 1000..1007 nobody tuned on, from
# `python benchmarks/learning_table.py --algorithms ALGO[@suite/task] [--first-seed 1000]`. Which seeds each test
# trains, and whether it checks the target or a reduced claim, is declared once, beside the target
# (`learning_targets.COVERAGE`), and README's table prints that declaration.


def assert_population_learns(compose, algorithm: str, env: Optional[str] = None) -> None:
    """The learning-test pattern: the seeds the target's `ci` coverage declares, of the shipped defaults with no
    override, in one program, must meet the algorithm's target on `env` (its reference task when None) in
    stoix_like/claims/learning_targets.py (an IQM bar and at most N seeds below a floor), on both the absolute and the
    final returns.

    Never a threshold on one seed: another CPU's float rounding makes a seed another seed.
    """
    from stoix_like.claims.learning_population import train_population
    from stoix_like.claims.learning_targets import coverage_of

    coverage = coverage_of(algorithm, env)
    assert coverage.kind == "ci", f"{algorithm}'s target on {env} is declared {coverage.kind}, not ci"
    run = train_population(algorithm, compose, coverage.first_seed, coverage.num_seeds, (), env)
    print(run.describe())
    assert not run.problems, run.describe()


def assert_population_clears(compose, algorithm: str, env: Optional[str] = None) -> None:
    """The smaller CI claim of a system whose shipped budget is beyond CI's (`ci-reduced` coverage): its declared
    seeds of its defaults at the declared steps (with the declared overrides) must reach the declared IQM, a bar of
    its own (not the algorithm's target, which is measured at the full budget by `benchmarks/learning_table.py`)."""
    from stoix_like.claims.learning_population import train_population
    from stoix_like.claims.learning_targets import coverage_of

    coverage = coverage_of(algorithm, env)
    reduced = coverage.reduced
    assert coverage.kind == "ci-reduced" and reduced is not None, f"{algorithm} is declared {coverage.kind}"
    run = train_population(algorithm, compose, coverage.first_seed, coverage.num_seeds,
                           [f"arch.total_timesteps={reduced.steps}", *reduced.overrides], env)
    verdict = (f"{algorithm}, {reduced.steps:,} steps per seed: {run.summary.describe()}; CI's bar: IQM >= "
               f"{reduced.iqm_at_least:g}")
    print(verdict)
    assert run.summary.iqm >= reduced.iqm_at_least, verdict


def train_then_resume(compose, algorithm: str, run: Sequence[str], checkpoints: os.PathLike, resume_step: int):
    """The resume-test pattern: `run` trained uninterrupted, saving a checkpoint at each evaluation into
    `checkpoints`, then trained again resumed from the one at `resume_step`. Returns both RunResults: a resume is
    exact when the two end in the same learner state."""
    from stoix_like.run import experiment
    from stoix_like.systems import system_module

    learner_setup = system_module(algorithm).learner_setup
    saving = ["logger.checkpointing.save_model=True", f"logger.checkpointing.directory={checkpoints}",
              "logger.checkpointing.keep_last=100"]
    uninterrupted = experiment.train(compose(algorithm, [*run, *saving]), learner_setup, algorithm)
    resume = f"logger.checkpointing.resume_from={pathlib.Path(checkpoints) / str(resume_step)}"
    resumed = experiment.train(compose(algorithm, [*run, resume]), learner_setup, algorithm)
    return uninterrupted, resumed


# The longest tests, in seconds on 2 cores (`--durations` of the last full runs and of this change's checks);
# everything named `*_learns_*` (a population) counts as LONG_BY_DEFAULT unless listed.
EXPECTED_SECONDS = {
    "test_every_continuous_action_learner_runs_on_brax": 170,  # per env, four or five systems each
    "test_memory_matters_on_the_masked_cartpole": 225,  # two populations
    "test_d4pg_learns_pendulum": 110,
    "test_td3_learns_pendulum": 184,
    "test_sac_learns_pendulum": 171,
    "test_mpo_learns_pendulum": 144,
    "test_ddpg_learns_pendulum": 140,
    "test_c51_learns_cartpole": 75,
    "test_qr_dqn_learns_cartpole": 110,
    "test_vmpo_learns_pendulum": 108,
    "test_memory_matters_on_memory_chain": 105,  # two populations of 4 seeds
    "test_two_processes_under_load_never_deadlock_and_repeat_exactly": 110,
    "test_ppo_learns_cartpole_on_seeds_nobody_tuned_on": 100,  # 8 seeds
    "test_mpo_learns_cartpole": 93,
    "test_alphazero_learns_cartpole": 80,
    "test_muzero_learns_cartpole": 145,
    "test_sampled_alphazero_learns_pendulum": 66,
    "test_spo_learns_cartpole": 86,
    "test_sac_runs_on_brax_ant": 80,  # brax compiled into an entry-point run
    "test_ppo_runs_end_to_end": 60,
    "test_a_command_line_run_keeps_its_compiled_programs_for_the_next_one": 40,  # two runs in subprocesses
    # Sebulba's subprocess runs
    "test_sebulba_ppo_runs_the_exact_budget_on_its_learner_device": 55,
    "test_ctrl_c_stops_every_thread_within_seconds": 30,
    "test_a_failing_actor_ends_the_run_with_its_error_and_no_thread_left": 25,
    "test_a_resumed_run_continues_bit_identically_with_its_recurrent_states": 65,  # two runs in subprocesses
}
LONG_BY_DEFAULT = 60


def expected_seconds(item: pytest.Item) -> float:
    name = item.name.split("[")[0]
    return EXPECTED_SECONDS.get(name, LONG_BY_DEFAULT if "_learns_" in name else 0)


def pytest_collection_modifyitems(session, config, items) -> None:
    """Long tests first, longest first; the rest keep their order.

    pytest-xdist gives each worker a contiguous share of the collection, and an idle worker steals from the back of
    the other's queue. A long test left near the end (once, rainbow's population closing test_value_based.py) keeps one
    core busy while the other idles; queued longest first, the run ends on short tests that the two workers share
    evenly. The figures only order the queue: a stale one costs balance, never a result.
    """
    items.sort(key=lambda item: -expected_seconds(item))  # stable: ties keep the collection's order
