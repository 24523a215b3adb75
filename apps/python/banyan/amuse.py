"""banyan as an AMUSE gravitational-dynamics code, in the Python process (no worker, no MPI).

    from amuse.units import nbody_system, units
    from amuse.ic.plummer import new_plummer_model
    from banyan.amuse import Banyan

    converter = nbody_system.nbody_to_si(1000 | units.MSun, 1 | units.parsec)
    stars = new_plummer_model(1000, convert_nbody=converter)
    gravity = Banyan(converter)                   # or Banyan() for particles in N-body units
    gravity.parameters.epsilon_squared = (0.01 | units.parsec) ** 2
    gravity.parameters.timestep = 0.01 | units.Myr
    gravity.particles.add_particles(stars)
    channel = gravity.particles.new_channel_to(stars)
    gravity.evolve_model(1 | units.Myr)
    channel.copy()
    print(gravity.model_time.in_(units.Myr), gravity.kinetic_energy + gravity.potential_energy)

Banyan is built as AMUSE's own codes are (GravitationalDynamics over a "legacy interface" that speaks N-body units),
so it has their face: particles as an in-code particle set (add_particles, channels, removal), parameters in the
converter's units, the state model (commit_particles / recommit_particles happen by themselves), model_time,
kinetic_energy, potential_energy, and get_gravity_at_point / get_potential_at_point, the two calls with which it
serves as the gravity of a Bridge (amuse.couple.bridge). The legacy interface here is a Python object,
BanyanInterface, that keeps the particles and a banyan.Simulation; nothing is sent to a worker process. Like
AMUSE's own interfaces it registers banyan's paper with AMUSE's literature list, which AMUSE prints at exit ("Please
cite any relevant articles") as "AMUSE-Banyan".

Requires AMUSE (`pip install amuse-framework`); `import banyan` does not import this module.
"""
from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

try:
    from amuse.community.interface.gd import GravitationalDynamics, GravityFieldCode
    from amuse.support.literature import LiteratureReferencesMixIn
    from amuse.units import nbody_system
except ModuleNotFoundError as missing:
    if (missing.name or "").split(".")[0] != "amuse":
        raise
    raise ModuleNotFoundError("banyan.amuse needs AMUSE: pip install amuse-framework", name=missing.name) from missing

from . import Simulation, UsageError, __version__, gravity_at, opening_criteria

__all__ = ["Banyan"]

_OK = 0
_NOT_FOUND = -3  # a particle index the code does not hold (AMUSE's usual code)


