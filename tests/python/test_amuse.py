"""banyan.amuse.Banyan, banyan as an AMUSE gravitational-dynamics code: units through a converter, the same numbers as
banyan.Simulation, energies against AMUSE's own particle-set functions, the field at points against a float64 direct
sum, and Bridges of a banyan cluster with a second banyan code and with AMUSE's Hermite (a direct-summation code
from PyPI: amuse-hermite). Skipped where AMUSE (amuse-framework) is not installed; the Hermite Bridge also where
amuse-hermite is not."""
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("amuse.couple.bridge", reason="AMUSE is not installed (pip install amuse-framework)")

from amuse.couple import bridge  # noqa: E402
from amuse.datamodel import Particles, ParticlesSuperset  # noqa: E402
from amuse.ic.plummer import new_plummer_model  # noqa: E402
from amuse.support.literature import TrackLiteratureReferences  # noqa: E402
from amuse.units import constants, nbody_system, units  # noqa: E402

import banyan  # noqa: E402
from banyan.amuse import Banyan  # noqa: E402
from conftest import plummer  # noqa: E402

TrackLiteratureReferences.suppress_output()  # AMUSE's list of papers to cite, printed at exit

CONVERTER = nbody_system.nbody_to_si(1000 | units.MSun, 1 | units.parsec)  # N-body time: 0.471 Myr
EPS = 0.1 | units.parsec


def cluster(n=256, seed=3, converter=CONVERTER):
    return new_plummer_model(n, convert_nbody=converter, random=np.random.RandomState(seed))


def code(backend, particles=None, eps=EPS, dt=0.01 | units.Myr, converter=CONVERTER, **parameters):
    gravity = Banyan(converter, backend=backend)
    gravity.parameters.epsilon_squared = eps ** 2
    gravity.parameters.timestep = dt
    for name, value in parameters.items():
        setattr(gravity.parameters, name, value)
    if particles is not None:
        gravity.particles.add_particles(particles)
    return gravity


def energy(gravity):
    return gravity.kinetic_energy + gravity.potential_energy


def amuse_energies(particles, eps=EPS):
    """AMUSE's own sums over a particle set (float64, all pairs) with the same Plummer softening."""
    return particles.kinetic_energy(), particles.potential_energy(G=constants.G, smoothing_length_squared=eps ** 2)


def nbody_particles(pos, vel, mass):
    """An AMUSE particle set in N-body units."""
    stars = Particles(len(mass))
    stars.mass = mass | nbody_system.mass
    stars.position = pos | nbody_system.length
    stars.velocity = vel | nbody_system.speed
    return stars


def test_units_parameters_and_model_time(backend):
    gravity = code(backend, cluster(64), dt=0.01 | units.Myr)
    p = gravity.parameters
    assert p.epsilon_squared.value_in(units.parsec ** 2) == pytest.approx(0.01, rel=1e-12)
    assert p.timestep.value_in(units.Myr) == pytest.approx(0.01, rel=1e-12)
    assert p.opening_angle == 0.75 and p.opening_criterion == "paper" and p.time_steps == "shared"
    assert p.rung_rule == "symmetric"
    assert p.point_softening == "code" and p.direct_at_point is False
    assert gravity.model_time == 0 | units.s and len(gravity.particles) == 64
    assert gravity.particles.total_mass().value_in(units.MSun) == pytest.approx(1000, rel=1e-12)
    assert gravity.total_mass.value_in(units.MSun) == pytest.approx(1000, rel=1e-12)
    # A whole number of timesteps: steps of timestep itself, on the Simulation made at the commit.
    gravity.evolve_model(0.05 | units.Myr)
    assert gravity.model_time.value_in(units.Myr) == pytest.approx(0.05, rel=1e-12) and gravity.rebuilds == 1
    # An interval that is not: ceil(0.0234 / 0.01) = 3 equal steps of 0.0078 Myr, ending exactly at the time asked.
    t = (0.05 + 0.0234) | units.Myr
    gravity.evolve_model(t)
    assert gravity.model_time.value_in(units.Myr) == pytest.approx(0.0734, rel=1e-12) and gravity.rebuilds == 2
    before = gravity.model_time
    gravity.evolve_model(0.01 | units.Myr)  # in the past: nothing happens
    assert gravity.model_time == before
    with pytest.raises(Exception, match="opening_criterion must be one of"):
        p.opening_criterion = "widest"
    gravity.stop()


