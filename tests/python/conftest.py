"""Shared fixtures of the Python tests: the backends present (a test on an absent one is skipped, never passed),
the banyan program beside the module (pip install . puts it on the environment's PATH), and small particle sets."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import banyan

PRESENT = sorted({d["backend"] for d in banyan.devices()})


def backend_params():
    return [pytest.param(b, marks=pytest.mark.skipif(b not in PRESENT, reason=f"no {b} device on this machine"))
            for b in ("cuda", "opencl")]


@pytest.fixture(params=backend_params())
def backend(request):
    return request.param


@pytest.fixture(scope="session")
def banyan_exe():
    beside = os.path.join(os.path.dirname(sys.executable), "banyan")  # the environment's bin/, not yet on PATH
    exe = os.environ.get("BANYAN_EXE") or (beside if os.access(beside, os.X_OK) else shutil.which("banyan"))
    if exe is None:
        pytest.fail("the banyan program is not on PATH (pip install . puts it there; or set BANYAN_EXE)")
    return exe


@pytest.fixture(scope="session")
def cli(banyan_exe):
    def run(*args, check=True):
        r = subprocess.run([banyan_exe, *map(str, args)], capture_output=True, text=True)
        if check and r.returncode != 0:
            raise AssertionError(f"banyan {' '.join(map(str, args))} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
        return r
    return run


def plummer(n, seed=1):
    """A Plummer sphere in N-body units (total mass 1), float64, in numpy: independent of banyan's generator."""
    rng = np.random.default_rng(seed)
    r = 1.0 / np.sqrt(rng.uniform(1e-3, 1.0, n) ** (-2.0 / 3.0) - 1.0) * (3 * np.pi / 16)
    d = rng.normal(size=(n, 3))
    pos = d / np.linalg.norm(d, axis=1)[:, None] * r[:, None]
    vel = rng.normal(size=(n, 3)) * 0.3
    return pos, vel, np.full(n, 1.0 / n)


def direct_f64(pos, mass, eps, targets=None):
    """Accelerations and potentials by direct summation in float64 (the reference); a particle at distance 0 (the
    target itself) is left out."""
    pos = np.asarray(pos, np.float64)
    mass = np.asarray(mass, np.float64)
    t = pos if targets is None else np.asarray(targets, np.float64)
    acc = np.zeros((len(t), 3))
    pot = np.zeros(len(t))
    for i0 in range(0, len(t), 256):
        d = pos[None, :, :] - t[i0:i0 + 256, None, :]
        d2 = (d ** 2).sum(-1)
        with np.errstate(divide="ignore"):
            inv = np.where(d2 > 0, 1.0 / np.sqrt(d2 + eps * eps), 0.0)  # itself (distance 0): excluded, as banyan does
        acc[i0:i0 + 256] = (d * (mass * inv ** 3)[:, :, None]).sum(1)
        pot[i0:i0 + 256] = -(mass * inv).sum(1)
    return acc, pot


def read_tipsy_dark(path):
    """time, positions, velocities and masses of a tipsy file of dark particles (big-endian)."""
    b = open(path, "rb").read()
    t = np.frombuffer(b[:8], ">f8")[0]
    nb, nd, ns, nk, nst = np.frombuffer(b[8:28], ">i4")
    assert ns == 0 and nst == 0 and nk == nb
    rec = np.frombuffer(b[32:32 + nk * 36], ">f4").reshape(nk, 9).astype(np.float32)
    return t, rec[:, 1:4].copy(), rec[:, 4:7].copy(), rec[:, 0].copy()
