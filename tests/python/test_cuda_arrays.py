"""CUDA arrays of CuPy and PyTorch through DLPack: results of the same library on the same device, the same numbers
as from NumPy arrays (the same computation, bit for bit). Skipped where there is no CUDA device, CuPy or PyTorch."""
import numpy as np
import pytest

import banyan
from conftest import PRESENT, plummer

pytestmark = pytest.mark.skipif("cuda" not in PRESENT, reason="no CUDA device on this machine")


@pytest.fixture(params=["cupy", "torch"])
def lib(request):
    return pytest.importorskip(request.param)


def to_device(lib, a):
    return lib.asarray(a) if lib.__name__ == "cupy" else lib.as_tensor(a, device="cuda:0")


def to_host(lib, a):
    return lib.asnumpy(a) if lib.__name__ == "cupy" else a.cpu().numpy()


def check_on_device(lib, a):
    if lib.__name__ == "cupy":
        assert isinstance(a, lib.ndarray) and a.device.id == 0
    else:
        assert isinstance(a, lib.Tensor) and a.is_cuda and a.device.index == 0
    assert str(a.dtype).endswith("float32")


@pytest.mark.parametrize("direct", [False, True])
def test_gravity_on_cuda_arrays_is_the_host_computation(lib, direct):
    pos, _, mass = plummer(20000 if not direct else 3000, seed=21)
    pos32, mass32 = pos.astype(np.float32), mass.astype(np.float32)
    acc_h, pot_h = banyan.gravity(pos32, mass32, eps=0.01, backend="cuda", direct=direct)
    acc_d, pot_d = banyan.gravity(to_device(lib, pos32), to_device(lib, mass32), eps=0.01, direct=direct)
    check_on_device(lib, acc_d)
    check_on_device(lib, pot_d)
    assert acc_d.shape == (len(mass), 3) and pot_d.shape == (len(mass),)
    assert np.array_equal(to_host(lib, acc_d), acc_h) and np.array_equal(to_host(lib, pot_d), pot_h)
    # float64 on the device: converted once, the same numbers.
    acc_64, _ = banyan.gravity(to_device(lib, pos), to_device(lib, mass), eps=0.01, direct=direct)
    assert np.array_equal(to_host(lib, acc_64), acc_h)


def test_gravity_at_on_cuda_arrays(lib):
    pos, _, mass = plummer(10000, seed=22)
    points = np.random.default_rng(3).normal(size=(999, 3)).astype(np.float32)
    acc_h, pot_h = banyan.gravity_at(points, pos.astype(np.float32), mass.astype(np.float32), eps=0.01,
                                     backend="cuda")
    acc_d, pot_d = banyan.gravity_at(to_device(lib, points), to_device(lib, pos.astype(np.float32)),
                                     to_device(lib, mass.astype(np.float32)), eps=0.01)
    check_on_device(lib, acc_d)
    assert np.array_equal(to_host(lib, acc_d), acc_h) and np.array_equal(to_host(lib, pot_d), pot_h)


def test_scaled_system_on_cuda_arrays(lib):
    # Internal units (powers of two) are chosen and applied on the device as on the host: the same numbers.
    pos, _, mass = plummer(5000, seed=23)
    pos, mass = (pos * 3e4).astype(np.float32), (mass * 1e12).astype(np.float32)
    acc_h, pot_h = banyan.gravity(pos, mass, eps=100.0, backend="cuda")
    acc_d, pot_d = banyan.gravity(to_device(lib, pos), to_device(lib, mass), eps=100.0)
    assert np.array_equal(to_host(lib, acc_d), acc_h) and np.array_equal(to_host(lib, pot_d), pot_h)


def test_bad_cuda_input(lib):
    pos, _, mass = plummer(100, seed=24)
    p, m = to_device(lib, pos.astype(np.float32)), to_device(lib, mass.astype(np.float32))
    with pytest.raises(banyan.UsageError, match="same CUDA device"):
        banyan.gravity(p, mass)
    with pytest.raises(banyan.UsageError, match="need backend 'cuda'"):
        banyan.gravity(p, m, backend="opencl")
    bad = pos.astype(np.float32)
    bad[7, 2] = np.nan
    with pytest.raises(banyan.UsageError, match="pos: particle 7 has a non-finite coordinate"):
        banyan.gravity(to_device(lib, bad), m)
    neg = mass.astype(np.float32)
    neg[3] = -1
    with pytest.raises(banyan.UsageError, match="mass: particle 3 has mass -1.0"):
        banyan.gravity(p, to_device(lib, neg))
    with pytest.raises(banyan.UsageError, match=r"shape \(100, 2\)"):
        banyan.gravity(p[:, :2], m)


