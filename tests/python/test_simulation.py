"""banyan.Simulation: the same numbers as `banyan run` bit for bit, exact continuation through save/load (and through
the CLI's --restart), conserved quantities, and Ctrl-C."""
import math
import os
import signal
import threading

import numpy as np
import pytest

import banyan
from conftest import plummer, read_tipsy_dark


def cli_run(cli, out, backend, *args):
    cli("run", "--backend", backend, "--format", "tipsy", "--quiet", "--out", out, *args)
    return sorted(p for p in os.listdir(out) if p.startswith("snapshot_"))


def test_simulation_is_the_cli_run_bit_for_bit(cli, backend, tmp_path):
    out = tmp_path / "cli"
    snaps = cli_run(cli, out, backend, "-n", 3000, "--seed", 4, "--eps", 0.05, "--dt", "1/64", "--t-end", 0.25,
                    "--snapshot-every", 0)
    t0, p0, v0, m0 = read_tipsy_dark(out / snaps[0])
    t1, p1, v1, _ = read_tipsy_dark(out / snaps[-1])
    assert t0 == 0 and t1 == 0.25
    sim = banyan.Simulation(p0, v0, m0, theta=0.75, eps=0.05, dt=1 / 64, backend=backend)
    sim.evolve(t1)
    assert sim.steps == 16 and sim.time == 0.25
    assert np.array_equal(sim.positions, p1) and np.array_equal(sim.velocities, v1)
    # The CLI's energy log at the end holds the same energies.
    last = (out / "energy.csv").read_text().strip().splitlines()[-1].split(",")
    e = sim.energies()
    assert float(last[2]) == pytest.approx(e["kinetic"], rel=1e-12)
    assert float(last[4]) == pytest.approx(e["total"], rel=1e-12)


def test_relative_criterion_is_the_cli_run_bit_for_bit_and_survives_save_and_load(cli, backend, tmp_path):
    out = tmp_path / "cli"
    criterion = ("--opening", "bmax", "--theta", 1, "--alpha", 0.006)
    snaps = cli_run(cli, out, backend, "-n", 3000, "--seed", 4, "--eps", 0.05, "--dt", "1/64", "--t-end", 0.25,
                    "--snapshot-every", 0, *criterion)
    _, p0, v0, m0 = read_tipsy_dark(out / snaps[0])
    _, p1, v1, _ = read_tipsy_dark(out / snaps[-1])
    sim = banyan.Simulation(p0, v0, m0, theta=1, eps=0.05, dt=1 / 64, backend=backend, opening="bmax", alpha=0.006)
    assert sim.opening == "bmax" and sim.alpha == pytest.approx(0.006)
    assert "opening=bmax, alpha=0.006" in repr(sim)
    sim.evolve(0.125)
    sim.save(tmp_path / "sim.ckpt")
    loaded = banyan.Simulation.load(tmp_path / "sim.ckpt")
    assert loaded.opening == "bmax" and loaded.alpha == sim.alpha
    loaded.evolve(0.25)
    assert np.array_equal(loaded.positions, p1) and np.array_equal(loaded.velocities, v1)
    # The criterion changes the run: the paper's test at theta 0.75 ends elsewhere.
    plain = banyan.Simulation(p0, v0, m0, theta=0.75, eps=0.05, dt=1 / 64, backend=backend)
    plain.evolve(0.25)
    assert plain.opening == "paper" and plain.alpha == 0
    assert not np.array_equal(plain.positions, p1)


