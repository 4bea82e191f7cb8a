"""What each algorithm's shipped defaults must reach on their reference task, in one table.

Every learning test (`pytest -m learning`) and `benchmarks/learning_table.py` read their thresholds here, and
each target declares here how it is re-checked (`COVERAGE`: in CI at its shipped defaults, in CI at a reduced
budget with a smaller claim, or only by its benchmark command).
A target is a claim about a population of seeds (see `population.py`), never about one seed:
  * the IQM of the seeds' absolute returns is at least `iqm_at_least`, and
  * at most `max_seeds_below_floor` seeds end below `seed_floor`.
A seed counts as *solved* at `seed_floor`'s task threshold (`solved_return`).

Sources: CartPole-v1's `solved_return` 475 is gymnasium's `reward_threshold` (config/env/gymnax/cartpole.yaml).
Pendulum-v1 has no threshold in gymnasium; −250 is where a swing-up policy holds the pole upright from every
start, and −200 the IQM a tuned off-policy learner reaches within 50k steps (SAC/TD3 papers report −150 to −200
at convergence). The population bars themselves come from the issue "Results that travel".
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Tuple

from stoix_like.claims.population import PopulationSummary


class LearningTarget(NamedTuple):
    env: str  # the `env=` config group option the default trains on
    iqm_at_least: float
    seed_floor: float
    max_seeds_below_floor: int
    solved_return: float  # a seed at or above this counts as solved in reports


# A uniformly random policy's mean return on each MinAtar game (gymnax), over 1,000 episodes, seed 0,
# `python benchmarks/suites_learning.py random-<game>`: Breakout 0.438 ± 0.043 (95%), Asterix 0.427 ± 0.050,
# SpaceInvaders 4.175 ± 0.215, Freeway 0.383 ± 0.039.
RANDOM_MINATAR_RETURN: Dict[str, float] = {"breakout": 0.44, "asterix": 0.43, "space_invaders": 4.18,
                                           "freeway": 0.38}
MINATAR_GAMES = tuple(RANDOM_MINATAR_RETURN)  # the four MinAtar games gymnax offers (env=gymnax/<game>)
RANDOM_BREAKOUT_RETURN = RANDOM_MINATAR_RETURN["breakout"]


def _five_times_random(game: str) -> LearningTarget:
    """A MinAtar game's bar: every seed, and the IQM, at 5× a uniformly random policy's return (one seed of
    slack)."""
    bar = 5 * RANDOM_MINATAR_RETURN[game]
    return LearningTarget(f"gymnax/{game}", iqm_at_least=bar, seed_floor=bar, max_seeds_below_floor=1,
                          solved_return=bar)


# PPO's row in the learning table (MINATAR_TARGETS builds the same bar for each game beside rejax)
MINATAR_BREAKOUT = _five_times_random("breakout")

CARTPOLE_VALUE_BASED = LearningTarget("gymnax/cartpole", iqm_at_least=475.0, seed_floor=400.0,
                                      max_seeds_below_floor=1, solved_return=475.0)
PENDULUM_CONTINUOUS = LearningTarget("gymnax/pendulum", iqm_at_least=-200.0, seed_floor=-250.0,
                                     max_seeds_below_floor=1, solved_return=-250.0)
# The bar of issue 10's table for V-MPO, PPO-penalty, DPO and AWR on Pendulum-v1: IQM -300 within a CPU budget,
# where SAC-like off-policy learners reach -200; a seed below -400 has not learnt to hold the pole up (one that never
# swings up scores -900 to -1,500).
PENDULUM_POLICY_OPTIMIZATION = LearningTarget("gymnax/pendulum", iqm_at_least=-300.0, seed_floor=-400.0,
                                              max_seeds_below_floor=1, solved_return=-250.0)

# algorithm -> its targets, one per task. The first is its reference task, the default env of config/<algo>.yaml;
# a further task trains with that task's tuned defaults (config/tuned/<algo>/<suite>/<task>.yaml, composed
# whenever env=<suite>/<task> is chosen), so every target judges shipped defaults, never test-only overrides.
TARGETS: Dict[str, Tuple[LearningTarget, ...]] = {
    # PPO's default must solve every seed (≥ 475) with an IQM of 490; the suite allows one seed of slack
    # below the solved line, since a shifted population on another CPU is a population nobody tuned on.
    "ppo": (LearningTarget("gymnax/cartpole", iqm_at_least=490.0, seed_floor=475.0, max_seeds_below_floor=1,
                           solved_return=475.0),
            # navix's return is 1 at the goal and 0 otherwise, so the eval return is the success rate (issue 14)
            LearningTarget("navix/empty_8x8", iqm_at_least=0.9, seed_floor=0.9, max_seeds_below_floor=1,
                           solved_return=0.9),
            MINATAR_BREAKOUT),
    # The on-policy actor-critics beside PPO (issue 10): on CartPole every CartPole target's floor (400) and solved
    # line (475) with the issue's IQM bars; on Pendulum PENDULUM_POLICY_OPTIMIZATION, REINFORCE's IQM bar being the
    # issue's −400 (a plain policy gradient is the slowest of the family) with the same floor: below −400 a seed has not
    # learnt to hold the pole up (one that never swings up scores −900 to −1,500).
    "reinforce": (LearningTarget("gymnax/cartpole", iqm_at_least=400.0, seed_floor=400.0, max_seeds_below_floor=1,
                                 solved_return=475.0),
                  LearningTarget("gymnax/pendulum", iqm_at_least=-400.0, seed_floor=-400.0, max_seeds_below_floor=1,
                                 solved_return=-250.0)),
    # issue 12, "Memory": on CartPole with its velocities hidden (config/env/gymnax/cartpole_masked.yaml) a policy
    # must remember; the bar is an IQM of 400, with REINFORCE's floor. Feed-forward PPO at the same budget
    # stays far below it (tests/test_recurrent.py trains both).
    "rec_ppo": (LearningTarget("gymnax/cartpole_masked", iqm_at_least=400.0, seed_floor=400.0,
                               max_seeds_below_floor=1, solved_return=475.0),
                # MemoryChain's return is +1 or -1 per episode, so a mean return R is a success rate (R + 1) / 2:
                # issue 12's 90% success is R = 0.8, for the IQM and as every seed's floor
                LearningTarget("gymnax/memory_chain", iqm_at_least=0.8, seed_floor=0.8, max_seeds_below_floor=1,
                               solved_return=0.8),
                # RepeatPrevious's return is the share of right answers: 90% of them, as MemoryChain's bar
                LearningTarget("popjax/repeat_previous", iqm_at_least=0.9, seed_floor=0.9,
                               max_seeds_below_floor=1, solved_return=0.9)),
    # issue 12, R2D2: CartPole IQM ≥ 400 with REINFORCE's floor, and the masked-velocity CartPole IQM ≥ 300 (the
    # issue's bars), with a floor at 200, about 10× a random policy's return, allowing one seed below it
    "r2d2": (LearningTarget("gymnax/cartpole", iqm_at_least=400.0, seed_floor=400.0, max_seeds_below_floor=1,
                            solved_return=475.0),
             LearningTarget("gymnax/cartpole_masked", iqm_at_least=300.0, seed_floor=200.0,
                            max_seeds_below_floor=1, solved_return=475.0)),
    "ppo_penalty": (CARTPOLE_VALUE_BASED, PENDULUM_POLICY_OPTIMIZATION),
    "dpo": (CARTPOLE_VALUE_BASED, PENDULUM_POLICY_OPTIMIZATION),
    "pqn": (CARTPOLE_VALUE_BASED,),
    "dqn": (CARTPOLE_VALUE_BASED,),
    "ddqn": (CARTPOLE_VALUE_BASED,),
    "mdqn": (CARTPOLE_VALUE_BASED,),
    "dqn_reg": (CARTPOLE_VALUE_BASED,),
    "c51": (CARTPOLE_VALUE_BASED,),
    "qr_dqn": (CARTPOLE_VALUE_BASED,),
    "rainbow": (CARTPOLE_VALUE_BASED,),
    "sac": (PENDULUM_CONTINUOUS,),
    "td3": (PENDULUM_CONTINUOUS,),
    "ddpg": (PENDULUM_CONTINUOUS,),
    "d4pg": (PENDULUM_CONTINUOUS,),
    # AWR's bars are issue 10's: IQM ≥ 400 on CartPole-v1 (REINFORCE's, with its floor) and ≥ −300 on Pendulum-v1.
    "awr": (LearningTarget("gymnax/cartpole", iqm_at_least=400.0, seed_floor=400.0, max_seeds_below_floor=1,
                           solved_return=475.0),
            PENDULUM_POLICY_OPTIMIZATION),
    # issue 10: MPO serves both action kinds, held to the off-policy bars on each
    "mpo": (PENDULUM_CONTINUOUS, CARTPOLE_VALUE_BASED),
    "vmpo": (CARTPOLE_VALUE_BASED, PENDULUM_POLICY_OPTIMIZATION),
    # issue 11: AlphaZero on CartPole-v1, the value-based systems' bars (IQM ≥ 475, at most one seed below 400)
    "az": (CARTPOLE_VALUE_BASED,),
    # Sampled AlphaZero on Pendulum-v1: the policy-optimisation bar (IQM ≥ −300, at most one seed below −400)
    "sampled_az": (PENDULUM_POLICY_OPTIMIZATION,),
    # SPO serves both action kinds: CartPole-v1 at the value-based bars (IQM ≥ 475, at most one seed below 400);
    # Pendulum-v1 at IQM ≥ −250 (the solved line itself, above the policy-optimisation bar of −300), floor −400
    "spo": (CARTPOLE_VALUE_BASED,
            LearningTarget("gymnax/pendulum", iqm_at_least=-250.0, seed_floor=-400.0, max_seeds_below_floor=1,
                           solved_return=-250.0)),
    # issue 11: MuZero on CartPole-v1, IQM ≥ 400 with at most one seed below 400
    "mz": (LearningTarget("gymnax/cartpole", iqm_at_least=400.0, seed_floor=400.0, max_seeds_below_floor=1,
                          solved_return=475.0),),
    # Sampled MuZero on Pendulum-v1: IQM ≥ −400 (its issue's bar, REINFORCE's on Pendulum) with REINFORCE's floor
    "sampled_mz": (LearningTarget("gymnax/pendulum", iqm_at_least=-400.0, seed_floor=-400.0,
                                  max_seeds_below_floor=1, solved_return=-250.0),),
}


# The best expected return a policy without memory can reach on the memory tasks, worked out from their rules:
# what a feed-forward population is compared with (learning_population.compare_memory). MemoryChain: the last
# observation says nothing of the context, so a guess is right half the time (+1 and -1 equally likely: 0).
# RepeatPrevious with 4 symbols: an answer is right 1 time in 4 (envs/popjax.py, `memoryless_return`).
MEMORYLESS_RETURN: Dict[str, float] = {"gymnax/memory_chain": 0.0, "popjax/repeat_previous": 0.25}

# arch=sebulba (actor threads over CPU envs): its own table, since its populations run as separate single-seed runs
# (benchmarks/sebulba_population.py), not as one vmapped program. Issue 13's bars: PPO on gymnasium CartPole-v1 IQM
# ≥ 475 over at least 4 seeds, with CartPole's floor of 400; IMPALA's IQM ≥ 400.
SEBULBA_TARGETS: Dict[str, LearningTarget] = {
    "ppo": LearningTarget("gymnasium/cartpole", iqm_at_least=475.0, seed_floor=400.0, max_seeds_below_floor=1,
                          solved_return=475.0),
    # IMPALA: issue 13's IQM ≥ 400 on the same task, with CartPole's floor of 400 (at most one seed below). Its
    # default arch is Sebulba, so this is its reference target, and TARGETS (Anakin's table) has no row for it.
    "impala": LearningTarget("gymnasium/cartpole", iqm_at_least=400.0, seed_floor=400.0, max_seeds_below_floor=1,
                             solved_return=475.0),
}

# brax locomotion: README's "Continuous control" table, each population of ours beside brax's own trainer on the same
# composed config (benchmarks/brax_learning_peer.py). PPO on ant: the first command a user types must reach an
# absolute-return IQM of 3,000 on seeds nobody tuned on (1000+) within 15 minutes on 2 CPU cores. Standing still
# earns ~1,000 on ant (its healthy reward over 1,000 steps), so a seed below 1,000 has not learnt to walk.
# PPO on halfcheetah: the target is brax's trainer's IQM, which the table shows beside ours; this floor
# (IQM >= 2,000, a seed below 1,000 has not learnt to run; standing still earns about 0) was set after the file's
# one run on seed 1000 (2,648; brax's trainer 2,983), below it, before the population's seeds were trained.
BRAX_TARGETS: Dict[Tuple[str, str], LearningTarget] = {
    ("ppo", "brax/ant"): LearningTarget("brax/ant", iqm_at_least=3000.0, seed_floor=1000.0, max_seeds_below_floor=1,
                                        solved_return=3000.0),
    ("ppo", "brax/halfcheetah"): LearningTarget("brax/halfcheetah", iqm_at_least=2000.0, seed_floor=1000.0,
                                                max_seeds_below_floor=1, solved_return=2000.0),
    # PPO on hopper: the target is brax's trainer's IQM; this bar (IQM >= 600, a seed below 400 falls within
    # ~150 steps) was set from the file's runs on seed 1000 (ours 919.3, brax's trainer 677.3), while the population
    # on 1001..1004 was at 2M of its 5.12M steps. A hopper that stays up for 1,000 steps earns far more: README says so.
    ("ppo", "brax/hopper"): LearningTarget("brax/hopper", iqm_at_least=600.0, seed_floor=400.0,
                                           max_seeds_below_floor=1, solved_return=600.0),
    # PPO on walker2d: as hopper's, brax's trainer's IQM is the target; this bar (IQM >= 600, a seed below 400
    # falls within ~150 steps, as a walker earns ~1 a step while upright and little more when it barely moves) was set
    # from the file's one run on seed 1000 (ours 804.1, falling after ~282 steps; brax's trainer 367.2), before any
    # seed of the population on 1001..1004 trained.
    ("ppo", "brax/walker2d"): LearningTarget("brax/walker2d", iqm_at_least=600.0, seed_floor=400.0,
                                             max_seeds_below_floor=1, solved_return=600.0),
    # SAC on halfcheetah, at the CPU file's 520,192 steps (a tenth of PPO's): the target is brax's SAC
    # trainer's IQM; this bar (IQM >= 1,000, a seed below 500 has barely begun to run) was set from the file's one run
    # on seed 1000 (final 1,542; 1,031 at 367k steps), below it, as the population on 1001..1004 began.
    ("sac", "brax/halfcheetah"): LearningTarget("brax/halfcheetah", iqm_at_least=1000.0, seed_floor=500.0,
                                                max_seeds_below_floor=1, solved_return=1000.0),
    # SAC on ant, at the same 520,192 steps: this bar (IQM >= 1,200; a seed below 1,000, what standing still earns,
    # has not learnt to walk) was set from the file's one run on seed 1000 (final 1,849.7; 1,645.7 at 264k steps and
    # 751.0 at 418k, its episodes often ending early), below it, as the population on 1001..1004 began.
    ("sac", "brax/ant"): LearningTarget("brax/ant", iqm_at_least=1200.0, seed_floor=1000.0, max_seeds_below_floor=1,
                                        solved_return=1200.0),
    # SAC on MuJoCo Playground's dm_control cheetah run, at the CPU file's 520,192 steps (Playground's recipe runs
    # 10M): dm_control pays min(speed / 10 m/s, 1) each of the 1,000 steps, so standing still earns 0 and 1,000 means
    # 10 m/s throughout. This bar (IQM >= 100, a cheetah averaging 1 m/s; a seed below 50 has barely begun to run)
    # was set before the population's first evaluation, from a 33,792-step probe on seed 1000 (0.22) and brax
    # halfcheetah's SAC at the same budget (~1.5 m/s), the nearest body; no run of the file had been judged.
    # PPO on Playground's cheetah run, at the CPU file's 1,920,000 steps (Playground's recipe runs 60M): SAC's bar
    # above, for the same reason (dm_control's reward, 1 m/s on average), set before any seed of the population on
    # 1001..1004 trained. Its one earlier run, a probe of seed 1000 at a tenth of the budget, ended at 227.4.
    ("ppo", "playground/cheetah_run"): LearningTarget("playground/cheetah_run", iqm_at_least=100.0, seed_floor=50.0,
                                                      max_seeds_below_floor=1, solved_return=100.0),
    ("sac", "playground/cheetah_run"): LearningTarget("playground/cheetah_run", iqm_at_least=100.0, seed_floor=50.0,
                                                      max_seeds_below_floor=1, solved_return=100.0),
    # SAC on Playground's walker walk, at the same 520,192 steps: dm_control pays a stand reward (height and
    # uprightness, at most 1) times (1 + 5 × a move reward) / 6, and the move reward is 0 at rest and 1 from 1 m/s, so
    # standing still earns at most 1,000 / 6 ≈ 167 and walking at 1 m/s up to 1,000. This bar (IQM >= 300, a walker that
    # moves; a seed below 167 has learnt no more than standing does) was set before the file's first run.
    # PPO on Playground's walker walk, at the CPU file's 1,920,000 steps (cheetah run's file, unchanged): SAC's bar
    # above (a walker that moves; standing still earns at most ~167), set before the file's first run.
    ("ppo", "playground/walker_walk"): LearningTarget("playground/walker_walk", iqm_at_least=300.0, seed_floor=167.0,
                                                      max_seeds_below_floor=1, solved_return=300.0),
    ("sac", "playground/walker_walk"): LearningTarget("playground/walker_walk", iqm_at_least=300.0, seed_floor=167.0,
                                                      max_seeds_below_floor=1, solved_return=300.0),
}

# MinAtar: README's "Pixels" table, each population of ours (at the 5,120,000 steps) beside rejax's PPO, PQN
# or DQN on the same composed config (benchmarks/minatar_rejax_peer.py). The target is rejax's IQM, which the
# table shows beside ours; the bar below is the learning table's own for the game (5× a random policy's return).
MINATAR_TARGETS: Dict[Tuple[str, str], LearningTarget] = {
    (algorithm, f"gymnax/{game}"): _five_times_random(game) for algorithm in ("ppo", "pqn", "dqn")
    for game in MINATAR_GAMES
}


# Atari through envpool (README's "Atari" table, benchmarks/sebulba_population.py --task envpool/<game>): issue 45's
# CPU bar, PPO clearly above random in a run of at most an hour on 2 seeds: 5× a random policy's score, or -10 on
# Pong (whose random score is negative, so 5× would be a lower bar). Random play's game scores are those of the
# Nature DQN paper's table of results (Mnih et al. 2015, "Human-level control through deep reinforcement learning",
# Extended Data Table 2: random actions at 10 Hz, 30 no-op starts): Breakout 1.7, Pong -20.7, SpaceInvaders 148.0.
RANDOM_ATARI_SCORE: Dict[str, float] = {"breakout": 1.7, "pong": -20.7, "space_invaders": 148.0}
ATARI_HOUR_ON_A_CPU_SECONDS = 3600.0  # the longest run of a seed for the CPU bar


def _clearly_above_random_atari(game: str) -> LearningTarget:
    bar = -10.0 if game == "pong" else 5 * RANDOM_ATARI_SCORE[game]
    return LearningTarget(f"envpool/{game}", iqm_at_least=bar, seed_floor=bar, max_seeds_below_floor=0,
                          solved_return=bar)


ATARI_TARGETS: Dict[Tuple[str, str], LearningTarget] = {
    ("ppo", f"envpool/{game}"): _clearly_above_random_atari(game) for game in RANDOM_ATARI_SCORE
}


class ReducedCheck(NamedTuple):
    """What a `ci-reduced` test claims instead of the target: its seeds at `steps` env steps each (with
    `overrides`) reach an absolute-return IQM of `iqm_at_least`, with no floor."""

    steps: int
    iqm_at_least: float
    overrides: Tuple[str, ...] = ()


class Coverage(NamedTuple):
    """How a target is re-checked, said exactly in README's table (its `checked by` column):

    * `ci`: `test` (tests/<file>.py::<function>, marked `learning`) trains the shipped defaults, no override, on
      seeds `first_seed` .. `first_seed + num_seeds - 1` in one program, and asserts the target on both the
      absolute and the final returns;
    * `ci-reduced`: `test` trains those seeds at a smaller budget and asserts `reduced`, a smaller claim;
    * `benchmark`: no test; `python benchmarks/learning_table.py --algorithms <algorithm>@<task>` re-measures it.
    The learning table's own populations (seeds 0..7, and 1000..1007 nobody tuned on) are `benchmark` runs for
    every target, whatever its CI check.
    """

    kind: str  # "ci" | "ci-reduced" | "benchmark"
    test: Optional[str] = None
    first_seed: int = 0
    num_seeds: int = 4
    reduced: Optional[ReducedCheck] = None
    why_not_ci: str = ""  # for `ci-reduced` and `benchmark`: why CI does not check the target itself

    def describe(self, algorithm: str, env: str) -> str:
        seeds = f"{self.num_seeds} seeds {self.first_seed}..{self.first_seed + self.num_seeds - 1}"
        if self.kind == "ci":
            return f"ci: {seeds}"
        if self.kind == "ci-reduced" and self.reduced is not None:
            return (f"ci-reduced: {seeds} at {self.reduced.steps:,} steps, absolute IQM ≥ "
                    f"{self.reduced.iqm_at_least:g} ({self.why_not_ci})")
        return f"benchmark: `--algorithms {algorithm}@{env}` ({self.why_not_ci})"


def _ci(test: str, first_seed: int = 0, num_seeds: int = 4) -> Coverage:
    return Coverage("ci", test, first_seed, num_seeds)


POLICY_GRADIENT_TESTS = "tests/test_policy_gradient.py::test_learns_"
# Why a target is not re-checked at its shipped budget in CI: CI's whole suite must stay under 40 minutes on 2 cores.
TOO_LONG_FOR_CI = "its budget is beyond CI's time"
# Learning checks taken out of CI to keep it under 40 minutes on CI's machine (r2d2 and rainbow cost 165-180 s of a
# core each in the clean-clone run of 2026-11-28; rec_ppo on the masked CartPole 105 s and td3 98 s in that of
# 2026-12-02, on a CPU CI's machine runs about 2.25x slower than): their parts keep unit tests and short runs in CI,
# and both of their logged populations stay in README's table.
MOVED_FOR_CI_TIME = "moved out of CI for its time; its parts keep their CI tests"
# A target both logged populations miss (README's row says by how much): a CI check on 4 of their seeds would pass or
# fail by one seed, and so would say nothing either way until the defaults are mended.
MISSED_ON_THE_LOGS = "both logged populations miss it; a 4-seed CI check would pass or fail by luck"
COVERAGE: Dict[Tuple[str, str], Coverage] = {
    ("ppo", "gymnax/cartpole"): _ci("tests/test_ppo.py::test_ppo_learns_cartpole_on_seeds_nobody_tuned_on", 1000, 8),
    ("ppo", "navix/empty_8x8"): Coverage("benchmark", why_not_ci=TOO_LONG_FOR_CI),
    ("ppo", "gymnax/breakout"): Coverage("benchmark", why_not_ci=TOO_LONG_FOR_CI),
    ("reinforce", "gymnax/cartpole"): _ci(POLICY_GRADIENT_TESTS + "cartpole"),
    ("reinforce", "gymnax/pendulum"): _ci(POLICY_GRADIENT_TESTS + "pendulum"),
    ("rec_ppo", "gymnax/cartpole_masked"): Coverage("benchmark", why_not_ci=MOVED_FOR_CI_TIME),
    ("rec_ppo", "gymnax/memory_chain"): _ci("tests/test_recurrent.py::test_memory_matters_on_memory_chain", 1000),
    ("rec_ppo", "popjax/repeat_previous"): Coverage("benchmark", why_not_ci=TOO_LONG_FOR_CI),
    ("r2d2", "gymnax/cartpole"): Coverage("benchmark", why_not_ci=MOVED_FOR_CI_TIME),
    ("r2d2", "gymnax/cartpole_masked"): Coverage("benchmark", why_not_ci=TOO_LONG_FOR_CI),
    ("ppo_penalty", "gymnax/cartpole"): _ci(POLICY_GRADIENT_TESTS + "cartpole"),
    ("ppo_penalty", "gymnax/pendulum"): _ci(POLICY_GRADIENT_TESTS + "pendulum"),
    ("dpo", "gymnax/cartpole"): _ci(POLICY_GRADIENT_TESTS + "cartpole"),
    ("dpo", "gymnax/pendulum"): _ci(POLICY_GRADIENT_TESTS + "pendulum"),
    ("pqn", "gymnax/cartpole"): _ci("tests/test_pqn.py::test_pqn_learns_cartpole"),
    ("dqn", "gymnax/cartpole"): _ci("tests/test_value_based.py::test_dqn_learns_cartpole_on_seeds_nobody_tuned_on",
                                    1000),
    **{(name, "gymnax/cartpole"): _ci(f"tests/test_value_based.py::test_{name}_learns_cartpole")
       for name in ("mdqn", "dqn_reg", "c51", "qr_dqn")},
    ("ddqn", "gymnax/cartpole"): Coverage("benchmark", why_not_ci=MISSED_ON_THE_LOGS),
    ("rainbow", "gymnax/cartpole"): Coverage("benchmark", why_not_ci=MOVED_FOR_CI_TIME),
    **{(name, "gymnax/pendulum"): _ci(f"tests/test_continuous.py::test_{name}_learns_pendulum")
       for name in ("sac", "ddpg", "d4pg")},
    ("td3", "gymnax/pendulum"): Coverage("benchmark", why_not_ci=MOVED_FOR_CI_TIME),
    ("awr", "gymnax/cartpole"): _ci("tests/test_awr.py::test_awr_learns_cartpole"),
    ("awr", "gymnax/pendulum"): _ci("tests/test_awr.py::test_awr_learns_pendulum"),
    ("mpo", "gymnax/pendulum"): _ci("tests/test_mpo.py::test_mpo_learns_pendulum"),
    ("mpo", "gymnax/cartpole"): _ci("tests/test_mpo.py::test_mpo_learns_cartpole"),
    ("vmpo", "gymnax/cartpole"): _ci("tests/test_mpo.py::test_vmpo_learns_cartpole"),
    ("vmpo", "gymnax/pendulum"): _ci("tests/test_mpo.py::test_vmpo_learns_pendulum"),
    ("az", "gymnax/cartpole"): _ci("tests/test_alphazero.py::test_alphazero_learns_cartpole"),
    # 122,880 of 307,200 steps; a random policy scores about -1,200
    ("sampled_az", "gymnax/pendulum"): Coverage(
        "ci-reduced", "tests/test_sampled_alphazero.py::test_sampled_alphazero_learns_pendulum",
        reduced=ReducedCheck(122880, -600.0), why_not_ci="random ≈ -1,200; " + TOO_LONG_FOR_CI),
    # 20,480 of 102,400 steps; a random policy scores about 22
    ("spo", "gymnax/cartpole"): Coverage(
        "ci-reduced", "tests/test_spo.py::test_spo_learns_cartpole", reduced=ReducedCheck(20480, 200.0),
        why_not_ci="random ≈ 22; " + TOO_LONG_FOR_CI),
    ("spo", "gymnax/pendulum"): Coverage("benchmark", why_not_ci=TOO_LONG_FOR_CI),
    # a fifth of the 128,256 steps
    ("mz", "gymnax/cartpole"): Coverage(
        "ci-reduced", "tests/test_muzero.py::test_muzero_learns_cartpole", reduced=ReducedCheck(25856, 75.0),
        why_not_ci="random ≈ 22; " + TOO_LONG_FOR_CI),
    ("sampled_mz", "gymnax/pendulum"): Coverage("benchmark", why_not_ci=TOO_LONG_FOR_CI),
}


def coverage_of(algorithm: str, env: Optional[str] = None) -> Coverage:
    """How `algorithm`'s target on `env` (its reference task when None) is checked; every target declares one."""
    return COVERAGE[(algorithm, target_of(algorithm, env).env)]


