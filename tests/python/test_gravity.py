"""banyan.gravity and banyan.gravity_at against float64 direct summation, on every backend present."""
import numpy as np
import pytest

import banyan
from conftest import direct_f64, plummer


def rel_errors(a, ref):
    return np.linalg.norm(a - ref, axis=1) / np.linalg.norm(ref, axis=1)


def test_devices_lists_what_it_can_open():
    devs = banyan.devices()
    assert devs, "no device at all: PoCL at least should be there"
    for d in devs:
        assert d["backend"] in ("cuda", "opencl") and d["label"].startswith(d["backend"] + " #")


@pytest.mark.parametrize("n", [1, 2, 3000])
def test_gravity_against_direct_f64(backend, n):
    pos, _, mass = plummer(n, seed=n)
    eps = 0.01
    acc, pot = banyan.gravity(pos, mass, theta=0.5, eps=eps, backend=backend)
    assert acc.shape == (n, 3) and pot.shape == (n,) and acc.dtype == np.float32 and pot.dtype == np.float32
    ref_acc, ref_pot = direct_f64(pos, mass, eps)
    if n == 1:  # alone: no force, no potential
        assert np.all(acc == 0) and np.all(pot == 0)
        return
    err = rel_errors(acc, ref_acc)
    # theta 0.5 with quadrupoles: the 99th percentile is ~1e-4 on a Plummer sphere (docs/accuracy); float32 alone
    # gives ~1e-6. A walk that missed or doubled a cell would be off by far more.
    assert np.percentile(err, 99) < 2e-3 and err.max() < 2e-2
    assert np.max(np.abs(pot - ref_pot) / np.abs(ref_pot)) < 2e-3


def test_gravity_direct_is_direct(backend):
    pos, _, mass = plummer(500, seed=7)
    acc, pot = banyan.gravity(pos, mass, eps=0.05, backend=backend, direct=True)
    ref_acc, ref_pot = direct_f64(pos, mass, 0.05)
    assert rel_errors(acc, ref_acc).max() < 1e-4
    assert np.max(np.abs(pot - ref_pot) / np.abs(ref_pot)) < 1e-5


def test_gravity_keeps_input_order(backend):
    pos, _, mass = plummer(2000, seed=3)
    acc, pot = banyan.gravity(pos, mass, eps=0.01, backend=backend)
    perm = np.random.default_rng(0).permutation(len(mass))
    acc_p, pot_p = banyan.gravity(pos[perm], mass[perm], eps=0.01, backend=backend)
    ref_acc, _ = direct_f64(pos[perm], mass[perm], 0.01)
    # Particle i of the permuted input gets the force of its own position (the tree differs in float rounding only).
    assert np.percentile(rel_errors(acc_p, ref_acc), 99) < 5e-3
    assert np.percentile(rel_errors(acc_p, acc[perm]), 99) < 5e-3


def test_gravity_at_points(backend):
    pos, _, mass = plummer(3000, seed=11)
    points = np.random.default_rng(5).uniform(-3, 3, size=(257, 3))
    acc, pot = banyan.gravity_at(points, pos, mass, theta=0.5, eps=0.01, backend=backend)
    assert acc.shape == (257, 3) and pot.shape == (257,)
    ref_acc, ref_pot = direct_f64(pos, mass, 0.01, targets=points)
    assert np.percentile(rel_errors(acc, ref_acc), 99) < 2e-3
    assert np.max(np.abs(pot - ref_pot) / np.abs(ref_pot)) < 2e-3
    # Points far outside: the field of a unit point mass.
    far = np.array([[1000.0, 0, 0], [0, -2000.0, 0]])
    acc_far, pot_far = banyan.gravity_at(far, pos, mass, backend=backend)
    assert np.allclose(pot_far, [-1e-3, -5e-4], rtol=1e-3)
    assert np.allclose(acc_far[0], [-1e-6, 0, 0], rtol=1e-2, atol=1e-9)


def test_gravity_at_direct_and_no_points(backend):
    pos, _, mass = plummer(300, seed=2)
    points = np.random.default_rng(1).normal(size=(20, 3))
    acc, pot = banyan.gravity_at(points, pos, mass, eps=0.1, backend=backend, direct=True)
    ref_acc, ref_pot = direct_f64(pos, mass, 0.1, targets=points)
    assert rel_errors(acc, ref_acc).max() < 1e-4
    acc0, pot0 = banyan.gravity_at(np.empty((0, 3)), pos, mass, backend=backend)
    assert acc0.shape == (0, 3) and pot0.shape == (0,)


def test_float32_and_float64_inputs_agree(backend):
    pos, _, mass = plummer(1000, seed=4)
    a64, p64 = banyan.gravity(pos, mass, eps=0.01, backend=backend)
    a32, p32 = banyan.gravity(pos.astype(np.float32), mass.astype(np.float32), eps=0.01, backend=backend)
    # float64 input is converted to float32 once, so both are the same computation, bit for bit.
    assert np.array_equal(a64, a32) and np.array_equal(p64, p32)
    # Non-contiguous float32 input (a slice) is copied into C order; same numbers.
    wide = np.zeros((1000, 6), np.float32)
    wide[:, ::2] = pos
    a_slice, _ = banyan.gravity(wide[:, ::2], mass.astype(np.float32), eps=0.01, backend=backend)
    assert np.array_equal(a_slice, a32)


def test_scaled_units_scale_results(backend):
    # G = 1 in any units: lengths x 2^16 and masses x 2^32 leave a = M / r^2 unchanged and scale phi by 2^16. Powers of two
    # scale floats exactly, so banyan's results must scale exactly too (it works in internal units of its own).
    pos, _, mass = plummer(1000, seed=9)
    a, p = banyan.gravity(pos, mass, eps=0.01, backend=backend)
    a2, p2 = banyan.gravity(pos * 2.0**16, mass * 2.0**32, eps=0.01 * 2.0**16, backend=backend)
    assert np.array_equal(a2, a) and np.array_equal(p2, p * np.float32(2.0**16))


def test_softening_far_beyond_the_extent(backend):
    # eps of 1e13 extents: accelerations of order M extent / eps^3. In units of the extent alone 1 / eps^3 left
    # float's range and every acceleration came out 0; internal units of the softening's length keep them.
    pos, _, mass = plummer(1000, seed=4)
    mass = mass * 1e30  # M extent / eps^3 well inside float32 in the caller's units
    eps = 1e13
    acc, pot = banyan.gravity(pos, mass, eps=eps, backend=backend)
    ref_acc, ref_pot = direct_f64(pos, mass, eps)
    assert np.all(np.linalg.norm(acc, axis=1) > 0)
    assert np.max(rel_errors(acc, ref_acc)) < 1e-3
    assert np.max(np.abs(pot - ref_pot) / np.abs(ref_pot)) < 1e-3