@pytest.mark.parametrize("rule", ["gadget", "symmetric"])
def test_block_steps_are_the_cli_run_bit_for_bit_and_survive_save_and_load(cli, backend, tmp_path, rule):
    out = tmp_path / "cli"
    steps = ("--steps", "block", "--eta", 0.02, "--max-rung", 8, "--rung-rule", rule)
    snaps = cli_run(cli, out, backend, "--ic", "hernquist", "-n", 3000, "--seed", 4, "--eps", 0.01, "--dt", "1/32",
                    "--t-end", 0.25, "--snapshot-every", 0, *steps)
    _, p0, v0, m0 = read_tipsy_dark(out / snaps[0])
    _, p1, v1, _ = read_tipsy_dark(out / snaps[-1])
    sim = banyan.Simulation(p0, v0, m0, theta=0.75, eps=0.01, dt=1 / 32, backend=backend, time_steps="block", eta=0.02,
                            max_rung=8, rung_rule=rule)
    assert sim.time_steps == "block" and sim.eta == 0.02 and sim.max_rung == 8 and sim.rung_rule == rule
    assert f"time_steps='block', eta=0.02, max_rung=8, rung_rule='{rule}'" in repr(sim)
    sim.evolve(0.125)
    stats = sim.block_stats
    assert sum(stats["rungs"]) == 3000 and len(stats["rungs"]) == 9
    assert stats["deepest"] >= 2 and stats["steps"] == 4 and stats["substeps"] > 4 and stats["saving"] > 1
    sim.save(tmp_path / "sim.ckpt")
    loaded = banyan.Simulation.load(tmp_path / "sim.ckpt")
    assert loaded.time_steps == "block" and loaded.max_rung == 8 and loaded.rung_rule == rule
    loaded.evolve(0.25)
    assert np.array_equal(loaded.positions, p1) and np.array_equal(loaded.velocities, v1)
    with pytest.raises(banyan.UsageError, match="time_steps must be 'shared' or 'block'"):
        banyan.Simulation(p0, v0, m0, eps=0.01, backend=backend, time_steps="adaptive")
    with pytest.raises(banyan.UsageError, match="rung_rule must be 'gadget' or 'symmetric', got 'oracle'"):
        banyan.Simulation(p0, v0, m0, eps=0.01, backend=backend, time_steps="block", rung_rule="oracle")
    with pytest.raises(banyan.UsageError, match="max_rung must be a whole number from 0 to 30, got 31"):
        banyan.Simulation(p0, v0, m0, eps=0.01, backend=backend, time_steps="block", max_rung=31)
    with pytest.raises(banyan.NumericalError, match="--max-rung"):
        banyan.Simulation(p0, v0, m0, eps=0.01, backend=backend, time_steps="block", max_rung=0)


def test_save_and_load_continue_exactly(backend, tmp_path):
    pos, vel, mass = plummer(2000, seed=5)
    straight = banyan.Simulation(pos, vel, mass, eps=0.05, dt=1 / 32, backend=backend)
    straight.step(12)
    half = banyan.Simulation(pos, vel, mass, eps=0.05, dt=1 / 32, backend=backend)
    half.step(5)
    half.save(tmp_path / "sim.ckpt")
    assert not any(p.name.startswith("sim.ckpt.") for p in tmp_path.iterdir())  # no temporary left behind
    loaded = banyan.Simulation.load(tmp_path / "sim.ckpt")
    assert loaded.steps == 5 and loaded.time == half.time and loaded.device == half.device
    loaded.step(7)
    assert np.array_equal(loaded.positions, straight.positions)
    assert np.array_equal(loaded.velocities, straight.velocities)
    assert np.array_equal(loaded.potentials, straight.potentials)
    assert loaded.energies()["total"] == straight.energies()["total"]


def test_particle_ids_and_types_survive_save_load_and_a_cli_run(cli, backend, tmp_path):
    pos, vel, mass = plummer(1000, seed=7)
    ids = (2**40 + 3 * np.arange(1000, dtype=np.uint64))[::-1]  # beyond 32 bits, descending
    sim = banyan.Simulation(pos, vel, mass, eps=0.05, dt=1 / 64, backend=backend, ids=ids)
    assert sim.ids.dtype == np.uint64 and np.array_equal(sim.ids, ids)
    assert np.array_equal(sim.types, np.ones(1000, np.int8))
    assert np.array_equal(banyan.Simulation(pos, vel, mass, backend=backend).ids, np.arange(1000))
    sim.step(2)
    run = tmp_path / "run"
    run.mkdir()
    sim.save(run / "checkpoint.bin")
    assert np.array_equal(banyan.Simulation.load(run / "checkpoint.bin").ids, ids)
    # The CLI continues it and writes the ids into its HDF5 snapshots.
    cli("run", "--restart", run, "--t-end", 0.0625, "--quiet")
    h5py = pytest.importorskip("h5py")
    with h5py.File(sorted(run.glob("snapshot_*.hdf5"))[-1], "r") as f:
        assert np.array_equal(f["PartType1/ParticleIDs"][:], ids)
    for bad in (ids[:10], -np.ones(1000, np.int64), np.zeros(1000, np.float64)):
        with pytest.raises(banyan.UsageError, match="ids"):
            banyan.Simulation(pos, vel, mass, backend=backend, ids=bad)


