"""A digest of PPO's, DQN's and SAC's params after a short run: a refactor that claims to change no result is checked
by running this at the commit before it and at the commit after, on the same machine.

    python benchmarks/params_digest.py [--record FILE --label LABEL] [--check FILE]

Each run is its algorithm's shipped defaults at a small budget (PPO and DQN on CartPole, SAC on Pendulum, seed 0,
one device). The digest is SHA-256 over every leaf of the final learner state's params, in key-path order, as raw
bytes with its dtype and shape: two runs agree only if they are bit for bit the same. XLA's CPU code depends on the
machine's instruction set, so digests are compared between commits on one machine, never against another's.

The script imports through today's package layout and falls back to the layout before the package was grouped into
subpackages (stoix_like/entry.py, stoix_like/experiment.py), so one copy of it runs at either commit
(`git worktree add /tmp/before <commit>` then `cp benchmarks/params_digest.py /tmp/before/benchmarks/`).
`--record` adds `{label: {algorithm: digest}}` to FILE; `--check` exits 1 unless every label in FILE and this run
agree.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

RUNS = {
    "ppo": ["env=gymnax/cartpole", "arch.total_timesteps=20000", "arch.num_evaluation=2"],
    "dqn": ["env=gymnax/cartpole", "arch.total_timesteps=21280", "arch.num_evaluation=2"],
    "sac": ["env=gymnax/pendulum", "arch.total_timesteps=5056", "arch.num_evaluation=2"],
}
COMMON = ["arch.seed=0", "arch.num_eval_episodes=4", "arch.compilation_cache=False"]


def _layout():
    """(compose_config, train, learner_setup_of) in whichever package layout this checkout has."""
    try:
        from stoix_like.config.compose import compose_config
        from stoix_like.run.experiment import train
    except ImportError:  # the layout before the subpackages
        from stoix_like.entry import compose_config  # type: ignore[no-redef]
        from stoix_like.experiment import train  # type: ignore[no-redef]
    from stoix_like import systems

    return compose_config, train, lambda algorithm: systems.system_module(algorithm).learner_setup


def params_digest(params) -> str:
    import jax
    import numpy as np

    digest = hashlib.sha256()
    for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
        array = np.asarray(leaf)
        digest.update(f"{jax.tree_util.keystr(path)}:{array.dtype}:{array.shape}".encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def digests() -> dict:
    compose_config, train, learner_setup_of = _layout()
    out = {}
    for algorithm, overrides in RUNS.items():
        with tempfile.TemporaryDirectory() as run_dir:
            config = compose_config(algorithm, [*overrides, *COMMON, f"logger.base_exp_path={run_dir}"])
            result = train(config, learner_setup_of(algorithm), algorithm)
            out[algorithm] = params_digest(result.learner_state.params)
        print(f"{algorithm}: {out[algorithm]}", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", help="a JSON file to add this run's digests to, under --label")
    parser.add_argument("--label", help="what this checkout is, e.g. its commit")
    parser.add_argument("--check", help="a JSON file of recorded digests this run must equal")
    args = parser.parse_args()
    if args.record and not args.label:
        parser.error("--record needs --label (e.g. the commit's short hash)")
    if args.check and not os.path.exists(args.check):
        parser.error(f"--check {args.check}: no such file; record one first with --record {args.check} --label ...")
    ours = digests()
    if args.record:
        recorded = json.load(open(args.record)) if os.path.exists(args.record) else {}
        recorded[args.label] = ours
        with open(args.record, "w") as out:
            json.dump(recorded, out, indent=1, sort_keys=True)
            out.write("\n")
    if args.check:
        recorded = json.load(open(args.check))
        differ = [f"{label}:{algorithm}" for label, theirs in recorded.items() for algorithm in RUNS
                  if theirs.get(algorithm) != ours[algorithm]]
        print("all equal" if not differ else f"differ: {', '.join(differ)}")
        sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
