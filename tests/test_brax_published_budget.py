"""benchmarks/brax_published_budget.py, the script a GPU lease runs, on a budget of seconds: a bug found in a lease
costs its minutes, so both sides run here first (with XLA's backend optimisation off: what is checked is that the
programs build, run and leave their records, not how fast)."""

from __future__ import annotations

import json

from conftest import REPO_ROOT, run_python, unoptimized_xla

SCRIPT = str(REPO_ROOT / "benchmarks" / "brax_published_budget.py")


def test_both_sides_leave_their_evaluations_with_their_times_and_ours_its_run_logs(tmp_path):
    out = tmp_path / "out"
    for side, seeds in (("ours", "2"), ("brax", "1")):
        done = run_python([SCRIPT, "--task", "ant", "--side", side, "--num-seeds", seeds, "--out", str(out),
                           "--smoke"], cwd=tmp_path, env=unoptimized_xla())
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    ours = json.loads((out / "ant_ours.json").read_text())
    assert ours["seeds"] == [1001, 1002] and len(ours["evaluations"]) == 2
    for curve in ours["evaluations"]:
        assert [step for step, _, _ in curve] == [512, 1024]  # the smoke budget: 2 evaluations of 512 steps
        assert all(seconds is not None and seconds > 0 for _, _, seconds in curve)
    clock = json.loads((out / "ant_ours_clock.json").read_text())  # written as each evaluation comes
    assert sorted(int(step) for step in clock) == [512, 1024]
    assert (out / "ours_ant" / "metrics.json").exists() and (out / "ours_ant" / "run.json").exists()
    brax = json.loads((out / "ant_brax.json").read_text())
    assert brax["seeds"] == [1001] and brax["recipe"]["num_envs"] == 16
    times = [seconds for _, _, seconds in brax["evaluations"][0]]
    assert times == sorted(times) and len(times) == 2  # brax's evaluation before training, and its last


def test_bad_input_is_refused_before_any_work(tmp_path):
    done = run_python([SCRIPT, "--task", "ant", "--side", "ours", "--num-seeds", "0", "--out", str(tmp_path)],
                      cwd=tmp_path)
    assert done.returncode == 2 and "--num-seeds must be at least 1" in done.stderr
