"""banyan: a gravitational N-body tree-code that runs entirely on the GPU (CUDA and OpenCL).

The functions here take NumPy arrays and give NumPy arrays back, in the order of the input particles, in the
input's units with G = 1 (N-body units unless you scale your own):

    acc, pot = banyan.gravity(pos, mass, theta=0.75, eps=0.01)     # (N, 3) accelerations, (N,) potentials
    acc, pot = banyan.gravity_at(points, pos, mass)                # the field of the particles at the points
    sim = banyan.Simulation(pos, vel, mass, eps=0.05, dt=1/64)     # a whole simulation on the device
    sim.evolve(10.0); sim.energies(); sim.save("run")               # run/checkpoint.bin: `banyan run --restart run`
    snap = banyan.read_snapshot("run/snapshot_00001.hdf5")         # banyan's HDF5 and tipsy files, as NumPy arrays

Arrays: positions, velocities and points are (N, 3), masses (N,). banyan computes in float32. float32 arrays in C
order are used as they are (no copy); float64 (or float16) arrays are converted to float32 once, on the way in (a
copy, the only one; values beyond float32's range are refused); integer, complex or object arrays, wrong shapes,
NaN or infinite values and masses that are not positive are refused with a banyan.UsageError (a ValueError) that
names the argument and the first bad particle. Results are new float32 arrays.

CUDA arrays: gravity and gravity_at also take CuPy arrays and PyTorch tensors on a CUDA GPU (all arguments on the
same device) and give results of the same library on that device. banyan reads them where they are, through
DLPack, and writes its results straight into the new arrays: nothing goes through the host. (The same rules hold:
float64 is converted to float32 once, on the device.) So does Simulation: made from CuPy arrays or PyTorch tensors,
it starts from them on their GPU and gives its positions, velocities, accelerations and potentials back as arrays
of the same library there.

Devices: backend="auto" takes a CUDA GPU, else an OpenCL GPU, else the CPU through PoCL (as `banyan run`); "cuda" or
"opencl" (banyan.backends lists them) asks for one, and device=N for its N-th device (banyan.devices() lists them).
Opened devices are kept for the life of the process, so the first call pays for opening (and, on OpenCL, compiling the
kernels once per machine: about 20 s through PoCL), later calls do not.
"""
from __future__ import annotations

import math
import os
import sys
import threading
import time
from typing import Any, NamedTuple, Optional, Tuple

import numpy as np

from . import _banyan
from ._banyan import DeviceError, NumericalError, UsageError

__version__: str = _banyan.__version__
#: The opening criteria by name, the paper's first: what Simulation's opening takes (core's list, tree/opening.hpp).
opening_criteria: Tuple[str, ...] = tuple(_banyan.opening_criteria)
#: The snapshot formats Simulation.write_snapshot writes (and `banyan run --format` names), from banyan's table of
#: formats: ("hdf5", "tipsy").
snapshot_formats: Tuple[str, ...] = tuple(_banyan.snapshot_formats)
#: What backend= takes: "auto" (the best device found), then the backends this build knows, in order of preference
#: (banyan's registry of backends; one that was not built has no devices).
backends: Tuple[str, ...] = ("auto",) + tuple(_banyan.backends)
__all__ = ["devices", "gravity", "gravity_at", "galaxy", "galaxy_merger", "Galaxy", "read_snapshot", "Snapshot",
           "Simulation", "UsageError", "NumericalError", "DeviceError", "opening_criteria", "snapshot_formats",
           "backends"]

_opened: dict = {}
_opening = threading.Lock()  # threads that open the same device at once share one Device (and its lock)


def devices() -> list:
    """Every device of every backend compiled in: a list of dicts with backend, index, name, vendor, version, gpu,
    memory_bytes, compute_units and label ('backend #index name', as `banyan devices` prints it)."""
    return _banyan.devices()


