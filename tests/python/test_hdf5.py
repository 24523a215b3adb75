"""HDF5 snapshots in the GADGET-4 layout: files written with h5py are read by banyan (MassTable, several particle
types, float64), banyan's own are read by h5py, pynbody and yt with the right count, positions and units."""
import h5py
import numpy as np
import pytest

import banyan

from conftest import direct_f64, plummer, read_tipsy_dark

G_CGS = 6.6743e-8
KPC_CM = 3.0856775814913673e21
MSUN_G = 1.98841e33  # IAU 2015: GM_sun / G, as banyan (core/files/units.cpp)
V_UNIT_KMS = np.sqrt(G_CGS * 1e10 * MSUN_G / KPC_CM) / 1e5  # km/s: G = 1 in kpc and 1e10 Msun


def write_gadget4(path, types, time=0.0, mass_table=None):
    """A GADGET-4 style snapshot: types = {type: dict(pos=, vel=, mass= or None)}; MassTable for types without
    masses."""
    counts = [len(types[k]["pos"]) if k in types else 0 for k in range(6)]
    with h5py.File(path, "w") as f:
        h = f.create_group("Header")
        h.attrs["NumPart_ThisFile"] = np.array(counts, np.int32)
        h.attrs["NumPart_Total"] = np.array(counts, np.uint32)
        h.attrs["NumPart_Total_HighWord"] = np.zeros(6, np.uint32)
        h.attrs["MassTable"] = np.array(mass_table if mass_table is not None else [0.0] * 6)
        h.attrs["Time"] = time
        h.attrs["Redshift"] = 0.0
        h.attrs["BoxSize"] = 0.0
        h.attrs["NumFilesPerSnapshot"] = 1
        for k, t in types.items():
            g = f.create_group(f"PartType{k}")
            g["Coordinates"] = t["pos"]
            g["Velocities"] = t["vel"]
            g["ParticleIDs"] = np.arange(len(t["pos"]), dtype=np.uint64) + 1
            if t.get("mass") is not None:
                g["Masses"] = t["mass"]


def two_types(n1=600, n4=200):
    pos, vel, _ = plummer(n1 + n4, seed=31)  # float64, as most writers have them
    return {1: dict(pos=pos[:n1], vel=vel[:n1], mass=None),
            4: dict(pos=pos[n1:], vel=vel[n1:], mass=np.full(n4, 2.0 / (n1 + n4)))}, 1.0 / (n1 + n4)


def test_forces_of_a_gadget4_file_with_a_mass_table(cli, tmp_path):
    types, m1 = two_types()
    path = tmp_path / "g4.hdf5"
    write_gadget4(path, types, mass_table=[0, m1, 0, 0, 0, 0])
    cli("forces", "--in", path, "--out", tmp_path / "a.npy", "--direct", "--eps", 0.01)
    a = np.load(tmp_path / "a.npy")
    # File order: type 1, then type 4; masses from the MassTable for type 1.
    pos = np.vstack([types[1]["pos"], types[4]["pos"]]).astype(np.float32)
    mass = np.concatenate([np.full(600, m1), types[4]["mass"]]).astype(np.float32)
    ref_acc, ref_pot = direct_f64(pos, mass, 0.01)
    assert a.shape == (800, 4)
    assert np.max(np.linalg.norm(a[:, :3] - ref_acc, axis=1) / np.linalg.norm(ref_acc, axis=1)) < 1e-4
    assert np.max(np.abs(a[:, 3] - ref_pot) / np.abs(ref_pot)) < 1e-5


def test_a_run_keeps_the_types_and_writes_what_h5py_reads(cli, tmp_path):
    types, m1 = two_types()
    path = tmp_path / "g4.hdf5"
    write_gadget4(path, types, time=0.5, mass_table=[0, m1, 0, 0, 0, 0])
    cli("run", "--in", path, "--t-end", 0.5 + 1 / 64, "--eps", 0.05, "--snapshot-every", 0, "--quiet",
        "--out", tmp_path / "run")
    with h5py.File(tmp_path / "run" / "snapshot_00000.hdf5", "r") as f:
        h = f["Header"].attrs
        assert list(h["NumPart_ThisFile"]) == [0, 600, 0, 0, 200, 0]
        assert h["Time"] == 0.5
        for k in (1, 4):
            g = f[f"PartType{k}"]
            assert np.array_equal(g["Coordinates"][:], types[k]["pos"].astype(np.float32))
            assert np.array_equal(g["Velocities"][:], types[k]["vel"].astype(np.float32))
            assert g["Potential"].shape == (len(types[k]["pos"]),) and np.all(g["Potential"][:] < 0)
            assert g["Acceleration"].shape == (len(types[k]["pos"]), 3)
        assert np.all(f["PartType1/Masses"][:] == np.float32(m1))
        assert "banyan" in str(f["Header"].attrs.get("Code", b""))
    with h5py.File(tmp_path / "run" / "snapshot_00001.hdf5", "r") as f:
        assert f["Header"].attrs["Time"] == pytest.approx(0.5 + 1 / 64)