def test_a_simulation_writes_snapshots_with_units_and_renders_images(backend, tmp_path):
    h5py = pytest.importorskip("h5py")
    pos, vel, mass = plummer(800, seed=9)
    ids = np.arange(800, dtype=np.uint64) * 5 + 7
    sim = banyan.Simulation(pos, vel, mass, dt=1 / 64, backend=backend, units="kpc,1e10Msun", ids=ids)
    sim.step(4)
    sim.write_snapshot(tmp_path / "now.hdf5")
    with h5py.File(tmp_path / "now.hdf5", "r") as f:
        assert f["Header"].attrs["Time"] == pytest.approx(sim.time)
        assert np.array_equal(f["PartType1/Coordinates"][:], sim.positions)
        assert np.array_equal(f["PartType1/Velocities"][:], sim.velocities)
        assert np.array_equal(f["PartType1/ParticleIDs"][:], ids)
        assert f["Units"].attrs["UnitLength_in_cm"] == pytest.approx(3.0857e21, rel=1e-4)
        assert f["Units"].attrs["UnitMass_in_g"] == pytest.approx(1.989e43, rel=1e-3)
    sim.write_snapshot(tmp_path / "now.tipsy", format="tipsy")
    t, p, v, m = read_tipsy_dark(tmp_path / "now.tipsy")
    assert t == pytest.approx(sim.time) and np.array_equal(p, sim.positions)
    sim.render(tmp_path / "now.png", size=64)
    assert (tmp_path / "now.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    sim.render(tmp_path / "edge.png", axis="x", size=32, centre=(0, 0, 0), extent=2.0, annotate=False)
    assert (tmp_path / "edge.png").stat().st_size > 0
    for call, match in ((lambda: sim.write_snapshot(tmp_path / "x.fits", format="fits"), "format"),
                        (lambda: sim.render(tmp_path / "x.png", size=0), "size"),
                        (lambda: sim.render(tmp_path / "x.png", centre="middle"), "centre"),
                        (lambda: sim.render(tmp_path / "x.png", types="4"), "type"),
                        (lambda: sim.render(tmp_path / "x.jpg"), "PNG images only"),
                        (lambda: banyan.Simulation(pos, vel, mass, backend=backend, units="furlongs"), "unit")):
        with pytest.raises(banyan.UsageError, match=match):
            call()


def test_snapshot_formats_are_the_table_of_formats_and_each_is_written(backend, tmp_path):
    assert banyan.snapshot_formats == ("hdf5", "tipsy") and "snapshot_formats" in banyan.__all__
    pos, vel, mass = plummer(300, seed=9)
    sim = banyan.Simulation(pos, vel, mass, dt=1 / 64, backend=backend)
    for name in banyan.snapshot_formats:
        sim.write_snapshot(tmp_path / f"now.{name}", format=name)
        assert (tmp_path / f"now.{name}").stat().st_size > 0
    with pytest.raises(banyan.UsageError, match="format must be hdf5 or tipsy, got 'fits'"):
        sim.write_snapshot(tmp_path / "x.fits", format="fits")


def test_evolve_shows_a_progress_bar_when_asked(backend, capsys):
    pytest.importorskip("tqdm")
    pos, vel, mass = plummer(500, seed=8)
    shown = banyan.Simulation(pos, vel, mass, dt=1 / 64, backend=backend)
    quiet = banyan.Simulation(pos, vel, mass, dt=1 / 64, backend=backend)
    shown.evolve(0.25, progress=True)
    err = capsys.readouterr().err
    assert "16/16" in err and "step" in err
    quiet.evolve(0.25, progress=False)
    quiet.evolve(0.375)  # not a terminal here: no bar by default
    assert capsys.readouterr().err == ""
    shown.evolve(0.375, progress=True)
    capsys.readouterr()
    assert shown.steps == quiet.steps == 24
    assert np.array_equal(shown.positions, quiet.positions)
    # An end off the grid of dt: the bar counts the step it lies in, which is cut short there.
    shown.evolve(0.4, progress=True)
    quiet.evolve(0.4)
    assert "2/2" in capsys.readouterr().err
    assert shown.time == quiet.time == 0.4 and np.array_equal(shown.positions, quiet.positions)
    with pytest.raises(banyan.UsageError, match="progress"):
        quiet.evolve(0.5, progress="yes")


def test_the_cli_continues_a_saved_simulation(cli, backend, tmp_path):
    pos, vel, mass = plummer(1500, seed=6)
    sim = banyan.Simulation(pos, vel, mass, eps=0.05, dt=1 / 64, backend=backend)
    sim.step(4)
    run = tmp_path / "run"
    run.mkdir()
    sim.save(run / "checkpoint.bin")
    cli("run", "--restart", run, "--t-end", 0.25, "--quiet")
    sim.evolve(0.25)
    # The CLI's checkpoint at the end is the same state: loaded here, it matches bit for bit.
    after = banyan.Simulation.load(run)
    assert after.steps == sim.steps == 16
    assert np.array_equal(after.positions, sim.positions) and np.array_equal(after.velocities, sim.velocities)


def test_conserved_quantities_and_input_order(backend):
    pos, vel, mass = plummer(2000, seed=8)
    vel -= (vel * mass[:, None]).sum(0) / mass.sum()  # no net momentum
    sim = banyan.Simulation(pos, vel, mass, eps=0.05, dt=1 / 128, backend=backend)
    e0 = sim.energies()
    assert e0["de"] == 0 and e0["kinetic"] > 0 and e0["potential"] < 0
    assert e0["total"] == pytest.approx(e0["kinetic"] + e0["potential"])
    # Input order: the first positions are the input's, rounded to float32.
    assert np.array_equal(sim.positions, pos.astype(np.float32))
    sim.evolve(0.5)
    e = sim.energies()
    assert abs(e["de"]) < 1e-4
    assert np.allclose(e["momentum"], 0, atol=1e-4)  # the tree's forces are not exactly pairwise equal
    assert np.allclose(e["angular_momentum"], e0["angular_momentum"], atol=1e-4)
    # Particles moved, each by about its own velocity times t (not shuffled).
    moved = np.linalg.norm(sim.positions - pos, axis=1)
    assert np.median(moved / np.maximum(np.linalg.norm(vel, axis=1) * 0.5, 1e-9)) == pytest.approx(1, abs=0.3)
    acc, pot = banyan.gravity(sim.positions, mass, eps=0.05, backend=backend)
    assert np.percentile(np.linalg.norm(sim.accelerations - acc, axis=1) / np.linalg.norm(acc, axis=1), 99) < 1e-3
    assert np.allclose(sim.potentials, pot, rtol=1e-3)


def test_energy_error_of_a_system_without_energy(backend):
    # One particle at rest has E0 = 0: dE/E0 is 0 there, as the CLI's energy log writes it (it used to raise
    # ZeroDivisionError).
    sim = banyan.Simulation(np.zeros((1, 3)), np.zeros((1, 3)), np.ones(1), backend=backend)
    sim.step(3)
    e = sim.energies()
    assert e["total"] == e["kinetic"] == e["potential"] == 0
    assert e["de"] == 0 and math.copysign(1, e["de"]) == 1


def test_ctrl_c_interrupts_evolve(backend):
    pos, vel, mass = plummer(4000, seed=2)
    sim = banyan.Simulation(pos, vel, mass, eps=0.05, dt=1 / 1024, backend=backend)
    # Python's own Ctrl-C handler, also where the test runs started in the background by a shell, which ignores
    # SIGINT there (and so does Python then): the evolve below would never end.
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            sim.evolve(1e6)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, handler)
    taken = sim.steps
    assert 0 < taken < 1e9
    sim.step(1)  # still usable
    assert sim.steps == taken + 1