def test_same_numbers_as_simulation_in_nbody_units(backend):
    """Without a converter the particles are in N-body units; evolve_model in whole steps, and a recommit of the
    same velocities in between, give banyan.Simulation's numbers bit for bit."""
    pos, vel, mass = (a.astype(np.float32) for a in plummer(300, seed=2))
    sim = banyan.Simulation(pos, vel, mass, eps=0.05, dt=1 / 64, backend=backend)
    sim.evolve(0.5)
    stars = nbody_particles(pos, vel, mass)
    gravity = Banyan(backend=backend)
    assert gravity.parameters.epsilon_squared == 0.05 ** 2 | nbody_system.length ** 2
    assert gravity.parameters.timestep == 1 / 64 | nbody_system.time
    gravity.particles.add_particles(stars)
    gravity.evolve_model(0.125 | nbody_system.time)
    gravity.evolve_model(0.25 | nbody_system.time)
    gravity.particles.velocity = gravity.particles.velocity  # the state model recommits: a new Simulation
    gravity.evolve_model(0.5 | nbody_system.time)
    assert gravity.rebuilds == 2 and gravity.model_time == 0.5 | nbody_system.time
    assert np.array_equal(gravity.particles.position.value_in(nbody_system.length).astype(np.float32), sim.positions)
    assert np.array_equal(gravity.particles.velocity.value_in(nbody_system.speed).astype(np.float32), sim.velocities)
    e = sim.energies()
    assert gravity.kinetic_energy == e["kinetic"] | nbody_system.energy
    assert gravity.potential_energy == e["potential"] | nbody_system.energy
    acc = np.column_stack([a.value_in(nbody_system.acceleration) for a in gravity.particles.get_acceleration()])
    assert np.array_equal(acc.astype(np.float32), sim.accelerations)
    gravity.stop()


class Interrupted:
    """A banyan.Simulation's compiled engine whose next step() or evolve() stops with KeyboardInterrupt after
    @p after steps, as Ctrl-C does between two steps; everything else is the engine's."""

    def __init__(self, engine, after):
        self.engine, self.after = engine, after

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def step(self, n):
        self.engine.step(self.after)
        raise KeyboardInterrupt

    def evolve(self, t_end):
        self.step(None)


def test_interrupted_evolve_model_goes_on_from_where_it_stopped(backend):
    """Ctrl-C midway through evolve_model: model_time and the particles are where the Simulation stopped (model_time
    used to stay at the call's start), and the next call steps from there to the time asked, giving
    banyan.Simulation.evolve's numbers bit for bit."""
    pos, vel, mass = (a.astype(np.float32) for a in plummer(200, seed=6))
    sim = banyan.Simulation(pos, vel, mass, eps=0.05, dt=1 / 64, backend=backend)
    sim.step(3)
    three = sim.positions
    sim.evolve(0.25)
    gravity = Banyan(backend=backend)
    gravity.particles.add_particles(nbody_particles(pos, vel, mass))
    inside = gravity.simulation
    inside._sim = Interrupted(inside._sim, after=3)
    with pytest.raises(KeyboardInterrupt):
        gravity.evolve_model(0.25 | nbody_system.time)
    inside._sim = inside._sim.engine
    assert gravity.model_time == 3 / 64 | nbody_system.time
    assert np.array_equal(gravity.particles.position.value_in(nbody_system.length).astype(np.float32), three)
    gravity.evolve_model(0.25 | nbody_system.time)
    assert gravity.model_time == 0.25 | nbody_system.time and gravity.rebuilds == 1 and inside.steps == 16
    assert np.array_equal(gravity.particles.position.value_in(nbody_system.length).astype(np.float32), sim.positions)
    gravity.stop()


