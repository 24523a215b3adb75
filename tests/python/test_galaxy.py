"""banyan.galaxy and banyan.galaxy_merger: the particles `banyan run --ic galaxy` makes, with their GADGET types,
from the same options; bad options refused with banyan.UsageError."""
import h5py
import numpy as np
import pytest

import banyan


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
