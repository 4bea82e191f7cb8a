"""`python -m experiments.evaluate checkpoint=PATH`: a saved run's policy played again, outside the training loop.

It lives apart from the loop because it reaches a system through the registry (`stoix_like.systems`), whose
system modules import the loop: the loop itself never needs the registry.
"""

from __future__ import annotations

import os

import jax
import numpy as np
from omegaconf import DictConfig

from stoix_like import envs as envs_lib
from stoix_like import systems
from stoix_like.config import validation
from stoix_like.errors import ConfigError
from stoix_like.learner.evaluator import make_evaluator
from stoix_like.learner.system_contract import LearnerSetup
from stoix_like.run import checkpointing
from stoix_like.run.logging import summarize
from stoix_like.run.shared import eval_params_of
from stoix_like.runtime import host_keys


def setup_of(saved: checkpointing.SavedRun) -> LearnerSetup:
    """The setup of the system the run was trained as, found by its registry name, not a module path."""
    algorithm = saved.meta["algorithm"]
    if algorithm not in systems.MODULE_OF:
        raise ConfigError(f"{saved.root} was written by algorithm {algorithm!r}, which this code does not know "
                          f"(stoix_like.systems.MODULE_OF lists {', '.join(sorted(systems.MODULE_OF))}).")
    return systems.system_module(algorithm).learner_setup


def evaluate_checkpoint(config: DictConfig) -> float:
    """`python -m experiments.evaluate checkpoint=PATH`: return statistics of a saved policy; returns the mean."""
    validation.validate(config)
    saved = checkpointing.read_saved_run(str(config.checkpoint))
    run_config = saved.config
    if config.greedy is not None:
        run_config.arch.evaluation_greedy = bool(config.greedy)
    train_env, eval_env = envs_lib.make(run_config.env)
    # The system rebuilds its networks and eval policy from the saved config; its fresh state is only a template.
    setup = setup_of(saved)(train_env, jax.random.PRNGKey(0), run_config, saved.budget)
    template = eval_params_of(setup, setup.learner_state)
    per_seed_params = checkpointing.load_eval_params(saved, template, str(config.params))
    evaluate = make_evaluator(eval_env, setup.eval_policy, int(config.num_episodes))
    meta = saved.meta
    print(f"{meta['algorithm']} on {meta['env']['suite']}/{meta['env']['scenario']}: checkpoint "
          f"{os.path.join(saved.root, str(saved.step))} ({meta['steps_done']:,} steps), {config.params} params, "
          f"{int(config.num_episodes)} episodes, "
          f"{'greedy' if run_config.arch.evaluation_greedy else 'sampled'} actions", flush=True)
    means = []
    for k, (seed, eval_params) in enumerate(zip(meta["seeds"], per_seed_params)):
        per_episode = evaluate(eval_params, jax.random.fold_in(host_keys.seed_key(int(config.seed)), k))
        ret, length = summarize(per_episode["episode_return"]), summarize(per_episode["episode_length"])
        median = float(np.median(per_episode["episode_return"]))
        print(f"[evaluate seed {seed}] return {ret['mean']:.2f} ± {ret['std']:.2f} (median {median:.2f}, "
              f"min {ret['min']:.1f}, max {ret['max']:.1f}) | length {length['mean']:.1f}", flush=True)
        means.append(ret["mean"])
    return float(np.mean(means))