def test_end_and_begin_times_out_of_reach_are_refused(backend):
    """An end time more than 10^15 steps away is refused by the Simulation's own rule (it used to step for ever, or
    fail in the module naming nothing), an infinite or NaN one by name (it raised OverflowError, or did nothing),
    and so is a begin_time that is not finite (it was taken, and then nothing moved); the code goes on after."""
    pos, vel, mass = plummer(64, seed=7)
    gravity = Banyan(backend=backend)
    gravity.particles.add_particles(nbody_particles(pos, vel, mass))
    gravity.evolve_model(2 / 64 | nbody_system.time)
    for t in (1e20, 3e15 / 64):
        with pytest.raises(banyan.UsageError, match="cannot be reached: it must be finite and at most 10.15 steps"):
            gravity.evolve_model(t | nbody_system.time)
    for t in (float("inf"), float("-inf"), float("nan")):
        with pytest.raises(banyan.UsageError, match=f"evolve_model: the end time must be finite, got {t}"):
            gravity.evolve_model(t | nbody_system.time)
    assert gravity.model_time == 2 / 64 | nbody_system.time and gravity.simulation.steps == 2
    gravity.evolve_model(4 / 64 | nbody_system.time)
    assert gravity.model_time == 4 / 64 | nbody_system.time and gravity.rebuilds == 1
    gravity.stop()
    fresh = Banyan(backend=backend)
    for t in (float("nan"), float("inf")):
        with pytest.raises(banyan.UsageError, match=f"begin_time must be finite, got {t}"):
            fresh.parameters.begin_time = t | nbody_system.time
    fresh.parameters.begin_time = 1 | nbody_system.time
    fresh.particles.add_particles(nbody_particles(pos, vel, mass))
    fresh.evolve_model(1.25 | nbody_system.time)
    assert fresh.model_time == 1.25 | nbody_system.time and fresh.simulation.steps == 16
    fresh.stop()


def test_energies_against_amuse_and_conservation(backend):
    """A Plummer cluster of 256 stars (1000 MSun, 1 pc) over 4 Myr, about three crossing times: banyan's energies
    against AMUSE's particle-set sums at the start and the end, and the energy error along the way."""
    stars = cluster()
    gravity = code(backend, stars)
    kinetic, potential = amuse_energies(stars)
    # Kinetic: float32 velocities summed in double (measured 1e-9); potential: the tree at theta 0.75 against all
    # pairs in float64 (measured 5e-7 at the start, 8e-6 at the end; 1e-3 would be a walk that lost a cell).
    assert abs(gravity.kinetic_energy / kinetic - 1) < 1e-6
    assert abs(gravity.potential_energy / potential - 1) < 1e-4
    e0 = energy(gravity)
    errors = []
    for t in np.arange(0.5, 4.01, 0.5):
        gravity.evolve_model(t | units.Myr)
        errors.append(abs(energy(gravity) / e0 - 1))
    # dt 0.01 Myr (0.021 N-body times), eps 0.1 pc: measured at most 5e-5.
    assert max(errors) < 2e-4, errors
    gravity.particles.new_channel_to(stars).copy()
    kinetic, potential = amuse_energies(stars)
    assert abs(gravity.kinetic_energy / kinetic - 1) < 1e-6
    assert abs(gravity.potential_energy / potential - 1) < 1e-4
    assert gravity.rebuilds == 1  # 0.5 Myr is a whole number of steps: one Simulation throughout
    gravity.stop()