def test_files_banyan_cannot_use_are_refused_with_the_reason(cli, tmp_path):
    types, m1 = two_types()
    path = tmp_path / "nomass.hdf5"
    write_gadget4(path, types)  # type 1 has neither Masses nor a MassTable entry
    r = cli("forces", "--in", path, "--out", tmp_path / "a.npy", check=False)
    assert r.returncode == 2 and "PartType1" in r.stderr and "mass" in r.stderr.lower()
    path = tmp_path / "nocoords.hdf5"
    write_gadget4(path, types, mass_table=[0, m1, 0, 0, 0, 0])
    with h5py.File(path, "a") as f:
        del f["PartType4/Coordinates"]
    r = cli("forces", "--in", path, "--out", tmp_path / "a.npy", check=False)
    assert r.returncode == 2 and "Coordinates" in r.stderr
    path = tmp_path / "noheader.hdf5"
    with h5py.File(path, "w") as f:
        f["PartType1/Coordinates"] = np.zeros((3, 3))
    r = cli("run", "--in", path, "--out", tmp_path / "r", check=False)
    assert r.returncode == 2 and "Header" in r.stderr
    assert not (tmp_path / "a.npy").exists()


@pytest.fixture(scope="module")
def kpc_run(tmp_path_factory, cli):
    out = tmp_path_factory.mktemp("units") / "run"
    cli("run", "-n", 2000, "--seed", 3, "--units", "kpc,1e10Msun", "--t-end", 1 / 64, "--snapshot-every", 0,
        "--quiet", "--out", out)
    return out / "snapshot_00000.hdf5"


def test_pynbody_reads_banyan_snapshots_with_units(kpc_run):
    pynbody = pytest.importorskip("pynbody")
    s = pynbody.load(str(kpc_run))
    assert len(s) == 2000 and len(s.dm) == 2000
    with h5py.File(kpc_run, "r") as f:
        pos = f["PartType1/Coordinates"][:]
        vel = f["PartType1/Velocities"][:]
    assert np.allclose(s.dm["pos"].in_units("kpc"), pos, rtol=1e-6)
    assert float(s["mass"].sum().in_units("Msol")) == pytest.approx(1e10, rel=1e-5)
    assert V_UNIT_KMS == pytest.approx(207.4, rel=1e-3)
    assert np.allclose(s.dm["vel"].in_units("km s^-1"), vel * V_UNIT_KMS, rtol=1e-5)


def test_yt_without_unit_base_takes_its_gadget_defaults_not_the_files_units(kpc_run):
    # What yt makes of a banyan file by itself (README, "Units"). yt's GADGET HDF5 reader (GadgetHDF5Dataset, yt 4.4)
    # sets its code units from unit_base alone, with kpc, 1e10 Msun and km/s when none is given; it never reads
    # UnitLength_in_cm, UnitMass_in_g or UnitVelocity_in_cm_per_s from the file, though banyan writes them where
    # GADGET-4 keeps them (/Parameters) and in /Units. Only yt's AREPO reader reads them (from /Header, /Parameters
    # or /Units), and yt picks it only for a file whose /Config has VORONOI or AMR (a moving mesh, which banyan is
    # not). Should a yt release read them for GADGET files too, the velocity check below fails: then
    # README, "Units", can drop its unit_base line.
    yt = pytest.importorskip("yt")
    yt.set_log_level(40)
    with h5py.File(kpc_run, "r") as f:
        u = {k: float(f["Parameters"].attrs[k]) for k in ("UnitLength_in_cm", "UnitMass_in_g",
                                                           "UnitVelocity_in_cm_per_s")}
        assert all(float(f["Units"].attrs[k]) == v for k, v in u.items())
    ds = yt.load(str(kpc_run))
    assert type(ds).__name__ == "GadgetHDF5Dataset"
    # For --units kpc,1e10Msun yt's default length and mass are the file's ...
    assert float(ds.length_unit.to("cm")) == pytest.approx(u["UnitLength_in_cm"], rel=1e-6)
    assert float(ds.mass_unit.to("g")) == pytest.approx(u["UnitMass_in_g"], rel=1e-5)
    # ... its velocity unit is not: 1 km/s against the file's 207.4 km/s (G = 1).
    assert u["UnitVelocity_in_cm_per_s"] / 1e5 == pytest.approx(V_UNIT_KMS, rel=1e-6)
    v = float(ds.velocity_unit.to("km/s"))
    assert v != pytest.approx(V_UNIT_KMS, rel=1e-3), \
        f"yt {yt.__version__} reads the velocity unit from the file now: README, Units, needs no unit_base for it"
    assert v == pytest.approx(1.0)


