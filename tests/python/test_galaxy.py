"""banyan.galaxy and banyan.galaxy_merger: the particles `banyan run --ic galaxy` makes, with their GADGET types,
from the same options; bad options refused with banyan.UsageError. A galaxy's files in kpc and Msun for pynbody and
yt, its default softening in its units, and its stars where each tool looks for them (README, "Galaxies")."""
import re
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

import banyan

README = Path(__file__).resolve().parents[2] / "README.md"
KPC_CM = 3.0856775814913673e21
MSUN_G = 1.3271244e26 / 6.6743e-8  # IAU 2015 GM_sun / G, as banyan (core/files/units.hpp)


def test_galaxy_arrays_types_and_centre():
    g = banyan.galaxy(n=3001, seed=4, star_fraction=1 / 6)
    assert g.pos.shape == (3001, 3) and g.vel.shape == (3001, 3) and g.mass.shape == (3001,)
    assert g.pos.dtype == np.float32 and g.types.dtype == np.int8
    # Halo, disc, bulge, black hole, in that order; a sixth of the rest stars.
    assert list(np.unique(g.types)) == [1, 2, 3, 5]
    assert np.all(np.diff(g.types) >= 0)
    assert np.count_nonzero(g.types == 5) == 1
    assert np.count_nonzero((g.types == 2) | (g.types == 3)) == 500
    assert np.all(g.mass > 0)
    # Mirrored pairs: each component's centre of mass at the centre, to a particle or so.
    com = (g.mass[:, None] * g.pos).sum(0) / g.mass.sum()
    assert np.linalg.norm(com) < 1.0
    # The disc rotates about +z.
    d = g.types == 2
    lz = g.pos[d, 0] * g.vel[d, 1] - g.pos[d, 1] * g.vel[d, 0]
    assert lz.mean() > 0


def test_equal_masses_by_default_and_units():
    g = banyan.galaxy(n=20000)
    halo, disc = g.mass[g.types == 1][0], g.mass[g.types == 2][0]
    assert halo == pytest.approx(disc, rel=0.01)
    pc = banyan.galaxy(n=20000, units="pc,Msun")
    assert pc.pos[7, 0] == pytest.approx(1e3 * g.pos[7, 0], rel=1e-6)
    assert pc.mass[7] == pytest.approx(1e10 * g.mass[7], rel=1e-6)


def test_merger_black_holes_last_and_the_same_particles_as_the_cli(cli, tmp_path):
    m = banyan.galaxy_merger(n=6002, seed=3)
    assert list(m.types[-2:]) == [5, 5]
    assert np.linalg.norm(m.pos[-1] - m.pos[-2]) == pytest.approx(100, rel=1e-5)
    assert m.mass[-2] / m.mass[-1] == pytest.approx(3, rel=1e-5)
    cli("run", "--ic", "galaxy-merger", "-n", 6002, "--seed", 3, "--t-end", "1/64", "--quiet", "--out", tmp_path / "r")
    with h5py.File(tmp_path / "r" / "snapshot_00000.hdf5", "r") as f:
        for t in (1, 2, 3, 5):
            np.testing.assert_array_equal(f[f"PartType{t}/Coordinates"][:], m.pos[m.types == t])
            np.testing.assert_array_equal(f[f"PartType{t}/Velocities"][:], m.vel[m.types == t])


def test_bad_options_are_refused():
    with pytest.raises(banyan.UsageError, match="toomre_q"):
        banyan.galaxy(n=1000, toomre_q=-1)
    with pytest.raises(banyan.UsageError, match="unknown --galaxy 'andromeda'"):
        banyan.galaxy(n=1000, preset="andromeda")
    with pytest.raises(banyan.UsageError, match="too few"):
        banyan.galaxy(n=10)
    with pytest.raises(banyan.UsageError, match="unknown option"):
        banyan.galaxy_merger(n=1000, spin=3)
    with pytest.raises(banyan.UsageError, match="mass_ratio"):
        banyan.galaxy_merger(n=4000, mass_ratio=2)


@pytest.mark.parametrize("merger, keyword, value", [(False, "bulge_scale", 1e-100), (False, "halo_scale", 1e-10),
                                                    (False, "disc_scale_height", 1e10), (False, "bh_mass", 1e-100),
                                                    (True, "mass_ratio", 1e-300), (True, "separation", 1e30),
                                                    (False, "units", "cm,g"), (True, "units", "cm,Msun")])
def test_what_the_model_cannot_make_raises_naming_the_keyword(merger, keyword, value):
    # These crashed the interpreter (SIGSEGV: a bulge scale of 1e-100, a mass ratio of 1e-300) or gave particles of
    # mass 0 or non-finite velocities (issue 45): the core's one check refuses them, in Python's spelling.
    make = banyan.galaxy_merger if merger else banyan.galaxy
    with pytest.raises(banyan.UsageError, match=keyword):
        make(n=4000, **{keyword: value})


def test_cli_galaxy_options(cli, tmp_path):
    # Galaxy options belong to the galaxy models; fractions are fine; the run's snapshot holds the four types.
    r = cli("run", "--ic", "plummer", "-n", 100, "--halo-mass", 1e12, "--out", tmp_path / "p", check=False)
    assert r.returncode == 2 and "--halo-mass is for --ic galaxy and galaxy-merger only" in r.stderr
    r = cli("run", "--ic", "galaxy", "-n", 1000, "--mass-ratio", 0.5, "--out", tmp_path / "q", check=False)
    assert r.returncode == 2 and "--mass-ratio is for --ic galaxy-merger only" in r.stderr
    cli("run", "--ic", "galaxy", "--galaxy", "m31", "-n", 3000, "--star-fraction", "1/6", "--t-end", "1/64",
        "--quiet", "--out", tmp_path / "g")
    with h5py.File(tmp_path / "g" / "snapshot_00000.hdf5", "r") as f:
        counts = f["Header"].attrs["NumPart_Total"]
        assert list(counts) == [0, 2499, counts[2], counts[3], 0, 1]  # 2999 besides the black hole, a sixth stars
        assert counts[2] + counts[3] == 500