@pytest.mark.parametrize("scale", [1.0, 2.0 ** 20])
def test_simulation_from_cuda_arrays_is_the_host_run(lib, scale):
    # A Simulation made from CUDA arrays starts from them on the GPU (scaled into internal units there, copied row
    # by row into the tree) and gives results of the same library: the run made from the same NumPy arrays on the
    # same device, bit for bit. scale 2^20 (lengths 2^20, masses 2^-30, so velocities 2^-25) makes the internal units
    # no identity.
    pos, vel, mass = plummer(3000, seed=25)
    pos = (pos * scale).astype(np.float32)
    mass = (mass * (2.0 ** -30 if scale > 1 else 1.0)).astype(np.float32)
    vel = (vel * (2.0 ** -25 if scale > 1 else 1.0)).astype(np.float32)
    eps, dt = 0.05 * scale, (1 / 64) * (2.0 ** 45 if scale > 1 else 1.0)
    ids = np.arange(3000, dtype=np.int64) * 7 + 1
    host = banyan.Simulation(pos, vel, mass, eps=eps, dt=dt, backend="cuda", ids=ids)
    dev = banyan.Simulation(to_device(lib, pos), to_device(lib, vel), to_device(lib, mass), eps=eps, dt=dt,
                            ids=to_device(lib, ids))
    assert dev.device == host.device
    for sim in (host, dev):
        sim.step(5)
    for name in ("positions", "velocities", "accelerations", "potentials"):
        a, b = getattr(host, name), getattr(dev, name)
        check_on_device(lib, b)
        assert isinstance(a, np.ndarray) and np.array_equal(to_host(lib, b), a), name
    assert host.energies() == dev.energies()
    assert np.array_equal(dev.ids, ids)
    check_on_device(lib, dev.masses)  # the masses too come back in the library they were given in
    assert np.array_equal(to_host(lib, dev.masses), host.masses) and np.array_equal(host.masses, mass)
    # float64 arrays on the device: converted once, the same run.
    dev64 = banyan.Simulation(to_device(lib, pos.astype(np.float64)), to_device(lib, vel.astype(np.float64)),
                              to_device(lib, mass.astype(np.float64)), eps=eps, dt=dt)
    dev64.step(5)
    assert np.array_equal(to_host(lib, dev64.positions), host.positions)


def test_simulation_from_cuda_arrays_saves_and_loads(lib, tmp_path):
    pos, vel, mass = (a.astype(np.float32) for a in plummer(2000, seed=26))
    dev = banyan.Simulation(to_device(lib, pos), to_device(lib, vel), to_device(lib, mass), eps=0.05)
    dev.step(3)
    dev.save(tmp_path / "run.ckpt")
    dev.write_snapshot(tmp_path / "snap.hdf5")
    dev.step(2)
    again = banyan.Simulation.load(tmp_path / "run.ckpt")  # a loaded run gives NumPy arrays
    again.step(2)
    assert isinstance(again.positions, np.ndarray)
    assert np.array_equal(again.positions, to_host(lib, dev.positions))


def test_simulation_refuses_bad_cuda_input(lib):
    pos, vel, mass = (a.astype(np.float32) for a in plummer(100, seed=27))
    p, v, m = to_device(lib, pos), to_device(lib, vel), to_device(lib, mass)
    with pytest.raises(banyan.UsageError, match="same CUDA device"):
        banyan.Simulation(p, vel, m)
    with pytest.raises(banyan.UsageError, match="need backend 'cuda'"):
        banyan.Simulation(p, v, m, backend="opencl")
    bad = vel.copy()
    bad[9, 1] = np.inf
    with pytest.raises(banyan.UsageError, match="vel: particle 9 has a non-finite velocity"):
        banyan.Simulation(p, to_device(lib, bad), m)
    with pytest.raises(banyan.UsageError, match="vel: 99 velocities for 100 particles"):
        banyan.Simulation(p, v[:99], m)
    with pytest.raises(banyan.UsageError, match="dt"):
        banyan.Simulation(p, v, m, dt=-1.0)