def field_f64(points, stars, eps2):
    """Acceleration (M, 3) and potential (M,) in SI at @p points (M, 3) in m from all @p stars, float64, G of
    AMUSE; eps2 (M,) or scalar in m^2."""
    pos = stars.position.value_in(units.m)
    mass = stars.mass.value_in(units.kg)
    d = pos[None, :, :] - points[:, None, :]
    inv = 1.0 / np.sqrt((d ** 2).sum(-1) + np.reshape(eps2, (-1, 1)))
    g = constants.G.value_in(units.m ** 3 / units.kg / units.s ** 2)
    return g * (d * (mass * inv ** 3)[:, :, None]).sum(1), -g * (mass * inv).sum(1)


def test_gravity_and_potential_at_point_against_direct_sum(backend):
    stars = cluster()
    gravity = code(backend, stars)
    rng = np.random.default_rng(5)
    points = rng.normal(size=(100, 3)) * 2 * 3.0857e16  # inside and around the cluster, in m
    x, y, z = (points[:, i] | units.m for i in range(3))
    eps_points = rng.choice([0.0, 0.05, 0.2], size=100) | units.parsec
    e2 = EPS.value_in(units.m) ** 2
    # Tree (theta 0.75), measured: 1e-5 in the median, 3e-4 at worst, potentials 8e-5; direct: 6e-7 (float32).
    for direct, acc_tol, pot_tol in ((False, 3e-3, 1e-3), (True, 1e-5, 1e-5)):
        gravity.parameters.direct_at_point = direct
        # point_softening "code": the code's epsilon; the eps given is not used.
        ref_acc, ref_pot = field_f64(points, stars, e2)
        ax, ay, az = gravity.get_gravity_at_point(eps_points, x, y, z)
        acc = np.column_stack([a.value_in(units.m / units.s ** 2) for a in (ax, ay, az)])
        pot = gravity.get_potential_at_point(eps_points, x, y, z).value_in(units.m ** 2 / units.s ** 2)
        err = np.linalg.norm(acc - ref_acc, axis=1) / np.linalg.norm(ref_acc, axis=1)
        assert err.max() < acc_tol and np.median(err) < acc_tol / 10, (direct, np.median(err), err.max())
        assert np.max(np.abs(pot / ref_pot - 1)) < pot_tol
        # "combined": sqrt(epsilon_squared + eps^2) for each point.
        gravity.parameters.point_softening = "combined"
        ref_acc, ref_pot = field_f64(points, stars, e2 + eps_points.value_in(units.m) ** 2)
        ax, ay, az = gravity.get_gravity_at_point(eps_points, x, y, z)
        acc = np.column_stack([a.value_in(units.m / units.s ** 2) for a in (ax, ay, az)])
        pot = gravity.get_potential_at_point(eps_points, x, y, z).value_in(units.m ** 2 / units.s ** 2)
        err = np.linalg.norm(acc - ref_acc, axis=1) / np.linalg.norm(ref_acc, axis=1)
        assert err.max() < acc_tol and np.max(np.abs(pot / ref_pot - 1)) < pot_tol
        gravity.parameters.point_softening = "code"
    gravity.stop()


def test_changed_particles_reach_banyan(backend):
    """A kick through a channel (what Bridge does), new masses, added and removed particles: each is in banyan's
    next energies, equal to AMUSE's sums over the changed set."""
    stars = cluster(128)
    gravity = code(backend, stars)
    gravity.evolve_model(0.1 | units.Myr)
    channel = gravity.particles.new_channel_to(stars)
    channel.copy()
    stars.velocity *= 1.5
    stars.new_channel_to(gravity.particles).copy_attributes(["vx", "vy", "vz"])
    kinetic, potential = amuse_energies(stars)
    assert abs(gravity.kinetic_energy / kinetic - 1) < 1e-6
    stars.mass *= 2
    stars.new_channel_to(gravity.particles).copy_attributes(["mass"])
    kinetic, potential = amuse_energies(stars)
    assert abs(gravity.kinetic_energy / kinetic - 1) < 1e-6 and abs(gravity.potential_energy / potential - 1) < 1e-4
    extra = cluster(16, seed=9)
    extra.position += [2, 0, 0] | units.parsec
    gravity.particles.add_particles(extra)
    gravity.particles.remove_particles(gravity.particles[:10])
    assert len(gravity.particles) == 134
    kinetic, potential = amuse_energies(gravity.particles.copy())
    assert abs(gravity.kinetic_energy / kinetic - 1) < 1e-6 and abs(gravity.potential_energy / potential - 1) < 1e-4
    gravity.evolve_model(0.2 | units.Myr)
    assert gravity.model_time.value_in(units.Myr) == pytest.approx(0.2, rel=1e-12)
    gravity.stop()