class BanyanInterface(LiteratureReferencesMixIn):
    """banyan, a gravitational N-body tree code that runs entirely on the GPU, as the "legacy interface" of Banyan:
    AMUSE's GravitationalDynamicsInterface as Python methods in N-body units (G = 1), each returning its values and
    an error code. Particles live in float64 arrays on the host, in the order they were added; a banyan.Simulation
    made from them does the steps. The host arrays and the Simulation are kept in step lazily: an evolve leaves the
    new state on the device (read back when a getter asks), and any change to the particles or parameters marks the
    Simulation stale, so that the next call that needs it makes a new one from the host arrays (one upload and one
    force evaluation).

    The paper whose method banyan implements, which AMUSE lists at exit (LiteratureReferencesMixIn):

    .. [#] ADS:2012JCoPh.231.2825B (Bédorf, J., Gaburov, E. & Portegies Zwart, S., *Journal of Computational
       Physics*, **231**, 2825-2839 (2012); DOI 10.1016/j.jcp.2011.12.024)
    """

    @classmethod
    def version(cls) -> str:
        """banyan's version, which AMUSE prints beside the name (its default looks for an AMUSE package's)."""
        return __version__

    def __init__(self, backend: str, device: Optional[int]):
        LiteratureReferencesMixIn.__init__(self)
        self.backend, self.device = backend, device
        self.eps2 = 0.05 ** 2
        self.dt = 1.0 / 64
        self.theta = 0.75
        self.opening = "paper"
        self.alpha = 0.0
        self.time_steps = "shared"
        self.eta = 0.025
        self.max_rung = 16
        self.rung_rule = "symmetric"
        self.direct_at_point = False
        self.point_softening = "code"
        self.begin_time = 0.0
        self._clear()

    def _clear(self) -> None:
        self.time = self.begin_time  # the time of the host arrays (model_time: the Simulation's, once it stepped)
        self.ids = np.zeros(0, np.int64)
        self.mass = np.zeros(0)
        self.pos = np.zeros((0, 3))
        self.vel = np.zeros((0, 3))
        self.radius = np.zeros(0)
        self.next_id = 1
        self.sim: Optional[Simulation] = None
        self.sim_dt = None      # the dt the Simulation was made with
        self.host_stale = False  # the Simulation has evolved past the host arrays (and self.time)
        self.rebuilds = 0       # Simulations made (the first one included), for tests and the curious

    # --- keeping the host arrays and the Simulation in step ---

    def _pull(self) -> None:
        """Host arrays and time from the Simulation, after it has evolved."""
        if self.host_stale:
            self.pos = self.sim.positions.astype(np.float64)
            self.vel = self.sim.velocities.astype(np.float64)
            self.time = self.sim.time
            self.host_stale = False

    def _model_time(self) -> float:
        """The Simulation's own time once it stepped (also after an evolve_model that was interrupted)."""
        return self.sim.time if self.host_stale else self.time

    def _stale(self) -> None:
        """The host arrays (or the parameters) changed: the Simulation must be made again before it is used."""
        self._pull()
        self.sim = None

    def _build(self, dt: Optional[float] = None) -> Optional[Simulation]:
        """The Simulation of the current particles, made now when there is none (or its step is not @p dt)."""
        dt = self.dt if dt is None else dt
        if self.sim is not None and self.sim_dt == dt:
            return self.sim
        self._pull()
        if len(self.ids) == 0:
            self.sim = None
            return None
        self.sim = Simulation(self.pos, self.vel, self.mass, theta=self.theta, eps=math.sqrt(self.eps2), dt=dt,
                              time=self.time, backend=self.backend, device=self.device, opening=self.opening,
                              alpha=self.alpha, time_steps=self.time_steps, eta=self.eta, max_rung=self.max_rung,
                              rung_rule=self.rung_rule)
        self.sim_dt = dt
        self.rebuilds += 1
        return self.sim

    def _current(self) -> Optional[Simulation]:
        """The Simulation of the current particles, with whatever step it was made with (made now if stale)."""
        return self._build(self.sim_dt if self.sim is not None else None)

    def _rows(self, index: Any) -> Any:
        """Rows of the host arrays for particle indices, or None when one is not held."""
        index = np.asarray(index, np.int64)
        if index.size == 0:
            return np.zeros(0, np.int64)
        if len(self.ids) == 0:
            return None
        rows = np.minimum(np.searchsorted(self.ids, index), len(self.ids) - 1)  # ids grow; deletion keeps the order
        return rows if np.array_equal(self.ids[rows], index) else None

    def _get(self, index: Any, *columns: Any) -> tuple:
        self._pull()
        rows = self._rows(np.atleast_1d(index))
        if rows is None:
            zeros = np.zeros(np.size(index))
            return (*(zeros for _ in columns), _NOT_FOUND)
        values = [c[rows] for c in columns]
        if np.ndim(index) == 0:
            values = [v[0] for v in values]
        return (*values, _OK)

    def _set(self, index: Any, name: str, values: Any, column: Optional[int] = None) -> int:
        self._stale()
        rows = self._rows(np.atleast_1d(index))
        if rows is None:
            return _NOT_FOUND
        target = getattr(self, name)
        if column is None:
            target[rows] = values
        else:
            target[rows, column] = values
        return _OK

    # --- the code's life ---

    def initialize_code(self) -> int:
        return _OK

    def commit_parameters(self) -> int:
        self.time = self.begin_time
        return _OK

    def recommit_parameters(self) -> int:
        self._stale()
        return _OK

    def commit_particles(self) -> int:
        return _OK  # the Simulation is made when first needed, with the step that evolve_model asks for

    def recommit_particles(self) -> int:
        return _OK

    def synchronize_model(self) -> int:
        return _OK  # every particle is at model_time after each evolve_model

    def before_get_parameter(self) -> int:
        return _OK

    def before_set_parameter(self) -> int:
        return _OK

    def cleanup_code(self) -> int:
        self._clear()
        return _OK

    def stop(self) -> None:
        self._clear()

    # --- particles ---

    @staticmethod
    def _check_masses(mass: np.ndarray) -> None:
        bad = ~(np.isfinite(mass) & (mass > 0))
        if bad.any():
            raise UsageError(f"mass {mass[bad][0]} (N-body units): banyan's particles need positive finite masses "
                             "(it has no massless particles; give test particles to another code)")

    def new_particle(self, mass, x, y, z, vx, vy, vz, radius=0.0):
        one = np.ndim(mass) == 0
        mass, x, y, z, vx, vy, vz, radius = np.broadcast_arrays(*(np.atleast_1d(np.asarray(a, np.float64))
                                                                  for a in (mass, x, y, z, vx, vy, vz, radius)))
        self._check_masses(mass)
        self._stale()
        n = len(mass)
        ids = np.arange(self.next_id, self.next_id + n, dtype=np.int64)
        self.next_id += n
        self.ids = np.concatenate([self.ids, ids])
        self.mass = np.concatenate([self.mass, mass])
        self.pos = np.concatenate([self.pos, np.column_stack([x, y, z])])
        self.vel = np.concatenate([self.vel, np.column_stack([vx, vy, vz])])
        self.radius = np.concatenate([self.radius, radius])
        return (ids[0], _OK) if one else (ids, np.zeros(n, np.int32))

    def delete_particle(self, index) -> int:
        self._stale()
        rows = self._rows(np.atleast_1d(index))
        if rows is None:
            return _NOT_FOUND
        keep = np.ones(len(self.ids), bool)
        keep[rows] = False
        self.ids, self.mass, self.radius = self.ids[keep], self.mass[keep], self.radius[keep]
        self.pos, self.vel = self.pos[keep], self.vel[keep]
        return _OK

    def get_state(self, index):
        self._pull()
        return self._get(index, self.mass, self.pos[:, 0], self.pos[:, 1], self.pos[:, 2], self.vel[:, 0],
                         self.vel[:, 1], self.vel[:, 2], self.radius)

    def set_state(self, index, mass, x, y, z, vx, vy, vz, radius=None) -> int:
        if mass is not None:
            self._check_masses(np.atleast_1d(np.asarray(mass, np.float64)))
        for name, col, values in (("mass", None, mass), ("pos", 0, x), ("pos", 1, y), ("pos", 2, z),
                                  ("vel", 0, vx), ("vel", 1, vy), ("vel", 2, vz), ("radius", None, radius)):
            if values is not None and self._set(index, name, values, col) != _OK:
                return _NOT_FOUND
        return _OK

    def get_mass(self, index):
        return self._get(index, self.mass)

    def set_mass(self, index, mass) -> int:
        self._check_masses(np.atleast_1d(np.asarray(mass, np.float64)))
        return self._set(index, "mass", mass)

    def get_radius(self, index):
        return self._get(index, self.radius)

    def set_radius(self, index, radius) -> int:
        rows = self._rows(np.atleast_1d(index))  # the radius is not used by banyan: no new Simulation for it
        if rows is None:
            return _NOT_FOUND
        self.radius[rows] = radius
        return _OK

    def get_position(self, index):
        self._pull()
        return self._get(index, self.pos[:, 0], self.pos[:, 1], self.pos[:, 2])

    def set_position(self, index, x, y, z) -> int:
        return self.set_state(index, None, x, y, z, None, None, None)

    def get_velocity(self, index):
        self._pull()
        return self._get(index, self.vel[:, 0], self.vel[:, 1], self.vel[:, 2])

    def set_velocity(self, index, vx, vy, vz) -> int:
        return self.set_state(index, None, None, None, None, vx, vy, vz)

    def _component(name: str, column: int) -> Any:
        def set(self, index, values) -> int:
            return self._set(index, name, values, column)
        return set

    set_x, set_y, set_z = _component("pos", 0), _component("pos", 1), _component("pos", 2)
    set_vx, set_vy, set_vz = _component("vel", 0), _component("vel", 1), _component("vel", 2)
    del _component

    def get_acceleration(self, index):
        sim = self._current()
        acc = sim.accelerations.astype(np.float64) if sim is not None else np.zeros((0, 3))
        return self._get(index, acc[:, 0], acc[:, 1], acc[:, 2])

    def get_potential(self, index):
        sim = self._current()
        pot = sim.potentials.astype(np.float64) if sim is not None else np.zeros(0)
        return self._get(index, pot)

    # --- evolution and the system's quantities ---

    def evolve_model(self, t_end) -> int:
        t_end = float(t_end)
        if not math.isfinite(t_end):
            raise UsageError(f"evolve_model: the end time must be finite, got {t_end} (N-body units)")
        # At or before model_time (to 1e-9 of a step, for times that went through a unit conversion): nothing.
        span = t_end - self._model_time()
        if not span > 1e-9 * self.dt:
            return _OK
        # n equal steps of at most dt that end at t_end: whole steps of dt itself when the span is a whole number of
        # them (to 1e-9 of a step), else a shorter step. The Simulation counts them, and refuses an end more than
        # 10^15 steps away, by its own rule.
        n = max(1, math.ceil(span / self.dt - 1e-9))
        h = span / n
        sim = self._build(self.dt if abs(h - self.dt) <= 1e-9 * self.dt else h)
        if sim is None:
            self.time = t_end
            return _OK
        start = sim.steps
        try:
            sim.evolve(t_end, progress=False)
        finally:  # also when interrupted (Ctrl-C) midway: model_time is then the Simulation's
            self.host_stale = self.host_stale or sim.steps != start
        return _OK

    def get_time(self):
        return self._model_time(), _OK

    def _energy(self, key: str):
        sim = self._current()
        return (sim.energies()[key] if sim is not None else 0.0), _OK

    def get_kinetic_energy(self):
        return self._energy("kinetic")

    def get_potential_energy(self):
        return self._energy("potential")

    def get_total_mass(self):
        return float(self.mass.sum()), _OK

    def get_center_of_mass_position(self):
        self._pull()
        c = (self.mass[:, None] * self.pos).sum(0) / self.mass.sum() if len(self.mass) else np.zeros(3)
        return c[0], c[1], c[2], _OK

    def get_center_of_mass_velocity(self):
        self._pull()
        c = (self.mass[:, None] * self.vel).sum(0) / self.mass.sum() if len(self.mass) else np.zeros(3)
        return c[0], c[1], c[2], _OK

    def get_total_radius(self):
        self._pull()
        if len(self.mass) == 0:
            return 0.0, _OK
        c = (self.mass[:, None] * self.pos).sum(0) / self.mass.sum()
        return float(np.sqrt(((self.pos - c) ** 2).sum(1).max())), _OK

    def get_indices_of_colliding_particles(self):
        return 0, 0, -2  # no collision detection

    # --- the field at points ---

    def _field(self, eps, x, y, z):
        self._pull()
        points = np.column_stack([np.atleast_1d(np.asarray(c, np.float64)) for c in (x, y, z)])
        acc, pot = np.zeros((len(points), 3)), np.zeros(len(points))
        if len(self.ids) == 0 or len(points) == 0:
            return acc, pot
        eps_code = math.sqrt(self.eps2)
        if self.point_softening == "code":
            groups = [(eps_code, np.arange(len(points)))]
        else:  # "combined": sqrt(eps_code^2 + eps^2) for each point, one call for each distinct eps
            eps = np.broadcast_to(np.asarray(eps, np.float64), (len(points),))
            groups = [(math.sqrt(self.eps2 + e * e), np.nonzero(eps == e)[0]) for e in np.unique(eps)]
        for soft, rows in groups:
            a, p = gravity_at(points[rows], self.pos, self.mass, theta=self.theta, eps=soft, backend=self.backend,
                              device=self.device, direct=self.direct_at_point)
            acc[rows], pot[rows] = a, p
        return acc, pot

    def get_gravity_at_point(self, eps, x, y, z):
        acc, _ = self._field(eps, x, y, z)
        return acc[:, 0], acc[:, 1], acc[:, 2], _OK

    def get_potential_at_point(self, eps, x, y, z):
        _, pot = self._field(eps, x, y, z)
        return pot, _OK

    # --- parameters ---

    def get_eps2(self):
        return self.eps2, _OK

    def set_eps2(self, value) -> int:
        return self._set_finite("eps2", "epsilon_squared", value, positive=False)

    def get_time_step(self):
        return self.dt, _OK

    def set_time_step(self, value) -> int:
        return self._set_finite("dt", "timestep", value, positive=True)

    def _set_finite(self, attr: str, name: str, value, positive: bool) -> int:
        """Sets the parameter `attr` to float(value), refused (UsageError naming it `name`) unless finite and > 0
        (`positive`) or >= 0; the engine is rebuilt on next use."""
        v = float(value)
        if not ((v > 0 if positive else v >= 0) and math.isfinite(v)):
            raise UsageError(f"{name} must be {'>' if positive else '>='} 0 and finite, got {value}")
        setattr(self, attr, v)
        self._stale()
        return _OK

    def get_begin_time(self):
        return self.begin_time, _OK

    def set_begin_time(self, value) -> int:
        v = float(value)
        if not math.isfinite(v):
            raise UsageError(f"begin_time must be finite, got {value}")
        self._stale()
        self.begin_time = self.time = v  # as Bonsai: the model time moves with it
        return _OK

    def _option(name: str, kind: Any, check: Any = None) -> tuple:
        def get(self):
            return getattr(self, name), _OK

        def set(self, value):
            value = kind(value)
            if check is not None:
                check(value)
            setattr(self, name, value)
            if name not in ("direct_at_point", "point_softening"):
                self._stale()
            return _OK
        return get, set

    def _choice(name: str, allowed: tuple) -> Any:
        def check(value):
            if value not in allowed:
                raise UsageError(f"{name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")
        return check

    def _within(name: str, low: float, high: float = math.inf, low_open: bool = True) -> Any:
        def check(value):
            if not ((value > low if low_open else value >= low) and value <= high):
                raise UsageError(f"{name} must be in {'(' if low_open else '['}{low:g}, {high:g}], got {value}")
        return check

    get_theta, set_theta = _option("theta", float, _within("opening_angle", 0.0, 1.0))
    get_opening, set_opening = _option("opening", str, _choice("opening_criterion", opening_criteria))
    get_alpha, set_alpha = _option("alpha", float, _within("relative_opening", 0.0, low_open=False))
    get_time_steps, set_time_steps = _option("time_steps", str, _choice("time_steps", ("shared", "block")))
    get_eta, set_eta = _option("eta", float, _within("block_eta", 0.0))
    get_max_rung, set_max_rung = _option("max_rung", int, _within("max_rung", 0, low_open=False))
    get_rung_rule, set_rung_rule = _option("rung_rule", str, _choice("rung_rule", ("gadget", "symmetric")))
    get_direct_at_point, set_direct_at_point = _option("direct_at_point", bool)
    get_point_softening, set_point_softening = _option("point_softening", str,
                                                       _choice("point_softening", ("code", "combined")))
    del _option, _choice, _within