def _whole(name: str, value: Any, low: int, high: int, wanted: str = "") -> int:
    """@p value as an int, refused (a UsageError naming @p name and @p wanted) unless a whole number in [low, high]:
    the compiled module takes fixed-size integers, and a Python int beyond them would fail there with a TypeError
    that names no argument."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or not low <= value <= high:
        raise UsageError(f"{name} must be {wanted or f'a whole number from {low} to {high}'}, got {value!r}")
    return int(value)


def _file_path(what: str, path: Any) -> str:
    """@p path as a str, refused (a UsageError naming @p what's path) when it is empty."""
    path = os.fspath(path)
    if not path:
        raise UsageError(f"{what}: path is empty; give the name of a file")
    return path


def _device(backend: str, device: Optional[int]) -> Any:
    if backend not in backends:
        names = ", ".join(f"'{b}'" for b in backends[:-1]) + f" or '{backends[-1]}'"
        raise UsageError(f"backend must be {names}, got {backend!r}")
    if device is not None:
        device = _whole("device", device, 0, 2 ** 31 - 1, "None (the best) or an index from 0 to 2^31 - 1")
    key = (backend, -1 if device is None else int(device))
    with _opening:
        if key not in _opened:
            dev = _banyan.open(*key)
            # "auto", a backend and an index can name the same device: one Device (one lock) for each device.
            _opened[key] = next((d for d in _opened.values() if d.label == dev.label), dev)
        return _opened[key]


def _on_cuda(a: Any) -> bool:
    """Whether @p a is an array on a CUDA device (CuPy, PyTorch, or any DLPack producer)."""
    return (hasattr(a, "__dlpack_device__") and not isinstance(a, np.ndarray)
            and a.__dlpack_device__()[0] in (2, 13))  # kDLCUDA, kDLCUDAManaged


def _progress_bar(progress: Optional[bool], total: int) -> Any:
    """A tqdm bar of total steps, or None: Simulation.evolve's progress argument."""
    if progress is False:
        return None
    if progress is not None and progress is not True:
        raise UsageError(f"progress must be True, False or None, got {progress!r}")
    try:
        from tqdm.auto import tqdm  # a widget in a notebook, text in a terminal
    except ImportError:
        if progress:
            raise UsageError("evolve(progress=True) needs tqdm (pip install tqdm)") from None
        return None
    interactive = "ipykernel" in sys.modules or (sys.stderr is not None and sys.stderr.isatty())
    if progress is None and not interactive:
        return None
    return tqdm(total=total, unit="step", desc="banyan", leave=True)


def _check_layout(name: str, kind: str, ndim: int, shape: Tuple[int, ...], dtype: str, want: Tuple[int, ...]) -> None:
    if kind != "f":
        raise UsageError(f"{name}: floating-point values are needed, got an array of {dtype}")
    if ndim != len(want) or any(s != -1 and s != d for s, d in zip(want, shape)):
        raise UsageError(f"{name}: shape {tuple(shape)}, expected {'(N, 3)' if len(want) == 2 else '(N,)'}")


class _Arrays:
    """The arrays of one call, handled with their own library: NumPy on the host, or CuPy or PyTorch on a CUDA device
    (through DLPack: nothing goes through the host). They are checked and converted to float32 once when they are
    of another float type, and results come back as new arrays of the same library."""

    def __init__(self, like: Any):
        self.lib = type(like).__module__.split(".")[0] if _on_cuda(like) else "numpy"
        if self.lib not in ("numpy", "cupy", "torch"):
            raise UsageError(f"CUDA arrays of {self.lib} are not supported; give CuPy arrays or PyTorch tensors")
        self.xp = np if self.lib == "numpy" else __import__(self.lib)
        self.cuda = self.lib != "numpy"
        self.device = like.__dlpack_device__()[1] if self.cuda else None
        self._summary: list = []  # host arrays: what particles() found in its one pass, for summary()

    def backend_and_device(self, backend: str, device: Optional[int]) -> Tuple[str, Optional[int]]:
        """The (backend, device) to open: as asked for host arrays; CUDA arrays' own device."""
        if not self.cuda:
            return backend, device
        if backend not in ("auto", "cuda"):
            raise UsageError(f"CUDA arrays need backend 'cuda' (or 'auto'), got {backend!r}")
        if device is not None and device != self.device:
            raise UsageError(f"the arrays are on CUDA device {self.device}, device={device} was asked for")
        return "cuda", self.device

    def host(self, a: Any) -> np.ndarray:
        """@p a as a NumPy array (copied from the device for CUDA arrays)."""
        if self.lib == "torch":
            return a.detach().cpu().numpy()
        if self.lib == "cupy":
            return self.xp.asnumpy(a)
        return np.asarray(a)

    def floats(self, name: str, a: Any, shape: Tuple[int, ...]) -> Any:
        """@p a as a float32 array in C order of @p shape (-1: any length)."""
        if not self.cuda:
            if hasattr(a, "__dlpack_device__") and not isinstance(a, np.ndarray) and a.__dlpack_device__()[0] != 1:
                raise UsageError(f"{name}: an array on a device; give all arrays on the host (NumPy) or all on one "
                                 "CUDA device (CuPy, PyTorch)")
            arr = np.asarray(a)
            _check_layout(name, arr.dtype.kind, arr.ndim, arr.shape, str(arr.dtype), shape)
            if arr.dtype != np.float32:
                with np.errstate(over="ignore"):
                    converted = arr.astype(np.float32)
                bad = np.isfinite(arr) & ~np.isfinite(converted)
                if bad.any():
                    i = int(np.argwhere(bad)[0][0])
                    raise UsageError(f"{name}: particle {i} has a value beyond float32's range ({arr[i]}); banyan "
                                     "computes in float32: give the particles in units where they fit")
                arr = converted
            return np.ascontiguousarray(arr)
        if not _on_cuda(a) or a.__dlpack_device__()[1] != self.device:
            raise UsageError(f"{name}: all arrays must be on the same CUDA device (or all on the host)")
        if type(a).__module__.split(".")[0] != self.lib:
            raise UsageError(f"{name}: arrays of one library at a time (CuPy or PyTorch)")
        kind = ("f" if a.dtype.is_floating_point else "?") if self.lib == "torch" else a.dtype.kind
        _check_layout(name, kind, a.ndim, tuple(a.shape), str(a.dtype), shape)
        if self.lib == "torch":
            return a.detach().to(self.xp.float32).contiguous()
        return self.xp.ascontiguousarray(a, dtype=self.xp.float32)

    def first_bad(self, ok: Any) -> Optional[int]:
        """The first row where @p ok (a boolean array) is False anywhere, or None (one reduction when all is well)."""
        if bool(ok.all()):
            return None
        ok = ok if ok.ndim == 1 else ok.all(1)
        return int((~ok).nonzero()[0, 0]) if self.lib == "torch" else int((~ok).nonzero()[0][0])

    def particles(self, pos: Any, mass: Any, pos_name: str = "pos") -> Tuple[Any, Any]:
        """Positions (N, 3) and masses (N,), checked: N > 0, finite positions, positive finite masses."""
        p = self.floats(pos_name, pos, (-1, 3))
        m = self.floats("mass", mass, (-1,))
        if p.shape[0] == 0:
            raise UsageError(f"{pos_name}: no particles (N = 0); at least one is needed")
        if m.shape[0] != p.shape[0]:
            raise UsageError(f"mass: {m.shape[0]} masses for {p.shape[0]} particles")
        if self.cuda:
            self.check_finite(pos_name, p, "coordinate")
            i = self.first_bad(self.xp.isfinite(m) & (m > 0))
        else:  # one pass in the module instead of NumPy's many (the same checks)
            bad_pos, i, *self._summary = _banyan.host_summary(p, m)
            if bad_pos < p.shape[0]:
                self.check_finite(pos_name, p[bad_pos:bad_pos + 1], "coordinate", first=bad_pos)
            i = None if i == p.shape[0] else i
        if i is not None:
            raise UsageError(f"mass: particle {i} has mass {float(m[i])}; masses must be positive and finite")
        return p, m

    def check_finite(self, name: str, a: Any, what: str, first: int = 0) -> None:
        """Refuses @p a when a row holds a NaN or infinity (@p first: the index of its row 0, for the message)."""
        i = self.first_bad(self.xp.isfinite(a))
        if i is not None:
            values = ", ".join(str(float(v)) for v in (a[i] if a.ndim > 1 else a[i:i + 1]))
            raise UsageError(f"{name}: particle {first + i} has a non-finite {what} ({values})")

    def empty(self, shape: Tuple[int, ...]) -> Any:
        if self.lib == "torch":
            return self.xp.empty(shape, dtype=self.xp.float32, device=f"cuda:{self.device}")
        if self.lib == "cupy":
            with self.xp.cuda.Device(self.device):
                return self.xp.empty(shape, dtype=self.xp.float32)
        return np.empty(shape, np.float32)

    def summary(self, p: Any, m: Any) -> Tuple[float, float, float, int]:
        """The extent (largest side of the box), total mass, smallest mass and its particle (after particles())."""
        if not self.cuda:
            return tuple(self._summary)  # made by particles()
        lo, hi = (p.min(0).values, p.max(0).values) if self.lib == "torch" else (p.min(0), p.max(0))
        total = float(m.double().sum()) if self.lib == "torch" else float(m.sum(dtype=self.xp.float64))
        lightest = int(m.argmin())
        return float((hi - lo).max()), total, float(m[lightest]), lightest

    def synchronize(self) -> None:
        """Waits for the library's work on its current stream: banyan's queue then reads finished arrays."""
        if self.lib == "torch":
            self.xp.cuda.current_stream(self.device).synchronize()
        elif self.lib == "cupy":
            with self.xp.cuda.Device(self.device):
                self.xp.cuda.get_current_stream().synchronize()


def _gravity(what: str, points: Any, pos: Any, mass: Any, theta: float, eps: float, backend: str,
             device: Optional[int], direct: bool) -> Tuple[Any, Any]:
    """gravity (points None) or gravity_at, for arrays of any library: checks, internal units, then the compiled
    call, which moves the arrays' rows to and from the device as they are (_banyan.gravity_host / gravity_device)."""
    _banyan.check_parameters(float(theta), float(eps))  # core's rule for theta (opening_angle_ok), and eps
    arrays = _Arrays(pos)
    dev = _device(*arrays.backend_and_device(backend, device))
    p, m = arrays.particles(pos, mass)
    q = arrays.floats("points", points, (-1, 3)) if points is not None else arrays.empty((0, 3))
    arrays.check_finite("points", q, "coordinate")
    extent, total, min_mass, lightest = arrays.summary(p, m)
    _banyan.check_precision(extent, total, min_mass, lightest, p.shape[0], float(eps), what)
    # Internal units (precision.hpp): exact powers of two, the identity for most systems; the same for every library.
    k, j, acc_exp, pot_exp, _ = _banyan.internal_units(extent, total, float(eps))
    if k or j:
        p, q, m = p * 2.0 ** -k, q * 2.0 ** -k, m * 2.0 ** -j
    out_n = q.shape[0] if points is not None else p.shape[0]
    acc, pot = arrays.empty((out_n, 3)), arrays.empty((out_n,))
    if out_n == 0:
        return acc, pot
    arrays.synchronize()
    call = _banyan.gravity_device if arrays.cuda else _banyan.gravity_host
    bad = call(dev, p, m, q, float(theta), math.ldexp(float(eps), -k), bool(direct), acc, pot)
    i = bad if bad < out_n else None  # host arrays: checked in the module
    if acc_exp or pot_exp:
        acc, pot = acc * 2.0 ** acc_exp, pot * 2.0 ** pot_exp
    if arrays.cuda or acc_exp or pot_exp:
        i = arrays.first_bad(arrays.xp.isfinite(acc))
        if i is None:
            i = arrays.first_bad(arrays.xp.isfinite(pot))
    if i is not None:
        raise NumericalError(f"{what}: particle {i} got a non-finite result, or one beyond float's range in the units "
                             "of the input. Give the particles in units where G M / r^2 and G M / r fit a float")
    return acc, pot


def gravity(pos: Any, mass: Any, theta: float = 0.75, eps: float = 0.0, backend: str = "auto",
            device: Optional[int] = None, direct: bool = False) -> Tuple[Any, Any]:
    """Accelerations (N, 3) and potentials (N,) of N particles on each other, in the order of the input.

    pos: (N, 3) positions; mass: (N,) positive masses; G = 1. theta: the opening angle of the tree walk, in [0, 1]
    (0.75: a few parts in 10^3 at the 99th percentile of the relative error on a Plummer sphere; smaller is more
    accurate and slower). eps: Plummer softening length (0: none). direct=True sums all pairs in float32 instead
    (O(N^2): for checks and small N). NumPy arrays give NumPy arrays; CuPy arrays or PyTorch tensors on a CUDA GPU
    give arrays of the same library on that GPU. backend, device: see the module's help.
    """
    return _gravity("gravity", None, pos, mass, theta, eps, backend, device, direct)


def gravity_at(points: Any, pos: Any, mass: Any, theta: float = 0.75, eps: float = 0.0, backend: str = "auto",
               device: Optional[int] = None, direct: bool = False) -> Tuple[Any, Any]:
    """The acceleration (M, 3) and potential (M,) that N particles create at M points (test particles, which feel
    the particles and act on nothing): what a coupling scheme such as AMUSE's bridge asks of a gravity code.

    The points join the tree as massless particles, so the field at each comes from the same walk as gravity()'s.
    Arguments as for gravity().
    """
    return _gravity("gravity_at", points, pos, mass, theta, eps, backend, device, direct)


class Galaxy(NamedTuple):
    """Particles of banyan.galaxy or banyan.galaxy_merger: positions (N, 3), velocities (N, 3), masses (N,) as
    float32, and GADGET particle types (N,) as int8 (1 halo, 2 disc, 3 bulge, 5 black hole), in that order."""
    pos: np.ndarray
    vel: np.ndarray
    mass: np.ndarray
    types: np.ndarray


def _galaxy(merger: bool, n: int, seed: int, preset: str, units: Optional[str], options: dict) -> Galaxy:
    n = _whole("n", n, 1, 2 ** 31 - 1, "a whole number from 1 to 2^31 - 1")  # README, "Limits"
    seed = _whole("seed", seed, 0, 2 ** 63 - 1, "a whole number from 0 to 2^63 - 1")
    text = {"preset": str(preset)}
    for key, value in options.items():
        if value is None:
            continue
        if key == "orientation":
            value = ",".join(repr(float(a)) for a in value)
        elif key != "halo":
            value = repr(float(value))
        text[key] = str(value)
    args = (text, merger, int(n), int(seed), units or "")
    total, *counts = _banyan.galaxy_counts(*args)
    pos, vel = np.empty((total, 3), np.float32), np.empty((total, 3), np.float32)
    mass = np.empty(total, np.float32)
    _banyan.galaxy_fill(*args, pos, vel, mass)
    types = np.repeat(np.array([1, 2, 3, 5], np.int8), counts)
    return Galaxy(pos, vel, mass, types)


def galaxy(n: int = 65536, seed: int = 1, preset: str = "mw", units: Optional[str] = None, *,
           halo: Optional[str] = None, halo_mass: Optional[float] = None, halo_scale: Optional[float] = None,
           halo_concentration: Optional[float] = None, disc_mass: Optional[float] = None,
           disc_scale_length: Optional[float] = None, disc_scale_height: Optional[float] = None,
           toomre_q: Optional[float] = None, q_radius: Optional[float] = None, bulge_mass: Optional[float] = None,
           bulge_scale: Optional[float] = None, bh_mass: Optional[float] = None,
           star_fraction: Optional[float] = None) -> Galaxy:
    """A disc galaxy in equilibrium, as `banyan run --ic galaxy` makes it (the same particles for the same options
    and seed): an NFW or Hernquist halo, an exponential disc, a Hernquist bulge and a central black hole. preset
    "mw" (Milky Way) or "m31"; the other keywords override the preset, masses in Msun and lengths in kpc;
    star_fraction the share of star particles (0: halo and star particles of equal mass). The
    particles come in kpc and 1e10 Msun with G = 1, or in the units given ("pc,Msun"). README, "Galaxies".

        g = banyan.galaxy(n=2**18, preset="mw", toomre_q=2.0)
        sim = banyan.Simulation(g.pos, g.vel, g.mass, eps=0.05, dt=1/64)
    """
    options = dict(halo=halo, halo_mass=halo_mass, halo_scale=halo_scale, halo_concentration=halo_concentration,
                   disc_mass=disc_mass, disc_scale_length=disc_scale_length, disc_scale_height=disc_scale_height,
                   toomre_q=toomre_q, q_radius=q_radius, bulge_mass=bulge_mass, bulge_scale=bulge_scale,
                   bh_mass=bh_mass, star_fraction=star_fraction)
    return _galaxy(False, n, seed, preset, units, options)


def galaxy_merger(n: int = 240002, seed: int = 1, preset: str = "mw", units: Optional[str] = None, *,
                  mass_ratio: Optional[float] = None, pericentre: Optional[float] = None,
                  eccentricity: Optional[float] = None, separation: Optional[float] = None,
                  orientation: Optional[Tuple[float, float, float, float]] = None, **model: Any) -> Galaxy:
    """Two galaxies on a merging orbit, as `banyan run --ic galaxy-merger` makes them: by default the paper's merger
    (240,002 bodies, mass ratio 1:3, pericentre 10 kpc, black holes of 1e8 Msun). The second galaxy is the first
    scaled to mass_ratio of its mass. pericentre and separation in kpc, eccentricity >= 0 (1: parabolic),
    orientation the discs' spin axes (i1, w1, i2, w2) in degrees; the model keywords are galaxy()'s. Black holes
    are the last two particles (the first galaxy's first). Run it with eps=0.1, dt=1/64 to t = 1000 as the paper.
    """
    unknown = set(model) - {"halo", "halo_mass", "halo_scale", "halo_concentration", "disc_mass",
                            "disc_scale_length", "disc_scale_height", "toomre_q", "q_radius", "bulge_mass",
                            "bulge_scale", "bh_mass", "star_fraction"}
    if unknown:
        raise UsageError(f"galaxy_merger: unknown option {sorted(unknown)[0]!r}")
    options = dict(model, mass_ratio=mass_ratio, pericentre=pericentre, eccentricity=eccentricity,
                   separation=separation, orientation=orientation)
    return _galaxy(True, n, seed, preset, units, options)


class Snapshot(NamedTuple):
    """A snapshot file as banyan.read_snapshot reads it: positions (N, 3), velocities (N, 3) and masses (N,) as
    float32, ids (N,) as uint64 and GADGET particle types (N,) as int8, in the file's order (types 0, 1, 2, 3, 5, 4,
    as banyan writes them: particle i of a run's input is row i of every snapshot), the time, and the units as
    Simulation(units=) and `banyan run --units` take them (None: N-body units, or a tipsy file)."""
    pos: np.ndarray
    vel: np.ndarray
    mass: np.ndarray
    ids: np.ndarray
    types: np.ndarray
    time: float
    units: Optional[str]


def read_snapshot(path: "str | os.PathLike[str]") -> Snapshot:
    """Reads a snapshot file as `banyan run --in` reads it: HDF5 (GADGET-2/4, SWIFT layouts, as banyan writes them)
    or tipsy, told apart by the file's first bytes. Velocities are those of G = 1 in the file's units (a file whose
    velocity unit is another, a GADGET run in km/s, has them converted as a run would); ids are the file's
    ParticleIDs (tipsy, which has none: 0 .. N-1); a file without velocities gives zeros. A file banyan cannot read
    raises banyan.UsageError naming it and the problem.

        snap = banyan.read_snapshot("run/snapshot_00001.hdf5")
        sim = banyan.Simulation(snap.pos, snap.vel, snap.mass, ids=snap.ids, units=snap.units, time=snap.time)
    """
    f = _banyan.SnapshotFile(_file_path("read_snapshot", path))
    n = f.size
    pos, vel = np.empty((n, 3), np.float32), np.empty((n, 3), np.float32)
    mass, ids, types = np.empty(n, np.float32), np.empty(n, np.uint64), np.empty(n, np.int8)
    f.fill(pos, vel, mass, ids, types)
    return Snapshot(pos, vel, mass, ids, types, float(f.time), f.units or None)


def _run_folder(path: Any) -> str:
    """The run folder Simulation.save writes into (made when missing): @p path itself, or the folder of a path
    named checkpoint.bin (the file a run folder holds). A path that is a file otherwise is refused."""
    path = _file_path("save", path)
    if os.path.basename(os.path.normpath(path)) == "checkpoint.bin" and not os.path.isdir(path):
        path = os.path.dirname(os.path.normpath(path)) or "."
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"save: {path} is a file; save writes a run folder (FOLDER/checkpoint.bin, what `banyan run "
                         "--restart FOLDER` and Simulation.load take): give the name of a folder (Simulation.load "
                         "still reads a checkpoint file that an earlier release saved)")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise UsageError(f"save: cannot make the folder {path}: {e.strerror}") from None
    return path