def test_massless_particles_are_refused(backend):
    stars = cluster(16)
    stars[3].mass = 0 | units.MSun
    gravity = code(backend)
    with pytest.raises(banyan.UsageError, match="positive finite masses"):
        gravity.particles.add_particles(stars)
    gravity.stop()


def satellite(n, seed):
    """A small cluster (100 MSun, 0.2 pc) at 3 pc from the big one's centre, on a near-circular orbit."""
    stars = cluster(n, seed, nbody_system.nbody_to_si(100 | units.MSun, 0.2 | units.parsec))
    stars.position += [3, 0, 0] | units.parsec
    stars.velocity += [0, 0.9, 0] * (constants.G * (1000 | units.MSun) / (3 | units.parsec)).sqrt()
    return stars


def bridged(codes):
    """A Bridge of @p codes, each kicked by all the others, with a step of 0.05 Myr."""
    system = bridge.Bridge(timestep=0.05 | units.Myr)
    for c in codes:
        system.add_system(c, tuple(o for o in codes if o is not c))
    return system


def check_bridge(system, codes, t_end=2 | units.Myr):
    """The Bridge's energy (each code's own, plus half the potential of each in the others' fields) against AMUSE's
    sums over all particles (measured 2e-5: banyan's tree), and its conservation over t_end (about 4 N-body times
    of the cluster, 40 Bridge steps)."""
    def everything():
        return ParticlesSuperset([c.particles.copy() for c in codes])
    e0 = system.kinetic_energy + system.potential_energy
    assert abs(e0 / sum(amuse_energies(everything()), 0 | units.J) - 1) < 1e-4
    errors = []
    for t in np.arange(0.5, t_end.value_in(units.Myr) + 0.01, 0.5) | units.Myr:
        system.evolve_model(t)
        assert all(abs(c.model_time / t - 1) < 1e-12 for c in codes)
        e = system.kinetic_energy + system.potential_energy
        assert abs(e / sum(amuse_energies(everything()), 0 | units.J) - 1) < 1e-4
        errors.append(abs(e / e0 - 1))
    return errors


def test_bridge_of_two_banyan_codes(backend):
    """A cluster and a satellite, each in its own banyan code, coupled by Bridge: every Bridge step kicks the
    velocities of each with the other's get_gravity_at_point, so each code makes a new Simulation once a step."""
    big, small = code(backend, cluster()), code(backend, satellite(32, seed=4))
    system = bridged([big, small])
    errors = check_bridge(system, [big, small])
    assert max(errors) < 2e-4, errors  # measured 3e-5
    # Each kicked code makes one Simulation for each Bridge step (40), and one for the energies after each call.
    assert big.rebuilds == small.rebuilds == 40 + 5
    system.stop()


