"""banyan.opening_criteria: the opening criteria's names from core's one list (core/tree/opening.hpp), which the
CLI parses, Simulation takes and the AMUSE interface offers."""
import banyan
import pytest
from conftest import plummer


def test_opening_criteria_are_core_names_in_order():
    assert banyan.opening_criteria == ("paper", "bmax")
    assert "opening_criteria" in banyan.__all__
    assert banyan.opening_criteria == banyan._banyan.opening_criteria


def test_cli_refuses_a_criterion_listing_them(cli):
    r = cli("bench", "forces", "--opening", "dehnen", check=False)
    assert r.returncode == 2
    assert f"{' or '.join(banyan.opening_criteria)}, got 'dehnen'" in r.stderr


@pytest.mark.parametrize("name", banyan.opening_criteria)
def test_simulation_takes_each_criterion(backend, name):
    pos, vel, mass = plummer(200, seed=3)
    sim = banyan.Simulation(pos, vel, mass, eps=0.05, dt=1 / 64, backend=backend, opening=name)
    assert sim.opening == name
    with pytest.raises(banyan.UsageError, match="opening"):
        banyan.Simulation(pos, vel, mass, eps=0.05, dt=1 / 64, backend=backend, opening=name + "x")