def test_a_step_longer_than_one_time_unit(cli, backend, tmp_path):
    # Units where a step is long (lengths 2^20, masses 2^-30, so times 2^45): the same run as in N-body units,
    # scaled, and its checkpoint continues in the CLI. A dt above 1 was refused with words about snapshot_every, an
    # option a Simulation does not have.
    pos, vel, mass = (a.astype(np.float32) for a in plummer(2000, seed=31))
    nbody = banyan.Simulation(pos, vel, mass, eps=0.05, dt=1 / 64, backend=backend)
    big = banyan.Simulation(pos * 2.0 ** 20, vel * 2.0 ** -25, mass * 2.0 ** -30, eps=0.05 * 2.0 ** 20,
                            dt=2.0 ** 45 / 64, backend=backend)
    nbody.step(4), big.step(4)
    assert big.time == 4 * 2.0 ** 45 / 64
    np.testing.assert_allclose(big.positions * 2.0 ** -20, nbody.positions, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(big.velocities * 2.0 ** 25, nbody.velocities, rtol=1e-5, atol=1e-6)
    out = tmp_path / "run"
    os.makedirs(out)
    big.save(out / "checkpoint.bin")
    cli("run", "--backend", backend, "--quiet", "--restart", out, "--t-end", 8 * 2.0 ** 45 / 64)
    assert any(p.startswith("snapshot_") for p in os.listdir(out))


def test_what_a_simulation_runs_with_also_after_loading_a_run_folder(cli, backend, tmp_path):
    # Masses, parameters, units and N, for one made from arrays and for one loaded from a `banyan run` folder, which
    # had no way to give its masses back (issue 48).
    pos, vel, mass = plummer(700, seed=12)
    sim = banyan.Simulation(pos, vel, mass, theta=0.6, eps=0.02, dt=1 / 32, backend=backend)
    assert len(sim) == 700 and sim.theta == pytest.approx(0.6) and sim.eps == 0.02 and sim.dt == 1 / 32
    assert sim.units is None and np.array_equal(sim.masses, mass.astype(np.float32))
    out = tmp_path / "run"
    cli("run", "--backend", backend, "-n", 900, "--seed", 2, "--theta", 0.5, "--eps", 0.03, "--dt", "1/32",
        "--t-end", 1 / 16, "--units", "pc,Msun", "--snapshot-every", 0, "--quiet", "--out", out)
    loaded = banyan.Simulation.load(out)
    snap = banyan.read_snapshot(out / "snapshot_00001.hdf5")
    assert len(loaded) == 900 and loaded.masses.dtype == np.float32
    assert np.array_equal(loaded.masses, snap.mass) and loaded.masses.sum() == pytest.approx(1, rel=1e-5)
    assert (loaded.theta, loaded.eps, loaded.dt) == (0.5, 0.03, 1 / 32) and loaded.units == "pc,Msun"


def test_save_writes_a_run_folder_that_load_and_the_cli_continue(cli, backend, tmp_path):
    # One convention for Simulation.save and `banyan run --restart`: a run folder holding checkpoint.bin.
    pos, vel, mass = plummer(600, seed=13)
    sim = banyan.Simulation(pos, vel, mass, eps=0.05, dt=1 / 64, backend=backend)
    sim.step(3)
    run = tmp_path / "deeper" / "run"
    sim.save(run)  # made, parents too
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint.bin"]
    first = (run / "checkpoint.bin").read_bytes()
    sim.save(run / "checkpoint.bin")  # the same file, named
    assert (run / "checkpoint.bin").read_bytes() == first
    loaded = banyan.Simulation.load(run)
    assert loaded.steps == 3 and np.array_equal(loaded.positions, sim.positions)
    cli("run", "--restart", run, "--t-end", 0.125, "--quiet")
    sim.evolve(0.125)
    assert np.array_equal(banyan.Simulation.load(run).positions, sim.positions)
    # A checkpoint file of an earlier release (save wrote the file itself) still loads; a file is not overwritten.
    old = tmp_path / "old.ckpt"
    old.write_bytes(first)
    assert banyan.Simulation.load(old).steps == 3
    with pytest.raises(banyan.UsageError, match="old.ckpt is a file; save writes a run folder"):
        sim.save(old)
    assert old.read_bytes() == first


@pytest.mark.parametrize("steps", [(), ("--steps", "block", "--eta", 0.02, "--max-rung", 8)], ids=["shared", "block"])
def test_evolve_ends_at_the_time_asked_as_the_cli_run_does(cli, backend, tmp_path, steps):
    # --t-end 0.1 with --dt 1/64 ended at 0.109375, and evolve(0.1) likewise (issue 48): both cut the last step short
    # to end at 0.1, the same numbers bit for bit, and go on from there alike.
    out = tmp_path / "cli"
    snaps = cli_run(cli, out, backend, "--ic", "hernquist", "-n", 2000, "--seed", 4, "--eps", 0.01, "--dt", "1/64",
                    "--t-end", 0.1, "--snapshot-every", 0, *steps)
    _, p0, v0, m0 = read_tipsy_dark(out / snaps[0])
    t1, p1, v1, _ = read_tipsy_dark(out / snaps[-1])
    assert t1 == 0.1
    kind = dict(time_steps="block", eta=0.02, max_rung=8) if steps else {}
    sim = banyan.Simulation(p0, v0, m0, eps=0.01, dt=1 / 64, backend=backend, **kind)
    sim.evolve(0.1)
    assert sim.time == 0.1 and sim.steps == 6
    assert np.array_equal(sim.positions, p1) and np.array_equal(sim.velocities, v1)
    sim.save(tmp_path / "at-0.1.ckpt")
    # On to t = 0.2: the CLI continues its run, Python both its simulation and the one it saved at 0.1.
    cli("run", "--restart", out, "--t-end", 0.2, "--quiet")
    t2, p2, v2, _ = read_tipsy_dark(out / sorted(p for p in os.listdir(out) if p.startswith("snapshot_"))[-1])
    sim.evolve(0.2)
    loaded = banyan.Simulation.load(tmp_path / "at-0.1.ckpt")
    assert loaded.time == 0.1
    loaded.evolve(0.2)
    assert t2 == sim.time == loaded.time == 0.2 and sim.steps == 12
    for s in (sim, loaded):
        assert np.array_equal(s.positions, p2) and np.array_equal(s.velocities, v2)
    # step() goes on along the grid of the start: 0.2 lies in step 13, which it completes.
    sim.step()
    assert sim.steps == 13 and sim.time == 13 / 64
