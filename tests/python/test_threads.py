"""Several Python threads on one device at once (issue 30): two Simulations, a Simulation and gravity(), many
gravity() calls. Calls on one device are serialised in the module, so each thread gets the numbers it gets alone,
bit for bit, and the interpreter never dies (before, the threads shared the device's kernels and buffers and it
crashed)."""
import threading

import numpy as np
import pytest

import banyan
from conftest import plummer

STEPS = 6
ROUNDS = 8  # the threads' calls interleave differently each time
JOIN_S = 300  # a thread still running then is a deadlock


def run_threads(*targets):
    """Runs each target in a thread of its own, started together; re-raises the first exception of any."""
    start = threading.Barrier(len(targets))
    errors = []

    def body(f):
        try:
            start.wait()
            f()
        except BaseException as e:  # noqa: BLE001 (a thread's failure is the test's)
            errors.append(e)

    threads = [threading.Thread(target=body, args=(f,), daemon=True) for f in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_S)
    assert not any(t.is_alive() for t in threads), "a thread did not finish: deadlock"
    if errors:
        raise errors[0]


def simulate(backend, seed, n=2000):
    """A small simulation stepped one step per call (so that other threads' calls fall between them): its final
    positions, velocities, accelerations and energies."""
    pos, vel, mass = plummer(n, seed=seed)
    sim = banyan.Simulation(pos, vel, mass, eps=0.05, dt=1 / 64, backend=backend)
    for _ in range(STEPS):
        sim.step(1)
    return sim.positions, sim.velocities, sim.accelerations, sim.energies()["total"]


def field(backend, n, seed):
    pos, _, mass = plummer(n, seed=seed)
    return banyan.gravity(pos, mass, theta=0.6, eps=0.01, backend=backend)


def assert_same(got, alone):
    assert len(got) == len(alone)
    for g, a in zip(got, alone):
        assert np.array_equal(g, a)


def test_two_simulations_on_one_device(backend):
    alone = [simulate(backend, seed) for seed in (1, 2)]
    got = [None, None]

    def one(i):
        def f():
            got[i] = simulate(backend, i + 1)
        return f

    for _ in range(ROUNDS):
        run_threads(one(0), one(1))
        for g, a in zip(got, alone):
            assert_same(g, a)


def test_simulation_and_gravity_on_one_device(backend):
    sim_alone = simulate(backend, 3)
    # Two sizes: the device's shared tree and buffers change size between the calls.
    gravity_alone = [field(backend, 3000, 4), field(backend, 500, 5)]
    got = {}

    def simulation():
        got["sim"] = simulate(backend, 3)

    def gravity():
        got["gravity"] = [field(backend, 3000, 4) if i % 2 == 0 else field(backend, 500, 5) for i in range(8)]

    for _ in range(ROUNDS):
        run_threads(simulation, gravity)
        assert_same(got["sim"], sim_alone)
        for i, g in enumerate(got["gravity"]):
            assert_same(g, gravity_alone[i % 2])


def test_many_threads_calling_gravity(backend):
    sizes = [200, 1500, 3000, 700]
    alone = [field(backend, n, seed) for seed, n in enumerate(sizes)]
    got = [None] * len(sizes)

    def caller(i):
        def f():
            got[i] = [field(backend, sizes[i], i) for _ in range(4)]
        return f

    for _ in range(ROUNDS):
        run_threads(*(caller(i) for i in range(len(sizes))))
        for i, results in enumerate(got):
            for g in results:
                assert_same(g, alone[i])