@pytest.fixture(scope="module")
def galaxy_file(tmp_path_factory, cli):
    """A galaxy made without --units (the model's kpc and 1e10 Msun), its snapshot at t = 0, and its type counts."""
    out = tmp_path_factory.mktemp("galaxy") / "g"
    cli("run", "--ic", "galaxy", "-n", 3000, "--star-fraction", "1/6", "--t-end", "1/64", "--snapshot-every", 0,
        "--quiet", "--out", out)
    path = out / "snapshot_00000.hdf5"
    with h5py.File(path, "r") as f:
        counts = [int(c) for c in f["Header"].attrs["NumPart_Total"]]
    return path, counts


def test_a_galaxy_without_units_states_kpc_and_msun_and_no_cosmology(galaxy_file):
    # It was written without units, so that pynbody took its positions for cosmological Mpc a h^-1 (issue 48).
    path, counts = galaxy_file
    assert counts[2] > 0 and counts[3] > 0 and counts[5] == 1
    with h5py.File(path, "r") as f:
        for group in ("Units", "Parameters"):
            assert f[group].attrs["UnitLength_in_cm"] == pytest.approx(KPC_CM, rel=1e-12)
            assert f[group].attrs["UnitMass_in_g"] == pytest.approx(1e10 * MSUN_G, rel=1e-12)
        assert f["Parameters"].attrs["units"] == b"kpc,1e10Msun" and f["Parameters"].attrs["eps"] == b"0.05"
        for group in ("Header", "Parameters", "Units"):  # an isolated run: no Hubble parameter anywhere
            assert "HubbleParam" not in f[group].attrs


def test_pynbody_reads_a_galaxy_in_kpc_and_msun_without_options(galaxy_file):
    pynbody = pytest.importorskip("pynbody")
    path, counts = galaxy_file
    with h5py.File(path, "r") as f:
        pos = np.vstack([f[f"PartType{t}/Coordinates"][:] for t in (1, 2, 3)])
        mass = sum(float(f[f"PartType{t}/Masses"][:].astype(np.float64).sum()) for t in (1, 2, 3, 5))
    s = pynbody.load(str(path))
    assert "h" not in s.properties  # not cosmological: no h or a factors in the units
    assert np.allclose(s.dm["pos"].in_units("kpc"), pos, rtol=1e-6, atol=1e-9)
    assert float(s["mass"].sum().in_units("Msol")) == pytest.approx(1e10 * mass, rel=1e-5)


def test_yt_reads_a_galaxy_in_kpc_and_msun_without_options(galaxy_file):
    yt = pytest.importorskip("yt")
    yt.set_log_level(40)
    path, counts = galaxy_file
    ds = yt.load(str(path))
    assert ds.cosmological_simulation == 0
    assert float(ds.length_unit.to("kpc")) == pytest.approx(1.0, rel=1e-6)
    assert float(ds.mass_unit.to("Msun")) == pytest.approx(1e10, rel=1e-4)


def test_the_default_softening_follows_the_units(cli, tmp_path):
    # --units pc,Msun once kept 0.05, then 0.05 pc instead of the model's 50 pc, without a word.
    def run(name, *args):
        r = cli("run", "--ic", "galaxy", "-n", 3000, "--t-end", "1/64", "--snapshot-every", 0, "--out",
                tmp_path / name, *args)
        with h5py.File(tmp_path / name / "snapshot_00000.hdf5", "r") as f:
            return f["Parameters"].attrs["eps"].decode(), r.stdout
    eps, said = run("pc", "--units", "pc,Msun")
    assert eps == "50" and ", eps 50," in said
    assert run("mpc", "--units", "Mpc,1e10Msun")[0] == "5e-05"
    assert run("given", "--units", "pc,Msun", "--eps", 0.05)[0] == "0.05"  # as given


def test_stars_reach_pynbody_and_yt_as_readme_says(galaxy_file, tmp_path):
    # README, "Galaxies": by default pynbody files the disc (type 2) and bulge (3) under dm with the halo, and
    # f.star is empty; a [gadgethdf-type-mapping] in its config makes them f.star. yt reads each type as its own
    # particle type; a union of types 2 and 3 makes the stars one. Should a release change its default, this fails
    # and README follows.
    path, counts = galaxy_file
    stars = counts[2] + counts[3]
    pytest.importorskip("pynbody")
    code = ("import warnings; warnings.simplefilter('ignore'); import pynbody; "
            f"s = pynbody.load({str(path)!r}); print(len(s.dm), len(s.star), len(s.bh))")
    plain = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert plain.stdout.split() == [str(counts[1] + stars), "0", "1"]
    config = re.search(r"```ini\n(\[gadgethdf-type-mapping\]\n.*?)```", README.read_text(), flags=re.S)
    (tmp_path / "config.ini").write_text(config.group(1))  # README's lines, as they stand
    mapped = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert mapped.stdout.split() == [str(counts[1]), str(stars), "1"]
    yt = pytest.importorskip("yt")
    yt.set_log_level(40)
    from yt.data_objects.unions import ParticleUnion
    ds = yt.load(str(path))
    ds.add_particle_union(ParticleUnion("stars", ["PartType2", "PartType3"]))
    ad = ds.all_data()
    assert len(ad["PartType2", "particle_mass"]) == counts[2] and len(ad["stars", "particle_mass"]) == stars
