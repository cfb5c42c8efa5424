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
