"""Bad input gives a banyan.UsageError (a ValueError) that names the problem, never a crash or silent numbers."""
import numpy as np
import pytest

import banyan
from conftest import plummer


@pytest.fixture
def sphere():
    pos, vel, mass = plummer(100, seed=1)
    return pos, vel, mass


def test_wrong_shapes(sphere):
    pos, _, mass = sphere
    with pytest.raises(banyan.UsageError, match=r"pos: shape \(100, 2\), expected \(N, 3\)"):
        banyan.gravity(pos[:, :2], mass)
    with pytest.raises(banyan.UsageError, match=r"mass: shape \(100, 1\), expected \(N,\)"):
        banyan.gravity(pos, mass[:, None])
    with pytest.raises(banyan.UsageError, match="mass: 99 masses for 100 particles"):
        banyan.gravity(pos, mass[:99])
    with pytest.raises(banyan.UsageError, match=r"points: shape \(3,\)"):
        banyan.gravity_at(np.zeros(3), pos, mass)


def test_bad_values(sphere):
    pos, vel, mass = sphere
    bad = pos.copy()
    bad[17, 1] = np.nan
    with pytest.raises(banyan.UsageError, match="pos: particle 17 has a non-finite coordinate"):
        banyan.gravity(bad, mass)
    m = mass.copy()
    m[5] = -1.0
    with pytest.raises(banyan.UsageError, match="mass: particle 5 has mass -1.0; masses must be positive"):
        banyan.gravity(pos, m)
    m[5] = 0.0
    with pytest.raises(banyan.UsageError, match="particle 5 has mass 0.0"):
        banyan.Simulation(pos, vel, m)
    v = vel.copy()
    v[3, 0] = np.inf
    with pytest.raises(banyan.UsageError, match="vel: particle 3 has a non-finite velocity"):
        banyan.Simulation(pos, v, mass)
    big = pos.copy()
    big[2, 0] = 1e300
    with pytest.raises(banyan.UsageError, match="pos: particle 2 has a value beyond float32's range"):
        banyan.gravity(big, mass)


def test_zero_particles_and_wrong_types(sphere):
    pos, _, mass = sphere
    with pytest.raises(banyan.UsageError, match=r"no particles \(N = 0\)"):
        banyan.gravity(np.empty((0, 3)), np.empty(0))
    with pytest.raises(banyan.UsageError, match="floating-point values are needed, got an array of int64"):
        banyan.gravity(np.ones((10, 3), np.int64), np.ones(10))
    with pytest.raises(banyan.UsageError, match="floating-point values are needed"):
        banyan.gravity([["a", "b", "c"]], [1.0])


def test_bad_parameters(sphere):
    pos, vel, mass = sphere
    with pytest.raises(banyan.UsageError, match=r"theta must be in \[0, 1\], got 1.5"):
        banyan.gravity(pos, mass, theta=1.5)
    with pytest.raises(banyan.UsageError, match="eps must be >= 0"):
        banyan.gravity(pos, mass, eps=-1)
    with pytest.raises(banyan.UsageError, match=r"dt must be in \(0, 1e30\), got 0"):
        banyan.Simulation(pos, vel, mass, dt=0)
    with pytest.raises(banyan.UsageError, match="opening must be 'paper' or 'bmax', got 'gadget'"):
        banyan.Simulation(pos, vel, mass, opening="gadget")
    with pytest.raises(banyan.UsageError, match=r"alpha must be in \[0, 1e30\), got -0.1"):
        banyan.Simulation(pos, vel, mass, alpha=-0.1)
    with pytest.raises(banyan.UsageError, match=r"alpha must be in \[0, 1e30\), got nan"):
        banyan.Simulation(pos, vel, mass, alpha=float("nan"))
    with pytest.raises(banyan.UsageError, match="backend must be 'auto', 'cuda' or 'opencl', got 'metal'"):
        banyan.gravity(pos, mass, backend="metal")
    with pytest.raises(banyan.UsageError, match="device must be None"):
        banyan.gravity(pos, mass, device=-2)


def test_unreachable_end_time_is_refused(sphere):
    # A time 10^15 steps or more away used to return at once having done nothing.
    pos, vel, mass = sphere
    sim = banyan.Simulation(pos, vel, mass, dt=1 / 64)
    for t in (1e20, 1e300):
        with pytest.raises(banyan.UsageError, match="cannot be reached: it must be finite and at most 10.15 steps"):
            sim.evolve(t)
    with pytest.raises(banyan.UsageError, match="t_end must be finite"):
        sim.evolve(float("inf"))
    assert sim.steps == 0
    sim.evolve(2 / 64)  # still usable
    assert sim.steps == 2


def test_absent_device_is_an_error_that_lists_what_is_there(sphere):
    pos, _, mass = sphere
    with pytest.raises(banyan.UsageError, match="device"):
        banyan.gravity(pos, mass, backend="opencl", device=99)


def test_bad_checkpoint(tmp_path):
    p = tmp_path / "not-a-checkpoint"
    p.write_bytes(b"hello")
    with pytest.raises(banyan.UsageError, match="not-a-checkpoint"):
        banyan.Simulation.load(p)
    with pytest.raises(banyan.UsageError):
        banyan.Simulation.load(tmp_path / "missing")
