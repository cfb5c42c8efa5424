"""``bench --startup``: fresh processes, one Inductor cache, medians of the warm rounds."""

import statistics

import pytest

from motrix_gym.bench import startup_times


def test_startup_repeats_must_be_positive():
    with pytest.raises(ValueError, match="startup repeats must be >= 1, got 0"):
        startup_times("Motrix/G1WalkFlat-v0", 4, repeats=0)


@pytest.mark.slow
def test_startup_times_report_medians_of_every_round():
    st = startup_times("Motrix/G1WalkFlat-v0", 4, new_lanes=(4, 8), repeats=3)
    assert set(st["samples_s"]) == {"4", "8"} and all(len(v) == 3 for v in st["samples_s"].values())
    assert st["warm_s"] == statistics.median(st["samples_s"]["4"])
    assert st["warm_new_lanes_s"] == {"8": statistics.median(st["samples_s"]["8"])}
    assert st["cold_s"] > max(max(v) for v in st["samples_s"].values())  # the cold start compiles


def test_bench_measures_a_task_with_its_options_and_overrides(tmp_path, capsys):
    """The row names the options the task was made with; options with --all or --startup are
    refused."""
    import json

    from motrix_gym.__main__ import main

    out = tmp_path / "b.json"
    assert main(["bench", "Go1WalkFlat", "--num-envs", "2", "--steps", "2", "--repeats", "1", "--no-compile",
                 "--task-option", "heading_command=true", "--override", "observations.policy.joint_pos.history=2",
                 "--json", str(out)]) == 0
    assert "task options: {'heading_command': True, 'overrides': {'observations.policy.joint_pos.history': 2}}" in (
        capsys.readouterr().out)
    (row,) = json.loads(out.read_text())
    assert row["task_options"] == {"heading_command": True, "overrides": {"observations.policy.joint_pos.history": 2}}
    for extra, message in ((["--all"], "give a task id or --all, not both"),
                           (["--startup"], "with one task, without --startup")):
        with pytest.raises(SystemExit):
            main(["bench", "Go1WalkFlat", "--override", "rewards.alive.weight=0", *extra])
        assert message in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["bench", "--all", "--override", "rewards.alive.weight=0"])
    assert "give a task id, not --all" in capsys.readouterr().err