def test_bridge_step_that_is_not_a_whole_number_of_timesteps(backend):
    """A Bridge step of 0.05 Myr over code steps of 0.03 Myr: each drift is 2 equal steps of 0.025 Myr, still one
    new Simulation for each Bridge step, and the codes end where the Bridge does."""
    big = code(backend, cluster(128), dt=0.03 | units.Myr)
    small = code(backend, satellite(16, seed=5), dt=0.03 | units.Myr)
    system = bridged([big, small])
    e0 = system.kinetic_energy + system.potential_energy
    system.evolve_model(0.5 | units.Myr)
    assert big.rebuilds == small.rebuilds == 10 + 1
    assert abs(big.model_time / (0.5 | units.Myr) - 1) < 1e-12 and abs(small.model_time / (0.5 | units.Myr) - 1) < 1e-12
    # The final half kick changed the velocities: the Simulation is made anew, at model_time, with the timestep.
    sim = big.simulation
    t_nbody = CONVERTER.to_nbody(0.5 | units.Myr).value_in(nbody_system.time)
    assert big.rebuilds == 12 and sim.steps == 0 and sim.time == pytest.approx(t_nbody, rel=1e-6)
    assert abs((system.kinetic_energy + system.potential_energy) / e0 - 1) < 1e-4
    system.stop()


def test_bridge_with_hermite(backend, monkeypatch):
    """The same with the satellite in AMUSE's Hermite (direct summation, a worker process started through MPI).
    Hermite's field at points is softened with the eps given (banyan's, for the kicks) or its own epsilon_squared
    (potentials), banyan's with its own: all EPS, so each pair across the codes is softened as the pairs within
    each, and the kicks are the gradients of the potentials in the energy."""
    hermite = pytest.importorskip("amuse.community.hermite.interface",
                                  reason="amuse-hermite is not installed (pip install amuse-hermite)")
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # Open MPI's mpiexec refuses root without these
        monkeypatch.setenv("OMPI_ALLOW_RUN_AS_ROOT", "1")
        monkeypatch.setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    big = code(backend, cluster())
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="MPI .* not available")  # it falls back to sockets: fine
        small = hermite.Hermite(CONVERTER)
    try:
        small.parameters.epsilon_squared = EPS ** 2
        small.particles.add_particles(satellite(32, seed=4))
        system = bridged([big, small])
        errors = check_bridge(system, [big, small])
        assert max(errors) < 2e-4, errors  # measured 4e-5
    finally:
        small.stop()
    big.stop()


def test_docs_section_runs_as_written(tmp_path, monkeypatch):
    """docs/python.md's AMUSE section (its ```py block: test_tutorial.py runs the ```python ones, which need no
    AMUSE) runs as written, and what it prints holds."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "python.md").read_text()
    section = text[text.index("\n## AMUSE"):]
    blocks = re.findall(r"```py\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    ns = {}
    exec(compile(blocks[0], "docs/python.md (AMUSE)", "exec"), ns)
    assert abs(ns["de"]) < 1e-4 and abs(ns["bridge_de"]) < 1e-4  # measured 5e-6 and 7e-6
    assert abs(ns["ratio"] - 1) < 1e-4  # measured 2e-5
    assert ns["system"].model_time.value_in(units.Myr) == pytest.approx(1, rel=1e-12)


def test_banyan_is_in_amuses_list_of_papers_to_cite():
    # AMUSE prints at exit the papers of the codes a script used ("Please cite any relevant articles"); banyan was not
    # in it (issue 48). Its interface registers the paper as AMUSE's codes do: LiteratureReferencesMixIn, and an
    # ADS footnote in the interface's docstring, which AMUSE parses with docutils.
    Banyan()
    listed = TrackLiteratureReferences.default().all_literature_references_string()
    assert f'"AMUSE-Banyan ({banyan.__version__})"' in listed and "ADS:2012JCoPh.231.2825B" in listed
    script = "from banyan.amuse import Banyan; Banyan()"
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert "Please cite" in r.stdout and "AMUSE-Banyan" in r.stdout and "2012JCoPh.231.2825B" in r.stdout
    assert "(WARNING" not in r.stderr and "(ERROR" not in r.stderr, r.stderr  # the docstring parses cleanly