def target_of(algorithm: str, env: Optional[str] = None) -> LearningTarget:
    """`algorithm`'s target on `env` (an `env=` option), or on its reference task when `env` is None."""
    targets = TARGETS[algorithm]
    if env is None:
        return targets[0]
    for target in targets:
        if target.env == env:
            return target
    raise KeyError(f"{algorithm} has no learning target on {env}; it has: {', '.join(t.env for t in targets)}")


def all_targets() -> List[Tuple[str, LearningTarget]]:
    """(algorithm, target) for every target, in the table's order."""
    return [(algorithm, target) for algorithm, targets in TARGETS.items() for target in targets]


def shortfalls(target: LearningTarget, summary: PopulationSummary) -> List[str]:
    """What a population misses of its target, in words; empty when it meets it."""
    problems = []
    if summary.iqm < target.iqm_at_least:
        problems.append(f"IQM {summary.iqm:.1f} < {target.iqm_at_least:g}")
    below = [(seed, r) for seed, r in zip(summary.seeds, summary.returns) if r < target.seed_floor]
    if len(below) > target.max_seeds_below_floor:
        problems.append(f"{len(below)} seeds below {target.seed_floor:g} (at most {target.max_seeds_below_floor}"
                        f" allowed): " + ", ".join(f"seed {seed} at {r:.1f}" for seed, r in below))
    return problems
