"""Every refusal names the option and the value given, not a value derived from it or a particle downstream (issue 45:
`banyan run --max-rung 1001` was reported as 1000, clipped before the check; `banyan accuracy --eps 1e30` as a NaN
acceleration; and a softening in range but far beyond the particles' extent gave relative errors of 1)."""
import csv

import pytest

import banyan
from conftest import plummer


@pytest.mark.parametrize("value", [31, 1001, 4294967299])
def test_run_names_the_max_rung_given(cli, tmp_path, value):
    r = cli("run", "--steps", "block", "--max-rung", value, "--out", tmp_path / "run", check=False)
    assert r.returncode == 2 and f"run: --max-rung must be at most 30, got {value}\n" in r.stderr, r.stderr
    assert not (tmp_path / "run").exists()


def test_python_names_the_max_rung_given(backend):
    pos, vel, mass = plummer(100)
    for value in (1001, 2**40):
        # The Python layer's check of whole numbers (the module's integers could not hold 2^40) names it as given.
        with pytest.raises(banyan.UsageError, match=f"max_rung must be a whole number from 0 to 30, got {value}$"):
            banyan.Simulation(pos, vel, mass, eps=0.01, backend=backend, time_steps="block", max_rung=value)


def test_a_device_number_is_never_wrapped(cli, tmp_path):
    # 2^32 once became device 0.
    r = cli("run", "--device", 2**32, "--out", tmp_path / "run", check=False)
    assert r.returncode == 2 and "--device must be in [0, 2147483647], got 4294967296" in r.stderr, r.stderr


def test_accuracy_names_the_softenings_range(cli, backend, tmp_path):
    r = cli("accuracy", "--eps", "1e30", "--n", 1000, "--backend", backend, check=False)
    assert r.returncode == 2 and "accuracy: --eps must be in [0, 1e30), got 1e+30" in r.stderr, r.stderr
    # Within that range, but beyond what single precision serves against the particles' extent: the run's rule.
    r = cli("accuracy", "--eps", "1e20", "--n", 1000, "--backend", backend, "--reps", 0, check=False)
    assert r.returncode == 2 and "accuracy: --eps: the softening 1e+20 is more than" in r.stderr, r.stderr
    assert "times the extent" in r.stderr and "nan" not in r.stderr


def test_accuracy_serves_a_softening_far_beyond_the_extent(cli, backend, tmp_path):
    # eps^3 beyond float's range in N-body units: without internal units every acceleration came out 0 (errors 1).
    cli("accuracy", "--eps", "1e13", "--n", 1000, "--sample", 100, "--theta", 0.5, "--reps", 0, "--backend", backend,
        "--csv", tmp_path / "a.csv")
    with open(tmp_path / "a.csv") as f:
        (row,) = list(csv.DictReader(f))
    assert float(row["max"]) < 1e-3
    r = cli("accuracy", "--seed", -1, "--n", 1000, check=False)
    assert r.returncode == 2 and "accuracy: --seed must be 0 or more, got -1" in r.stderr, r.stderr