class Banyan(GravitationalDynamics, GravityFieldCode):
    """banyan's tree code as an AMUSE gravitational-dynamics code (like Bonsai, BHTree), run in this process.

    Banyan(convert_nbody=None, backend="auto", device=None, **options): convert_nbody, an nbody_system.nbody_to_si
    converter, lets particles, times and parameters be given and read in physical units (without it, in N-body
    units); banyan itself computes in N-body units with G = 1, in float32. backend and device choose banyan's
    device as for banyan.Simulation (the first OpenCL use compiles the kernels: some seconds on a CPU).

    Parameters (code.parameters), defaulting to banyan's (and Bonsai's) values:
        epsilon_squared       Plummer softening squared (0.05^2 N-body lengths^2)
        timestep              the leapfrog's step dt (1/64 N-body times); with block steps the largest one
        opening_angle         theta of the tree walk, in [0, 1] (0.75)
        opening_criterion     "paper" (d > l / theta + delta) or "bmax"
        relative_opening      alpha of the relative criterion on top (0: off; use opening_angle 1 with it)
        time_steps            "shared" (one dt for all) or "block" (dt / 2^k for each particle)
        block_eta, max_rung   block steps' accuracy parameter (0.025) and deepest rung (16)
        rung_rule             block steps: "symmetric" (the criterion at a step's start and its predicted end:
                              far less energy drift; the default) or "gadget" (at its start; README, "Time steps")
        begin_time            the model time at the start (0)
        direct_at_point       get_gravity_at_point / get_potential_at_point by direct summation (False: tree)
        point_softening       "code" or "combined": see get_gravity_at_point

    evolve_model(t) takes n = ceil((t - model_time) / timestep) equal kick-drift-kick steps of
    (t - model_time) / n <= timestep, so that every particle ends at t (model_time is then t): when the
    interval is a whole number of timesteps (to 1e-9 of one) these are steps of timestep itself, and a run of
    such calls gives the same numbers as banyan.Simulation.evolve; otherwise the shorter step costs a new
    Simulation for that call. A t at or before model_time does nothing; one that is not finite, or more than 10^15
    steps away, is refused (UsageError). model_time is the Simulation's own time: after a call stopped midway
    (Ctrl-C raises KeyboardInterrupt between two steps) it is where the particles are, and the next call goes on
    from there.

    Particles (code.particles: mass, x, y, z, vx, vy, vz, radius; particles.get_acceleration() and
    particles.get_potential() give those of banyan's last force evaluation, at the current positions) are kept on
    the host in float64 and given to banyan as float32. Changing them (a Bridge's kick of the velocities, a
    channel's copy, add_particles, remove_particles, new masses) or a parameter makes banyan.Simulation anew from
    the particles before the next evolve or energy: one upload and one force evaluation (banyan.Simulation takes
    no new velocities in place); `rebuilds` counts them. Particles need positive masses; radius is kept, not used.

    kinetic_energy and potential_energy are banyan's sums (on the device, in double precision) of the current
    state; the potential energy is half the sum of m phi, phi from the tree walk at opening_angle and softened
    with epsilon_squared, as the particles feel it.
    """

    def __init__(self, convert_nbody: Any = None, backend: str = "auto", device: Optional[int] = None,
                 **options: Any):
        self._engine = BanyanInterface(backend, device)
        GravitationalDynamics.__init__(self, self._engine, convert_nbody, **options)

    def get_gravity_at_point(self, eps: Any, x: Any, y: Any, z: Any) -> Any:
        """The acceleration (ax, ay, az) at the points (x, y, z) that banyan's particles create (G = 1 in N-body
        units, constants.G through the converter): computed now by banyan.gravity_at from the particles' current
        positions and masses, by a walk of a tree built for this call with the points in it as massless
        particles, at the code's opening_angle with the paper's criterion (gravity_at has no other: with "bmax"
        or a relative_opening the field at points is not walked as the particles' forces are);
        parameters.direct_at_point = True sums all pairs instead. Softening: with point_softening "code" (the
        default, as BHTree) the code's epsilon_squared, and eps is not used; with "combined", sqrt(epsilon_squared
        + eps^2) for each point (eps: a length, or one for each point; one walk for each distinct value), which is
        symmetric between two codes."""
        return self.overridden().get_gravity_at_point(eps, x, y, z)

    def get_potential_at_point(self, eps: Any, x: Any, y: Any, z: Any) -> Any:
        """The potential at the points (x, y, z), as get_gravity_at_point computes the acceleration (the same
        walk, softening and options)."""
        return self.overridden().get_potential_at_point(eps, x, y, z)

    @property
    def simulation(self) -> Optional[Simulation]:
        """The banyan.Simulation of the current particles (made now if they changed; None without particles), to
        read (device, block_stats) or save() as a run folder. Stepping it directly bypasses model_time."""
        return self._engine._current()

    @property
    def rebuilds(self) -> int:
        """How many times banyan.Simulation was made from the particles (the first time included)."""
        return self._engine.rebuilds

    def define_state(self, handler: Any) -> None:
        GravitationalDynamics.define_state(self, handler)
        GravityFieldCode.define_state(self, handler)

    def define_methods(self, handler: Any) -> None:
        GravitationalDynamics.define_methods(self, handler)
        length, time = nbody_system.length, nbody_system.time
        acc = nbody_system.acceleration
        err, none = handler.ERROR_CODE, handler.NO_UNIT
        handler.add_method("get_gravity_at_point", (length, length, length, length), (acc, acc, acc, err))
        handler.add_method("get_potential_at_point", (length, length, length, length),
                           (nbody_system.potential, err))
        for name, unit in (("x", length), ("y", length), ("z", length), ("vx", nbody_system.speed),
                           ("vy", nbody_system.speed), ("vz", nbody_system.speed)):
            handler.add_method("set_" + name, (none, unit), (err,))
        handler.add_method("get_eps2", (), (length ** 2, err))
        handler.add_method("set_eps2", (length ** 2,), (err,))
        handler.add_method("set_time_step", (time,), (err,))
        handler.add_method("get_begin_time", (), (time, err))
        handler.add_method("set_begin_time", (time,), (err,))
        for name in ("theta", "opening", "alpha", "time_steps", "eta", "max_rung", "rung_rule", "direct_at_point",
                     "point_softening"):
            handler.add_method("get_" + name, (), (none, err))
            handler.add_method("set_" + name, (none,), (err,))

    def define_parameters(self, handler: Any) -> None:
        p = handler.add_method_parameter
        p("get_eps2", "set_eps2", "epsilon_squared", "Plummer softening length squared",
          default_value=0.05 ** 2 | nbody_system.length ** 2)
        p("get_time_step", "set_time_step", "timestep", "the leapfrog's step (with block steps, the largest)",
          default_value=1.0 / 64 | nbody_system.time)
        p("get_theta", "set_theta", "opening_angle", "opening angle theta of the tree walk, in [0, 1]",
          default_value=0.75)
        p("get_opening", "set_opening", "opening_criterion", "'paper' (d > l / theta + delta) or 'bmax'",
          default_value="paper")
        p("get_alpha", "set_alpha", "relative_opening", "alpha of the relative opening criterion (0: off)",
          default_value=0.0)
        p("get_time_steps", "set_time_steps", "time_steps", "'shared' or 'block' time steps", default_value="shared")
        p("get_eta", "set_eta", "block_eta", "block steps: accuracy parameter eta", default_value=0.025)
        p("get_max_rung", "set_max_rung", "max_rung", "block steps: the deepest rung", default_value=16)
        p("get_rung_rule", "set_rung_rule", "rung_rule", "block steps: 'symmetric' or 'gadget' rung choice",
          default_value="symmetric")
        p("get_begin_time", "set_begin_time", "begin_time", "model time at the start",
          default_value=0.0 | nbody_system.time)
        p("get_direct_at_point", "set_direct_at_point", "direct_at_point",
          "get_gravity_at_point / get_potential_at_point by direct summation instead of the tree", default_value=False)
        p("get_point_softening", "set_point_softening", "point_softening",
          "softening at points: 'code' (epsilon_squared) or 'combined' (epsilon_squared + eps^2)",
          default_value="code")

    def define_particle_sets(self, handler: Any) -> None:
        handler.define_set("particles", "index_of_the_particle")
        handler.set_new("particles", "new_particle")
        handler.set_delete("particles", "delete_particle")
        handler.add_setter("particles", "set_state", names=("mass", "x", "y", "z", "vx", "vy", "vz", "radius"))
        handler.add_getter("particles", "get_state", names=("mass", "x", "y", "z", "vx", "vy", "vz", "radius"))
        handler.add_setter("particles", "set_mass", names=("mass",))
        handler.add_getter("particles", "get_mass", names=("mass",))
        handler.add_setter("particles", "set_position", names=("x", "y", "z"))
        handler.add_getter("particles", "get_position", names=("x", "y", "z"))
        handler.add_setter("particles", "set_velocity", names=("vx", "vy", "vz"))
        handler.add_getter("particles", "get_velocity", names=("vx", "vy", "vz"))
        handler.add_setter("particles", "set_radius", names=("radius",))
        handler.add_getter("particles", "get_radius", names=("radius",))
        for name in ("x", "y", "z", "vx", "vy", "vz"):  # one component alone (particles.vx = ...)
            handler.add_setter("particles", "set_" + name, names=(name,))
        # Methods, not attributes, so that channels and copies do not fetch them: particles.get_acceleration()
        handler.add_method("particles", "get_acceleration")
        handler.add_method("particles", "get_potential")
