"""README's learning table, rendered from committed logs alone: one row per learning target.

Each row is two populations of the target's shipped defaults, each 8 seeds in one program: seeds 0..7 (the
population the defaults were tuned on, logged in `<runs>/<algorithm>/<suite>/<task>/`) and seeds 1000..1007,
which nobody tuned on (`<untuned>/<algorithm>/<suite>/<task>/`). For each population it shows the IQM of the
seeds' *final* returns (the params training ended with, what a user keeps) and of their *absolute* returns (the
best evaluated params), each over 10× the evaluation episodes, with 95% bootstrap intervals and the seeds that
solved the task. The verdict judges the target on all four; `checked by` prints the target's declared coverage
(`learning_targets.COVERAGE`). A target without logs is an error, never a row kept from before.

`benchmarks/learning_table.py --from-logs` writes the result into README.md, and tests/test_learning_claims.py
fails when README's block differs from what the logs render.
"""

from __future__ import annotations

import os
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from stoix_like.claims import population
from stoix_like.errors import ConfigError
from stoix_like.claims.learning_targets import LearningTarget, all_targets, coverage_of, shortfalls, target_of
from stoix_like.report import runs, statistics
from stoix_like.report.statistics import Estimate

RowKey = Tuple[str, str]  # (algorithm, env option)
TUNED_FIRST_SEED, UNTUNED_FIRST_SEED, SEEDS_PER_POPULATION = 0, 1000, 8
HEADER = [
    "| algorithm | task | steps per seed | seeds 0..7: final IQM [95% CI] | absolute IQM [95% CI] "
    "| solved: final, absolute | seeds 1000..1007 (untuned): final IQM [95% CI] | absolute IQM [95% CI] "
    "| solved: final, absolute | target, judged on all four | checked by | wall time (0..7) | logged |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]


class Population(NamedTuple):
    """One logged population of a target: its group of runs and the two summaries the verdict reads."""

    group: runs.Group
    absolute: population.PopulationSummary
    final: Optional[population.PopulationSummary]  # None where the logs hold no final-params returns


def target_groups(paths: Sequence[str]) -> Dict[RowKey, runs.Group]:
    """The groups logged under `paths` that are an algorithm's shipped defaults (no differing config) on a task
    it has a learning target for, by (algorithm, env option)."""
    existing = [path for path in paths if os.path.isdir(path)]
    if not existing:
        return {}
    found: Dict[RowKey, runs.Group] = {}
    for group in runs.group_runs(runs.load_runs(existing)):
        option = runs.env_option_of(group.suite, group.task)
        if group.label != group.algorithm or option is None:
            continue
        try:
            target_of(group.algorithm, option)
        except KeyError:  # an algorithm or task without a learning target has no row
            continue
        found[(group.algorithm, option)] = group
    return found


def summarized(group: runs.Group, target: LearningTarget) -> Population:
    final = group.final_params_returns()
    return Population(
        group, population.summarize(group.absolute_returns().tolist(), group.seed_numbers, target.solved_return),
        None if final is None else population.summarize(final.tolist(), group.seed_numbers, target.solved_return))


def missing_rows(tuned: Dict[RowKey, runs.Group]) -> List[RowKey]:
    return [(algorithm, target.env) for algorithm, target in all_targets() if (algorithm, target.env) not in tuned]


def render(tuned: Dict[RowKey, runs.Group], untuned: Dict[RowKey, runs.Group],
           reps: int = statistics.DEFAULT_REPS) -> str:
    """The whole table block: header, one row per target in learning_targets' order, and the footer."""
    missing = missing_rows(tuned)
    if missing:
        raise ConfigError("no logged population for " + ", ".join(f"{a} on {e}" for a, e in missing)
                          + ": train it with `python benchmarks/learning_table.py --algorithms "
                          + " ".join(f"{a}@{e}" for a, e in missing) + " --update-readme`")
    lines = list(HEADER)
    for algorithm, target in all_targets():
        key = (algorithm, target.env)
        lines.append(row(algorithm, target, summarized(tuned[key], target),
                         summarized(untuned[key], target) if key in untuned else None, reps))
    return "\n".join([*lines, "", footer([*tuned.values(), *untuned.values()])])


def row(algorithm: str, target: LearningTarget, tuned: Population, untuned: Optional[Population], reps: int) -> str:
    _check_seeds(algorithm, target, tuned, TUNED_FIRST_SEED)
    cells = [algorithm, target.env, f"{tuned.group.steps_per_seed:,}", *_population_cells(tuned, reps)]
    if untuned is None:
        cells += ["not logged", "not logged", "—"]
    else:
        _check_seeds(algorithm, target, untuned, UNTUNED_FIRST_SEED)
        if untuned.group.steps_per_seed != tuned.group.steps_per_seed:
            raise ConfigError(f"{algorithm} on {target.env}: the untuned population trained "
                              f"{untuned.group.steps_per_seed:,} steps per seed, the tuned one "
                              f"{tuned.group.steps_per_seed:,}: log both on the shipped defaults")
        cells += _population_cells(untuned, reps)
    cells += [verdict(target, tuned, untuned), coverage_of(algorithm, target.env).describe(algorithm, target.env),
              _seconds(tuned.group.wall_seconds), tuned.group.started or "?"]
    return "| " + " | ".join(cells) + " |"


def _check_seeds(algorithm: str, target: LearningTarget, logged: Population, first_seed: int) -> None:
    wanted = list(range(first_seed, first_seed + SEEDS_PER_POPULATION))
    if logged.group.seed_numbers != wanted:
        raise ConfigError(f"{algorithm} on {target.env}: logged seeds {logged.group.seed_numbers}, the table's "
                          f"population is {wanted[0]}..{wanted[-1]}")


def final_estimate(logged: Population, reps: int) -> Optional[Estimate]:
    """The IQM of a population's final-params returns and its interval; None where they are not logged."""
    if logged.final is None:
        return None
    return statistics.iqm_estimate(np.asarray(logged.final.returns), f"{logged.group.label} final", reps)


def _population_cells(logged: Population, reps: int, final: Optional[Estimate] = None) -> List[str]:
    """final IQM [CI], absolute IQM [CI], solved (final, absolute). `final`: final_estimate's, where the caller
    already has it."""
    digits = _digits(logged.absolute.returns)
    absolute = statistics.iqm_estimate(logged.group.absolute_returns(), f"{logged.group.label} absolute", reps)
    final = final or final_estimate(logged, reps)
    if logged.final is None or final is None:
        final_cell, final_solved = "not logged", "—"
    else:
        final_cell, final_solved = estimate_cell(final, digits), _solved(logged.final)
    return [final_cell, estimate_cell(absolute, digits), f"{final_solved}, {_solved(logged.absolute)}"]


def verdict(target: LearningTarget, tuned: Population, untuned: Optional[Population]) -> str:
    """`met` when every logged summary meets the target; else what misses, on which population and metric."""
    judged = [("0..7 absolute", tuned.absolute), ("0..7 final", tuned.final)]
    if untuned is not None:
        judged += [("1000..1007 absolute", untuned.absolute), ("1000..1007 final", untuned.final)]
    misses = [f"{name}: " + "; ".join(problems) for name, summary in judged if summary is not None
              and (problems := shortfalls(target, summary))]
    unjudged = [name for name, summary in judged if summary is None]
    bar = (f"IQM ≥ {target.iqm_at_least:g}, ≤ {target.max_seeds_below_floor} below {target.seed_floor:g}; "
           f"solved ≥ {target.solved_return:g}")
    head = met_or_missed(misses)
    tail = "" if not unjudged else f"; not judged: {', '.join(unjudged)} (not logged)"
    return f"{head}: {bar}{tail}"


def footer(groups: Sequence[runs.Group]) -> str:
    machines = sorted({machine for group in groups for machine in group.machines})
    days = sorted({day for group in groups if (day := group.started)})
    return ("Each population is the shipped defaults of one algorithm on one task, its 8 seeds in one program "
            "(`arch.num_seeds=8`). *Final*: each seed's final params; *absolute*: its best evaluated params; each "
            "over 10× the evaluation episodes. Logged " + (f"{days[0]} to {days[-1]}" if len(days) > 1 else
                                                           (days[0] if days else "on no recorded day"))
            + " on " + "; ".join(machines) + " (wall times include compilation and depend on the machine and its "
            "load). Rendered from docs/results/runs/ (seeds 0..7) and docs/results/untuned/ (seeds 1000..1007) by "
            "`python benchmarks/learning_table.py --from-logs`; a population is re-measured by `python "
            "benchmarks/learning_table.py --algorithms NAME[@suite/task] [--first-seed 1000] --update-readme`.")


def _digits(returns: Sequence[float]) -> int:
    """One digit after the point, three for returns within [-1, 1] (success rates, shares of right answers)."""
    return 3 if max(abs(r) for r in returns) <= 1.0 else 1


def estimate_cell(estimate: Estimate, digits: int) -> str:
    return f"{estimate.point:.{digits}f} [{estimate.low:.{digits}f}, {estimate.high:.{digits}f}]"


def _solved(summary: population.PopulationSummary) -> str:
    return f"{summary.num_solved}/{len(summary.seeds)}"


def _seconds(value: Optional[float]) -> str:
    return "?" if value is None else f"{value:.0f} s"


# ------------------------------------------------------------------------------------------- Sebulba's table
# Sebulba trains one seed per run (its actor threads hold one seed's params), so a population is a folder of
# single-seed runs, `<root>/<population>/seed_<k>/`, each folder one configuration (benchmarks/sebulba_population.py).
SEBULBA_HEADER = [
    "| population (docs/results/sebulba/) | algorithm, network | seeds | steps per seed | final IQM [95% CI] "
    "| absolute IQM [95% CI] | solved: final, absolute | target | wall time (all runs) | logged |",
    "|---|---|---|---|---|---|---|---|---|---|"]


def met_or_missed(misses: Sequence[str]) -> str:
    """A target cell's head: "met", or what was missed, each named."""
    return "met" if not misses else "**MISSED** (" + "; ".join(misses) + ")"


def network_label(group: runs.Group) -> str:
    """Whether the group's actor-critic runs one torso under both heads (`network.shared_torso`) or two."""
    return "shared torso" if group.runs[0].config.get("network.shared_torso") else "separate torsos"


def _misses(target: LearningTarget, logged: Population) -> List[str]:
    """What a population misses of its target on its absolute and (where logged) final returns, each named."""
    return [f"{name}: " + "; ".join(missed) for name, summary in (("absolute", logged.absolute),
                                                                  ("final", logged.final))
            if summary is not None and (missed := shortfalls(target, summary))]


def sebulba_table(root: str) -> str:
    """A row per population folder under `root`, judged against learning_targets.SEBULBA_TARGETS."""
    from stoix_like.claims.learning_targets import SEBULBA_TARGETS

    lines = list(SEBULBA_HEADER)
    for folder in sorted(os.listdir(root)):
        (group,) = runs.group_runs(runs.load_runs([os.path.join(root, folder)]))
        target = SEBULBA_TARGETS[group.algorithm]
        logged = summarized(group, target)
        network = network_label(group)
        seeds = group.seed_numbers
        problems = _misses(target, logged)
        bar = (f"IQM ≥ {target.iqm_at_least:g}, ≤ {target.max_seeds_below_floor} below {target.seed_floor:g}; "
               f"solved ≥ {target.solved_return:g}")
        judged = met_or_missed(problems) + f": {bar}" + (
            "; final not judged (not logged)" if logged.final is None else "")
        cells = [folder, f"{group.algorithm}, {network}", f"{len(seeds)} ({seeds[0]}..{seeds[-1]})",
                 f"{group.steps_per_seed:,}", *_population_cells(logged, statistics.DEFAULT_REPS), judged,
                 _seconds(group.wall_seconds), group.started or "?"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- Continuous control (brax)
# A target of learning_targets.BRAX_TARGETS is logged as populations, each beside brax's own trainer on the same
# composed config and seeds (benchmarks/brax_learning_peer.py): ours as run logs under
# `<root>/<algorithm>/<task>/ours_<first seed>/` (one program of N seeds), brax.training's as
# `<root>/<algorithm>/<task>/brax_<first seed>.json` (its seeds one after another).
# `checked by`: no CI test trains these budgets (a brax population is half an hour of both cores), so every row is
# `benchmark`, with the command that re-measures exactly that row.
CONTINUOUS_HEADER = [
    "| task | trainer | seeds | steps per seed | final IQM [95% CI] | absolute IQM [95% CI] "
    "| solved: final, absolute | target | checked by | wall time | logged |",
    "|---|---|---|---|---|---|---|---|---|---|---|"]


class Peer(NamedTuple):
    """Another project's trainer beside ours: its rows' label, the prefix of its result files in a task's folder
    (`<prefix>_<first seed>.json`, beside ours' `ours_<first seed>/`), and the benchmark that writes both."""

    label: str  # "{algorithm}" stands for the row's algorithm, upper-cased (PPO, PQN)
    prefix: str  # also the benchmark's `--side` for the peer alone
    benchmark: str  # `python <benchmark> --task <task> --algorithm <algorithm>` runs both sides
    home_suite: str  # the suite whose tasks the benchmark names bare (`--task ant`); others keep it (playground/...)

    def task_argument(self, env: str) -> str:
        suite, task = env.split("/", 1)
        return task if suite == self.home_suite else env

    def command(self, algorithm: str, env: str, seeds: List[int], side: str) -> str:
        """The benchmark command that re-measures one side (`ours` or the peer's prefix) of a logged population."""
        return (f"python {self.benchmark} --task {self.task_argument(env)} --algorithm {algorithm} "
                f"--first-seed {seeds[0]} --num-seeds {len(seeds)} --side {side}")

    def checked_by(self, algorithm: str, env: str, seeds: List[int], side: str) -> str:
        return benchmark_cell(self.command(algorithm, env, seeds, side))


def benchmark_cell(command: str, note: str = "") -> str:
    """A `checked by` cell: no CI test, the benchmark `command` (and what else it needs, `note`) re-measures the row."""
    return f"benchmark: `{command}`" + (f" {note}" if note else "")


BRAX = Peer("brax.training {algorithm} (absolute: its best evaluation)", "brax", "benchmarks/brax_learning_peer.py",
            "brax")
REJAX = Peer("rejax {algorithm} (absolute: its best evaluation)", "rejax", "benchmarks/minatar_rejax_peer.py",
             "gymnax")


def continuous_control_table(root: str, reps: int = statistics.DEFAULT_REPS) -> str:
    """Ours and brax's trainer on every brax target (ConfigError for a target without a logged population)."""
    from stoix_like.claims.learning_targets import BRAX_TARGETS

    return peer_table(root, BRAX_TARGETS, BRAX, reps)


def pixels_table(root: str, reps: int = statistics.DEFAULT_REPS) -> str:
    """Ours and rejax's PPO on every MinAtar target (ConfigError for a target without a logged population)."""
    from stoix_like.claims.learning_targets import MINATAR_TARGETS

    return peer_table(root, MINATAR_TARGETS, REJAX, reps)


def peer_table(root: str, targets: Dict[RowKey, LearningTarget], peer: Peer,
               reps: int = statistics.DEFAULT_REPS) -> str:
    """Ours and `peer`, a row each per logged population of every target (ConfigError for a target without
    one), judged by `side_by_side`."""
    lines = list(CONTINUOUS_HEADER)
    for (algorithm, env), target in targets.items():
        task = env.split("/")[-1]
        folder = os.path.join(root, algorithm, task)
        populations = sorted(name for name in os.listdir(folder) if name.startswith("ours_")) \
            if os.path.isdir(folder) else []
        if not populations:
            raise ConfigError(f"no logged population for {algorithm} on {env} under {folder}: run `python "
                              f"{peer.benchmark} --task {peer.task_argument(env)} --algorithm {algorithm}`")
        for name in populations:
            (group,) = runs.group_runs(runs.load_runs([os.path.join(folder, name)]))
            unfinished = [run.directory for run in group.runs if (run.record or {}).get("status") != "done"]
            if unfinished:  # a population still training (or killed) has no final returns to show
                raise ConfigError(f"{', '.join(unfinished)}: the run has not finished (run.json's status is not "
                                  f"'done'): let it finish, or re-run it")
            logged = summarized(group, target)
            seeds = group.seed_numbers
            misses = _misses(target, logged)
            ours_final = final_estimate(logged, reps)
            bar = f"IQM ≥ {target.iqm_at_least:g}, ≤ {target.max_seeds_below_floor} below {target.seed_floor:g}"
            lines.append(table_row([env, f"ours ({algorithm})", seed_range(seeds), f"{group.steps_per_seed:,}",
                                    *_population_cells(logged, reps, ours_final),
                                    met_or_missed(misses) + f": {bar}",
                                    peer.checked_by(algorithm, env, seeds, "ours"),
                                    _seconds(group.wall_seconds), group.started or "?"]))
            lines.append(_peer_row(peer, os.path.join(folder, f"{peer.prefix}_{name[len('ours_'):]}.json"), algorithm,
                                   env, seeds, target, group.steps_per_seed, reps, ours_final, group.wall_seconds))
    return "\n".join(lines)


def side_by_side(ours: Optional[Estimate], peer: Estimate, ours_wall: Optional[float], peer_wall: float) -> str:
    """The issue's judgement of ours against a peer on the same seeds and budget: our final-return IQM at or above
    the peer's (at worst, the two 95% intervals overlap), in no more than the peer's wall time."""
    if ours is None:
        learning = "**MISSED**: our final returns are not logged"
    elif ours.point >= peer.point:
        learning = "met: our final IQM ≥ its"
    elif ours.high >= peer.low:
        gap = peer.point - ours.point  # brax's returns run to thousands, MinAtar's to tens: three figures for both
        learning = f"met at worst: our final IQM {gap:,.0f}" if gap >= 100 else f"met at worst: our final IQM {gap:.3g}"
        learning += " lower, the intervals overlap"
    else:
        learning = "**MISSED**: our final IQM lower, the intervals apart"
    if ours_wall is None:
        timing = "**MISSED**: our wall time is not logged"
    elif ours_wall <= peer_wall:
        timing = f"met: our wall time {ours_wall / peer_wall:.2f}× its"
    else:
        timing = f"**MISSED**: our wall time {ours_wall / peer_wall:.2f}× its"
    return f"ours against it: {learning}; {timing}"


def _peer_row(peer: Peer, path: str, algorithm: str, env: str, seeds: List[int], target: LearningTarget,
              steps_per_seed: int, reps: int, ours_final: Optional[Estimate], ours_wall: Optional[float]) -> str:
    label = peer.label.format(algorithm=algorithm.upper())
    checked_by = peer.checked_by(algorithm, env, seeds, peer.prefix)
    if not os.path.exists(path):
        return table_row([env, label, seed_range(seeds), f"{steps_per_seed:,}", "not yet run", "not yet run",
                          "—", "peer not yet run: no comparison", checked_by, "—", "—"])
    import json

    with open(path) as file:
        result = json.load(file)
    if result["seeds"] != seeds or result["total_timesteps"] != steps_per_seed:
        raise ConfigError(f"{path}: seeds {result['seeds']} at {result['total_timesteps']:,} steps, but ours ran "
                          f"{seeds} at {steps_per_seed:,}: compare like with like")
    final = population.summarize(result["final"], seeds, target.solved_return)
    absolute = population.summarize(result["absolute"], seeds, target.solved_return)
    digits = _digits(absolute.returns)
    estimates = [statistics.iqm_estimate(np.asarray(returns), f"{peer.prefix} {label}", reps)
                 for label, returns in (("final", result["final"]), ("absolute", result["absolute"]))]
    return table_row([env, label, seed_range(seeds), f"{steps_per_seed:,}",
                      *[estimate_cell(estimate, digits) for estimate in estimates],
                      f"{_solved(final)}, {_solved(absolute)}",
                      side_by_side(ours_final, estimates[0], ours_wall, result["wall_seconds"]), checked_by,
                      _seconds(result["wall_seconds"]), result["date"]])


def seed_range(seeds: List[int]) -> str:
    return f"{len(seeds)} ({seeds[0]}..{seeds[-1]})"


def table_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


# ---------------------------------------------------------------------------------- PBT's learning check
# benchmarks/pbt_learning_check.py logs a fixed-learning-rate sweep (`<root>/fixed_<first seed>/`, one program, a
# group per rate) and PBT runs (`<root>/pbt_<first seed>/`, each one program of N members). A PBT run's result is its
# best member's final return; the check is that each run's is at least the best final return of any fixed member.
PBT_HEADER = [
    "| arm | members (seeds) | steps per member | final IQM [95% CI] | absolute IQM [95% CI] "
    "| solved: final, absolute | best member's final | wall time | logged |",
    "|---|---|---|---|---|---|---|---|---|"]


def pbt_table(root: str, reps: int = statistics.DEFAULT_REPS) -> str:
    """The fixed arm's rows (one per learning rate), a row per PBT run, the PBT runs as a population of their best
    members, and the check's verdict (ConfigError where an arm has no logs)."""
    target = target_of("ppo", "gymnax/cartpole")
    folders = sorted(os.listdir(root)) if os.path.isdir(root) else []
    fixed = [name for name in folders if name.startswith("fixed_")]
    pbt_runs = [name for name in folders if name.startswith("pbt_")]
    if not fixed or not pbt_runs:
        raise ConfigError(f"no fixed and PBT logs under {root}: run `python benchmarks/pbt_learning_check.py`")
    lines = list(PBT_HEADER)
    best_fixed = -np.inf
    for name in fixed:
        by_rate = lambda group: float(group.label.rsplit("=", 1)[-1])  # noqa: E731 (label: "ppo system.actor_lr=1e-05")
        for group in sorted(runs.group_runs(runs.load_runs([os.path.join(root, name)])), key=by_rate):
            logged = summarized(group, target)
            best_fixed = max(best_fixed, max(logged.final.returns) if logged.final else -np.inf)
            lines.append(_pbt_row(f"fixed {group.label.split(' ', 1)[-1]}", group, logged, reps))
    run_bests = []
    for name in pbt_runs:
        (group,) = runs.group_runs(runs.load_runs([os.path.join(root, name)]))
        logged = summarized(group, target)
        if logged.final is None:
            raise ConfigError(f"{os.path.join(root, name)}: no final returns logged; re-run the benchmark")
        run_bests.append(max(logged.final.returns))
        lines.append(_pbt_row(f"PBT run {name[len('pbt_'):]} (actor_lr in [1e-5, 1e-1])", group, logged, reps))
    best = statistics.iqm_estimate(np.asarray(run_bests), "PBT runs' best finals", reps)
    met = sum(value >= best_fixed for value in run_bests)
    lines.append(table_row([f"PBT, {len(run_bests)} runs (each its best member's final)", "—", "—",
                            estimate_cell(best, 1), "—", "—", ", ".join(f"{value:.1f}" for value in run_bests),
                            "—", "—"]))
    verdict = (f"Check: each PBT run's best final return ≥ the best fixed member's ({best_fixed:.1f}): "
               + ("met" if met == len(run_bests) else "**MISSED**") + f" in {met} of {len(run_bests)} runs.")
    return "\n".join([*lines, "", verdict])


def _pbt_row(arm: str, group: runs.Group, logged: Population, reps: int) -> str:
    best = f"{max(logged.final.returns):.1f}" if logged.final else "not logged"
    return table_row([arm, seed_range(group.seed_numbers), f"{group.steps_per_seed:,}",
                      *_population_cells(logged, reps), best, _seconds(group.wall_seconds), group.started or "?"])


def finished_population(directory: str) -> runs.Group:
    """The one population (a configuration's seeds) logged under `directory`; ConfigError when its runs have not
    all finished or are of more than one configuration."""
    groups = runs.group_runs(runs.load_runs([directory]))
    if len(groups) != 1:
        raise ConfigError(f"{directory}: {len(groups)} configurations logged where one population belongs: keep one")
    (group,) = groups
    if any((run.record or {}).get("status") != "done" for run in group.runs):
        raise ConfigError(f"{directory}: a run has not finished: let it finish, or re-run it")
    return group


def _judged_row(task: str, trainer: str, group: runs.Group, logged: Population, misses: List[str], bar: str,
                command: str, reps: int, command_note: str = "") -> str:
    """A CONTINUOUS_HEADER row of one population of ours, its target cell "met" or what it missed, then the bar, and
    the benchmark `command` that re-measures it (and what else it needs, `command_note`)."""
    return table_row([task, trainer, seed_range(group.seed_numbers), f"{group.steps_per_seed:,}",
                      *_population_cells(logged, reps),
                      met_or_missed(misses) + f": {bar}",
                      benchmark_cell(command, command_note),
                      _seconds(group.wall_seconds), group.started or "?"])


def atari_table(root: str, reps: int = statistics.DEFAULT_REPS) -> str:
    """PPO's Atari populations (`<root>/<game>/seed_<k>/`, single-seed Sebulba runs of
    `benchmarks/sebulba_population.py --task envpool/<game>`), each judged against learning_targets.ATARI_TARGETS
    and the issue's hour per run on a CPU; ConfigError when none is logged."""
    from stoix_like.claims.learning_targets import ATARI_HOUR_ON_A_CPU_SECONDS, ATARI_TARGETS

    lines = list(CONTINUOUS_HEADER)
    for game in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        group = finished_population(os.path.join(root, game))
        target = ATARI_TARGETS[(group.algorithm, f"envpool/{game}")]
        logged = summarized(group, target)
        misses = _misses(target, logged)
        walls = [wall for run in group.runs if (wall := (run.record or {}).get("wall_seconds")) is not None]
        if len(walls) != len(group.runs):
            raise ConfigError(f"{os.path.join(root, game)}: a run.json has no wall_seconds, so the hour per run "
                              "cannot be judged: re-run it")
        longest = max(float(wall) for wall in walls)
        if longest > ATARI_HOUR_ON_A_CPU_SECONDS:
            misses.append(f"the longest run took {longest:.0f} s, over {ATARI_HOUR_ON_A_CPU_SECONDS:.0f}")
        network = network_label(group)
        bar = (f"every seed ≥ {target.seed_floor:g} in a run of at most {ATARI_HOUR_ON_A_CPU_SECONDS:.0f} s "
               f"(longest {longest:.0f} s)")
        seeds = group.seed_numbers
        command = (f"python benchmarks/sebulba_population.py --task envpool/{game} --seeds {len(seeds)} "
                   f"--first-seed {seeds[0]}")
        lines.append(_judged_row(f"envpool/{game}", f"ours ({group.algorithm}, {network})", group, logged, misses,
                                 bar, command, reps, "with the `-o` overrides of the script's docstring"))
    if len(lines) == len(CONTINUOUS_HEADER):
        raise ConfigError(f"no logged Atari population under {root}: run `python benchmarks/sebulba_population.py "
                          "--task envpool/breakout ...` (its docstring gives README's command)")
    return "\n".join(lines)


def torso_check_table(root: str, reps: int = statistics.DEFAULT_REPS) -> str:
    """PPO's MinAtar populations by torso (`benchmarks/minatar_torso_check.py`'s `<game>/<torso>_<first seed>/`
    folders under `root`), each judged against the game's MinAtar target; ConfigError when none is logged."""
    from stoix_like.claims.learning_targets import MINATAR_TARGETS

    lines = list(CONTINUOUS_HEADER)
    for game in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        target = MINATAR_TARGETS[("ppo", f"gymnax/{game}")]
        for name in sorted(os.listdir(os.path.join(root, game))):
            group = finished_population(os.path.join(root, game, name))
            logged = summarized(group, target)
            misses = _misses(target, logged)
            bar = f"IQM ≥ {target.iqm_at_least:g}, ≤ {target.max_seeds_below_floor} below {target.seed_floor:g}"
            torso, seeds = name.rsplit('_', 1)[0], group.seed_numbers
            command = (f"python benchmarks/minatar_torso_check.py --task {game} --torso {torso} --first-seed "
                       f"{seeds[0]} --num-seeds {len(seeds)} --timesteps {group.steps_per_seed}")
            lines.append(_judged_row(f"gymnax/{game}", f"ours (ppo, {torso} torso)", group, logged, misses, bar,
                                     command, reps))
    if len(lines) == len(CONTINUOUS_HEADER):
        raise ConfigError(f"no logged population under {root}: run `python benchmarks/minatar_torso_check.py "
                          "--task breakout`")
    return "\n".join(lines)
