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


def test_whole_numbers_beyond_the_module_are_refused_by_name(sphere, tmp_path):
    # A Python int beyond the compiled module's integers used to fail there with a TypeError ("incompatible
    # function arguments") that named no argument.
    pos, vel, mass = sphere
    whole = "must be a whole number from"
    with pytest.raises(banyan.UsageError, match=f"max_rung {whole} 0 to 30, got {2 ** 71}$"):
        banyan.Simulation(pos, vel, mass, max_rung=2 ** 71)
    with pytest.raises(banyan.UsageError, match=r"device must be None \(the best\) or an index from 0 to 2\^31 - 1"):
        banyan.gravity(pos, mass, device=2 ** 70)
    with pytest.raises(banyan.UsageError, match=rf"n {whole} 1 to 2\^31 - 1, got {2 ** 70}$"):
        banyan.galaxy(n=2 ** 70)
    with pytest.raises(banyan.UsageError, match=rf"seed {whole} 0 to 2\^63 - 1, got {2 ** 64}$"):
        banyan.galaxy(n=1000, seed=2 ** 64)
    sim = banyan.Simulation(pos, vel, mass)
    for n in (2 ** 64, 10 ** 15 + 1, -1, 1.0):
        with pytest.raises(banyan.UsageError, match=rf"step: n {whole} 0 to 10\^15, got {n!r}$"):
            sim.step(n)
    with pytest.raises(banyan.UsageError, match=f"render: size {whole} 1 to 16384, got {2 ** 80}$"):
        sim.render(tmp_path / "look.png", size=2 ** 80)
    assert sim.steps == 0 and not (tmp_path / "look.png").exists()
    sim.step(np.int64(2))  # NumPy's integers are whole numbers too
    assert sim.steps == 2


def test_empty_paths_are_refused_by_name(sphere, tmp_path, monkeypatch):
    # An empty path used to reach the writer and fail at its rename, naming no argument.
    pos, vel, mass = sphere
    sim = banyan.Simulation(pos, vel, mass)
    monkeypatch.chdir(tmp_path)
    for what, call in (("write_snapshot", lambda: sim.write_snapshot("")),
                       ("write_snapshot", lambda: sim.write_snapshot("", format="tipsy")),
                       ("save", lambda: sim.save("")), ("render", lambda: sim.render("")),
                       ("Simulation.load", lambda: banyan.Simulation.load(""))):
        with pytest.raises(banyan.UsageError, match=f"^{what}: path is empty; give the name of a file$"):
            call()
    assert list(tmp_path.iterdir()) == []  # and nothing was written, not even a temporary file