def test_yt_reads_banyan_snapshots_with_the_units_they_state(kpc_run):
    # The one line README, "Units", gives: the file's /Units group holds the units in the form unit_base wants.
    yt = pytest.importorskip("yt")
    yt.set_log_level(40)
    with h5py.File(kpc_run, "r") as f:
        u = {k: f["Units"].attrs[k] for k in ("UnitLength_in_cm", "UnitMass_in_g", "UnitVelocity_in_cm_per_s")}
        pos = f["PartType1/Coordinates"][:]
        vel = f["PartType1/Velocities"][:]
    ds = yt.load(str(kpc_run), unit_base=u)
    assert float(ds.length_unit.to("kpc")) == pytest.approx(1.0, rel=1e-6)
    assert float(ds.mass_unit.to("Msun")) == pytest.approx(1e10, rel=1e-4)
    assert float(ds.velocity_unit.to("km/s")) == pytest.approx(V_UNIT_KMS, rel=1e-6)
    ad = ds.all_data()
    m = ad["all", "particle_mass"]
    assert len(m) == 2000 and float(m.sum().to("Msun")) == pytest.approx(1e10, rel=1e-4)
    # yt reads in its own order: compare sorted.
    got = ad["all", "particle_position"].to("kpc").d
    assert np.allclose(np.sort(got[:, 0]), np.sort(pos[:, 0]), rtol=1e-6, atol=1e-6)
    v = ad["all", "particle_velocity_x"].to("km/s").d
    assert np.allclose(np.sort(v), np.sort(vel[:, 0] * V_UNIT_KMS), rtol=1e-5, atol=1e-6)


def test_without_units_pynbody_and_yt_still_open_them(cli, tmp_path):
    cli("run", "-n", 500, "--t-end", 1 / 64, "--snapshot-every", 0, "--quiet", "--out", tmp_path / "r")
    path = str(tmp_path / "r" / "snapshot_00000.hdf5")
    pynbody = pytest.importorskip("pynbody")
    assert len(pynbody.load(path)) == 500
    yt = pytest.importorskip("yt")
    yt.set_log_level(40)
    assert len(yt.load(path).all_data()["all", "particle_mass"]) == 500


def test_read_snapshot_gives_what_banyan_wrote_in_either_format(cli, tmp_path):
    # banyan.read_snapshot reads banyan's own files without h5py: HDF5 with ids, types, units and time; tipsy.
    types, m1 = two_types()
    path = tmp_path / "g4.hdf5"
    write_gadget4(path, types, time=0.25, mass_table=[0, m1, 0, 0, 0, 0])
    out = tmp_path / "run"
    cli("run", "--in", path, "--eps", 0.05, "--units", "kpc,1e10Msun", "--t-end", 0.25 + 1 / 64,
        "--snapshot-every", 0, "--quiet", "--out", out)
    snap = banyan.read_snapshot(out / "snapshot_00001.hdf5")
    assert isinstance(snap, banyan.Snapshot) and snap.time == pytest.approx(0.25 + 1 / 64)
    assert snap.units == "kpc,1e10Msun"
    with h5py.File(out / "snapshot_00001.hdf5", "r") as f:
        for k, rows in ((1, slice(0, 600)), (4, slice(600, 800))):
            g = f[f"PartType{k}"]
            assert np.array_equal(snap.pos[rows], g["Coordinates"][:])
            assert np.array_equal(snap.vel[rows], g["Velocities"][:])
            assert np.array_equal(snap.mass[rows], g["Masses"][:])
            assert np.array_equal(snap.ids[rows], g["ParticleIDs"][:])
            assert np.all(snap.types[rows] == k)
    assert snap.pos.dtype == np.float32 and snap.ids.dtype == np.uint64 and snap.types.dtype == np.int8
    cli("run", "-n", 300, "--format", "tipsy", "--t-end", 1 / 64, "--snapshot-every", 0, "--quiet",
        "--out", tmp_path / "t")
    tipsy = banyan.read_snapshot(tmp_path / "t" / "snapshot_00001.tipsy")
    t, pos, vel, mass = read_tipsy_dark(tmp_path / "t" / "snapshot_00001.tipsy")
    assert tipsy.time == t and tipsy.units is None
    assert np.array_equal(tipsy.pos, pos) and np.array_equal(tipsy.vel, vel) and np.array_equal(tipsy.mass, mass)
    assert np.array_equal(tipsy.ids, np.arange(300)) and np.all(tipsy.types == 1)
    with pytest.raises(banyan.UsageError, match="missing.hdf5"):
        banyan.read_snapshot(tmp_path / "missing.hdf5")