def _native_property(name: str, doc: str) -> Any:
    """A read-only Simulation property: the native simulation's attribute `name`."""
    return property(lambda self: getattr(self._sim, name), doc=doc)


def _state_property(column: int, doc: str) -> Any:
    """A read-only Simulation property: entry `column` of _state() (positions, velocities, accelerations,
    potentials), fetched on every read."""
    return property(lambda self: self._state()[column], doc=doc)


class Simulation:
    """A whole N-body simulation on the device, as `banyan run` makes it: kick-drift-kick leapfrog with one shared
    time step dt, the octree rebuilt and walked every step, energies summed on the device in double precision.

    The same particles and parameters give the same numbers, bit for bit, as `banyan run --in FILE` on the same
    device. Positions, velocities, accelerations and potentials come back in the order of the input: NumPy arrays,
    or, for a Simulation made from CuPy arrays or PyTorch tensors on a CUDA GPU, arrays of that library on that GPU
    (the particles start from them there and never go through the host; ids may be given in any library).

        sim = banyan.Simulation(pos, vel, mass, theta=0.75, eps=0.05, dt=1/64)
        sim.evolve(2.0)               # to t = 2 (Ctrl-C stops between two steps with KeyboardInterrupt)
        e = sim.energies()            # kinetic, potential, total, momentum, angular_momentum
        sim.save("run")               # a run folder: Simulation.load("run") and `banyan run --restart run` go on

    opening (one of banyan.opening_criteria: "paper" or "bmax") and alpha (the relative criterion on top, 0: off)
    choose the opening test as `banyan run --opening --alpha` do; docs/benchmarks.md ("Opening criteria") has their
    errors and times.

    units (optional, as `banyan run --units`: "kpc,1e10Msun") say what the numbers are in: write_snapshot() puts
    them into its HDF5 files, render() into its captions; banyan computes in them as given (G = 1).

    write_snapshot() and render() write the particles now as `banyan run` and `banyan render` do.

    len(sim) is N; sim.masses, sim.theta, sim.eps, sim.dt and sim.units give what it runs with (also for a
    Simulation.load of a run folder, whose masses are read from the device).

    ids (optional, one whole number >= 0 per particle) label the particles; sim.ids and sim.types (GADGET types)
    give them in input order, and save() and load() keep them, as a run keeps an HDF5 input's ParticleIDs.

    time_steps="block" gives each particle the step dt / 2^k its acceleration asks for (k its rung, from
    sqrt(2 eta eps / |a|) rounded down to a power of two, at most max_rung deep), as `banyan run --steps block --eta
    --max-rung` do; step() and evolve() still advance every particle by whole steps of dt (evolve's last cut short to
    end at t_end, its rungs chosen anew for it), and block_stats tells how the particles spread over the rungs.
    rung_rule="symmetric" (the default) asks each step to satisfy the criterion at its predicted end too
    (`--rung-rule symmetric`: far less energy drift for a walk more per substep); "gadget" at its start only.
    README, "Time steps".
    """

    def __init__(self, pos: Any, vel: Any, mass: Any, theta: float = 0.75, eps: float = 0.05, dt: float = 1 / 64,
                 time: float = 0.0, backend: str = "auto", device: Optional[int] = None, opening: str = "paper",
                 alpha: float = 0.0, time_steps: str = "shared", eta: float = 0.025, max_rung: int = 16,
                 ids: Any = None, units: Optional[str] = None, rung_rule: str = "symmetric", _engine: Any = None):
        self._arrays: Optional[_Arrays] = None  # CUDA arrays' library, for results of the same kind
        if _engine is not None:
            self._sim = _engine
            return
        # The options are checked once, by the run engine that `banyan run` uses; CUDA arrays with their library.
        arrays = _Arrays(pos)
        p, m = arrays.particles(pos, mass)
        v = arrays.floats("vel", vel, (-1, 3))
        if v.shape[0] != p.shape[0]:
            raise UsageError(f"vel: {v.shape[0]} velocities for {p.shape[0]} particles")
        arrays.check_finite("vel", v, "velocity")
        max_rung = _whole("max_rung", max_rung, 0, _banyan.max_rung_limit)
        if ids is not None:
            given = _Arrays(ids).host(ids) if _on_cuda(ids) else np.asarray(ids)
            if given.shape != (p.shape[0],) or given.dtype.kind not in "iu" or (given.size and given.min() < 0):
                raise UsageError(f"ids: {p.shape[0]} whole numbers >= 0 wanted (one per particle), got "
                                 f"{given.dtype} of shape {given.shape}")
            ids = np.ascontiguousarray(given, np.uint64)
        options = (float(theta), float(eps), float(dt), float(time), str(opening), float(alpha), str(time_steps),
                   float(eta), int(max_rung), str(rung_rule), ids, units or "")
        dev = _device(*arrays.backend_and_device(backend, device))
        if not arrays.cuda:
            self._sim = _banyan.Simulation(dev, _banyan.plan_simulation(p, v, m, *options))
            return
        # CUDA arrays start the run where they lie: scaled into the internal units here (powers of two: exact, as
        # the host's start scales them), then copied row by row into the tree's arrays by the device.
        _banyan.check_parameters(float(theta), float(eps))  # before eps chooses the units
        extent, total, min_mass, lightest = arrays.summary(p, m)
        k, j, _, _, vel_exp = _banyan.internal_units(extent, total, float(eps))
        if k or j:
            p, m, v = p * 2.0 ** -k, m * 2.0 ** -j, v * 2.0 ** -vel_exp
        arrays.synchronize()
        plan = _banyan.plan_simulation_device(dev, p, v, m, extent, total, min_mass, lightest, k, j, *options)
        self._sim = _banyan.Simulation(dev, plan)
        self._arrays = arrays

    @classmethod
    def load(cls, path: "str | os.PathLike[str]", backend: Optional[str] = None,
             device: Optional[int] = None) -> "Simulation":
        """Continues the run folder at path (written by save() or `banyan run`: its checkpoint.bin) exactly, as
        `banyan run --restart` does; a checkpoint file that an earlier release's save() wrote is read too. By
        default on the device that wrote it, when it is present (a continuation is bit for bit on the same device
        and backend); else on the best one, or on the one asked for. A `banyan run` stopped by a signal between the
        substeps of a block step wrote the step in progress: it is finished here, so that the particles are those
        of a step's end."""
        path = _file_path("Simulation.load", path)
        if backend is None and device is None:
            found = _banyan.checkpoint_device(path)
            backend, device = found if found is not None else ("auto", None)
        return cls(None, None, None, _engine=_banyan.Simulation.load(_device(backend or "auto", device), path))

    def step(self, n: int = 1) -> None:
        """Takes n steps of dt (at most 10^15, as evolve), each to the next point of the time grid of the start: after
        an evolve() that ended off that grid, the first step goes on to it."""
        self._sim.step(_whole("step: n", n, 0, 10 ** 15, "a whole number from 0 to 10^15"))

    def evolve(self, t_end: float, progress: Optional[bool] = None) -> None:
        """Steps until t_end exactly, as `banyan run --t-end`: steps of dt on the time grid of the start, and the
        step that would pass t_end cut short to end there (a kick-drift-kick of the shorter length; the next step
        goes on to the grid point). Ctrl-C raises KeyboardInterrupt between two steps; the simulation stays
        consistent and can go on.

        progress: a tqdm progress bar of the steps (a widget in a notebook); None (default) shows one when tqdm is
        installed and the session is interactive (a terminal on stderr, or a Jupyter kernel), True always (tqdm
        needed), False never."""
        if not math.isfinite(float(t_end)):
            raise UsageError(f"evolve: t_end must be finite, got {t_end}")
        end = self._sim.step_at(float(t_end))  # the step t_end lies in, as log_step counts
        now = self._sim.log_step
        bar = _progress_bar(progress, end - now) if end > now else None
        if bar is None:
            self._sim.evolve(float(t_end))
            return
        with bar:
            # Steps in chunks of about a fifth of a second between updates of the bar.
            chunk = 1
            while True:
                t0 = time.perf_counter()
                done = self._sim.evolve(float(t_end), chunk)
                bar.update(self._sim.log_step - now)
                now = self._sim.log_step
                if done:
                    break
                per_step = (time.perf_counter() - t0) / chunk
                chunk = max(1, min(1 << 20, int(0.2 / max(per_step, 1e-9))))

    def _state(self) -> Tuple[Any, Any, Any, Any]:
        n = self._sim.size
        arrays = self._arrays
        if arrays is None:
            pos, vel, acc = (np.empty((n, 3), np.float32) for _ in range(3))
            pot = np.empty(n, np.float32)
            self._sim.state(pos, vel, acc, pot)
            return pos, vel, acc, pot
        pos, vel, acc = (arrays.empty((n, 3)) for _ in range(3))
        pot = arrays.empty((n,))
        arrays.synchronize()
        self._sim.state_device(pos, vel, acc, pot)  # in internal units: scaled back here, as the host's are there
        k, _, acc_exp, pot_exp, vel_exp = self._sim.units()
        raw_acc, raw_pot = acc, pot
        if k or acc_exp or pot_exp or vel_exp:
            pos, vel, acc, pot = pos * 2.0 ** k, vel * 2.0 ** vel_exp, acc * 2.0 ** acc_exp, pot * 2.0 ** pot_exp
        # As the host's way back: a value that became infinite, zero or denormal does not fit the input's units.
        tiny = float(np.finfo(np.float32).tiny)
        xp = arrays.xp

        def fits(raw: Any, scaled: Any) -> Any:
            return xp.isfinite(scaled) & ((scaled != 0) == (raw != 0)) & ((scaled == 0) | (xp.abs(scaled) >= tiny))

        i = arrays.first_bad(fits(raw_acc, acc))
        if i is None:
            i = arrays.first_bad(fits(raw_pot, pot))
        if i is not None:
            raise NumericalError(f"Simulation: particle {i} has an acceleration or potential beyond float's range in "
                                 "the units of the input")
        return pos, vel, acc, pot

    time = _native_property("time", """The simulated time: the start time plus steps * dt, or the end time of an
                            evolve() that ended off that grid.""")

    steps = _native_property("steps", """Whole steps of dt taken since the start (points of its time grid reached).""")

    positions = _state_property(
        0, """(N, 3) float32, in input order (a fresh copy from the device; NumPy, or CuPy or PyTorch on the GPU for a
        Simulation made from those).""")

    velocities = _state_property(1, """(N, 3) float32, in input order.""")

    accelerations = _state_property(
        2, """(N, 3) float32 of the last force evaluation (at the current positions), in input order.""")

    potentials = _state_property(3, """(N,) float32 of the last force evaluation, in input order.""")

    @property
    def ids(self) -> np.ndarray:
        """(N,) uint64, each particle's id in input order: the ids given to the constructor, or those of the file a
        loaded run started from (HDF5 ParticleIDs), kept through save() and load(); else 0 .. N-1."""
        out = np.empty(self._sim.size, np.uint64)
        self._sim.ids(out)
        return out

    @property
    def masses(self) -> Any:
        """(N,) float32, each particle's mass in input order, as the run holds them (read from the device: a
        Simulation.load of a run folder has them too); NumPy, or CuPy or PyTorch on the GPU for a Simulation made
        from those."""
        out = np.empty(self._sim.size, np.float32)
        self._sim.masses(out)
        return out if self._arrays is None else self._on_device(out)

    def _on_device(self, host: np.ndarray) -> Any:
        """@p host as an array of the library and device this Simulation was made from."""
        arrays = self._arrays
        if arrays.lib == "torch":
            return arrays.xp.as_tensor(host, device=f"cuda:{arrays.device}")
        with arrays.xp.cuda.Device(arrays.device):
            return arrays.xp.asarray(host)

    def __len__(self) -> int:
        return self._sim.size

    theta = _native_property("theta", """The opening angle of the tree walk.""")

    eps = _native_property("eps", """The Plummer softening length, in the units of the particles.""")

    dt = _native_property("dt", """The time step (with block steps the largest one).""")

    @property
    def units(self) -> Optional[str]:
        """The physical units the numbers are in, as units= and `banyan run --units` take them ("kpc,1e10Msun"),
        or those of the file a loaded run started from; None for N-body units."""
        return self._sim.units_text or None

    @property
    def types(self) -> np.ndarray:
        """(N,) int8, each particle's GADGET type in input order: 0 gas, 1 dark matter, 2 disc, 3 bulge, 4 stars,
        5 black holes (a loaded run keeps its input file's types; a Simulation made from arrays is all 1)."""
        out = np.empty(self._sim.size, np.int8)
        self._sim.types(out)
        return out

    def energies(self) -> dict:
        """kinetic, potential (half the sum of m phi), total, momentum (3-tuple), angular_momentum (3-tuple), and
        de = (E0 - E) / E0 against the start, summed on the device in double precision (0 where E0 is 0, as the
        CLI's energy log: one particle at rest, say)."""
        e = self._sim.energies()
        e0 = self._sim.e0
        e["de"] = (e0 - e["total"]) / e0 + 0.0 if e0 != 0 else 0.0  # + 0.0: no -0, as the log
        return e

    def write_snapshot(self, path: "str | os.PathLike[str]", format: str = "hdf5") -> None:
        """Writes the particles now as `banyan run` writes its snapshots: "hdf5" (GADGET-4 layout, with the units
        given to the constructor or of the run loaded, the ids, types and the run's parameters; pynbody and yt open
        it) or "tipsy" (one of snapshot_formats); through a temporary name and a rename."""
        self._sim.write_snapshot(_file_path("write_snapshot", path), str(format))

    def render(self, path: "str | os.PathLike[str]", axis: str = "z", size: int = 800,
               centre: Any = "mass", extent: Optional[float] = None, range: float = 4.0,
               vmin: Optional[float] = None, vmax: Optional[float] = None, annotate: bool = True,
               types: Optional[str] = None) -> None:
        """Draws the projected surface density of the particles now as a PNG (a path ending in .png), as `banyan
        render` draws a snapshot (its options, in Python's spelling): axis "x", "y" or "z"; centre "mass", "density"
        or a point (x, y, z); extent the field's half-width (None: 1.3 times the radius holding 90 % of the mass);
        range the dex below the top of the colour scale (or vmin and vmax, log10 surface density); types a
        comma-separated list of GADGET types ("2", "disc,bulge"; None: all)."""
        if isinstance(centre, str):
            kind, point = centre, None
        else:
            point = tuple(float(c) for c in centre)
            if len(point) != 3:
                raise UsageError(f"render: centre must be \"mass\", \"density\" or a point (x, y, z), got {centre!r}")
            kind = "mass"
        size = _whole("render: size", size, 1, _banyan.max_render_size)
        self._sim.render(_file_path("render", path), str(axis), size, kind, point,
                         None if extent is None else float(extent), float(range),
                         None if vmin is None else float(vmin), None if vmax is None else float(vmax),
                         bool(annotate), "" if types is None else str(types))

    def save(self, path: "str | os.PathLike[str]") -> None:
        """Writes the exact device state into the run folder path as the CLI's checkpoint, path/checkpoint.bin
        (the folder made when missing; a temporary name, then renamed): Simulation.load(path) and `banyan run
        --restart path` continue it bit for bit, as they continue a `banyan run` output folder. path/checkpoint.bin
        names the same file; a path that is a file is refused."""
        self._sim.save(os.path.join(_run_folder(path), "checkpoint.bin"))

    device = _native_property("device", """The device it runs on ('backend #index name').""")

    opening = _native_property("opening", """The opening criterion: one of banyan.opening_criteria ("paper" or "bmax").""")

    alpha = _native_property("alpha", """The relative criterion's alpha (0: off).""")

    time_steps = _native_property("steps_kind", """"shared" or "block".""")

    eta = _native_property("eta", """Block steps: the step criterion's accuracy parameter.""")

    max_rung = _native_property("max_rung", """Block steps: the deepest rung allowed.""")

    rung_rule = _native_property("rung_rule", """Block steps: "gadget" or "symmetric" (how a rung is chosen).""")

    @property
    def block_stats(self) -> dict:
        """Block steps, since the start or load: rungs (particles on each rung now, rung 0 first), deepest (the
        deepest rung used), substeps, active_updates (particles given new forces, summed over substeps), steps, and
        saving (how many times fewer force evaluations than a shared step of dt / 2^deepest)."""
        return self._sim.block_stats

    def __repr__(self) -> str:
        relative = f", alpha={self._sim.alpha:g}" if self._sim.alpha > 0 else ""
        if self._sim.steps_kind == "block":
            relative += (f", time_steps='block', eta={self._sim.eta:g}, max_rung={self._sim.max_rung}, "
                         f"rung_rule='{self._sim.rung_rule}'")
        return (f"banyan.Simulation(N={self._sim.size}, t={self.time:g}, steps={self.steps}, theta={self._sim.theta:g}, "
                f"opening={self._sim.opening}{relative}, eps={self._sim.eps:g}, dt={self._sim.dt:g}, "
                f"device={self.device!r})")
