"""`banyan render` and `banyan run --render` from the command line: images beside the snapshots, and what they show
(a Plummer sphere: one round, centrally concentrated blob; a merger: two; with --type, one component of a galaxy)."""
import re

import numpy as np
import pytest


def read_png(path):
    image = pytest.importorskip("matplotlib.image")
    return image.imread(str(path))


def brightness(img):
    return img[..., :3].mean(-1) if img.ndim == 3 else img


def test_run_render_writes_an_image_per_snapshot(cli, tmp_path):
    out = tmp_path / "run"
    cli("run", "-n", 4000, "--t-end", 1 / 32, "--snapshot-every", 0, "--render", "--quiet", "--out", out)
    for k in (0, 1):
        png = out / f"snapshot_{k:05d}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    cli("run", "--restart", out, "--t-end", 1 / 16, "--render", "--quiet")
    assert (out / "snapshot_00002.png").exists()


def test_render_shows_one_sphere_and_two_galaxies(cli, tmp_path):
    cli("run", "-n", 20000, "--t-end", 1 / 64, "--snapshot-every", 0, "--quiet", "--out", tmp_path / "p")
    cli("run", "--ic", "merger", "-n", 20000, "--t-end", 1 / 64, "--snapshot-every", 0, "--quiet",
        "--out", tmp_path / "m")
    for name in ("p", "m"):
        cli("render", tmp_path / name / "snapshot_00000.hdf5", "--out", tmp_path / f"{name}.png", "--size", 200,
            "--map-only")
    p = brightness(read_png(tmp_path / "p.png"))
    m = brightness(read_png(tmp_path / "m.png"))
    assert p.shape == (200, 200) and m.shape == (200, 200)
    # Plummer: the brightest pixels sit in the middle, and the map is as bright left of centre as right of it.
    cy, cx = np.unravel_index(np.argmax(p), p.shape)
    assert abs(cy - 100) < 10 and abs(cx - 100) < 10
    assert p[:, :100].sum() == pytest.approx(p[:, 100:].sum(), rel=0.1)
    # Merger: two peaks along x (the centres start 10 apart on the x axis), with a dark gap between them.
    row = m.max(axis=0)
    peaks = [x for x in range(2, 198) if row[x] == row[x - 2:x + 3].max() and row[x] > 0.8 * row.max()]
    assert len(peaks) >= 2 and max(peaks) - min(peaks) > 40
    gap = m[:, min(peaks) + 10:max(peaks) - 10].max(axis=0).min()
    assert gap < 0.5 * row.max()


def test_render_refuses_bad_input(cli, tmp_path):
    r = cli("render", tmp_path / "missing.hdf5", "--out", tmp_path / "x.png", check=False)
    assert r.returncode == 2 and "missing.hdf5" in r.stderr
    cli("run", "-n", 500, "--t-end", 1 / 64, "--snapshot-every", 0, "--quiet", "--out", tmp_path / "p")
    snap = tmp_path / "p" / "snapshot_00000.hdf5"
    for args, words in ((["--axis", "w"], "axis"), (["--size", 0], "size"), (["--extent", -1], "extent")):
        r = cli("render", snap, "--out", tmp_path / "x.png", *args, check=False)
        assert r.returncode == 2 and words in r.stderr, r.stderr
    assert not (tmp_path / "x.png").exists()
    # A name that asks for another format (or none) is refused before any work, never PNG bytes under it.
    for name in ("z.jpg", "z.jpeg", "z.gif", "z"):
        r = cli("render", snap, "--out", tmp_path / name, check=False)
        assert r.returncode == 2 and "PNG images only" in r.stderr and name in r.stderr, r.stderr
        assert not (tmp_path / name).exists()
    cli("render", snap, "--out", tmp_path / "upper.PNG", "--size", 32)
    assert (tmp_path / "upper.PNG").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def write_components(path, components):
    """A GADGET-4 style snapshot of {type: (count, centre)}: each type a cube of half-width 1 about its centre, every
    particle of type t of mass t + 1."""
    h5py = pytest.importorskip("h5py")
    rng = np.random.default_rng(5)
    counts = [components[t][0] if t in components else 0 for t in range(6)]
    with h5py.File(path, "w") as f:
        h = f.create_group("Header")
        h.attrs["NumPart_ThisFile"] = np.array(counts, np.int32)
        h.attrs["NumPart_Total"] = np.array(counts, np.uint32)
        h.attrs["NumPart_Total_HighWord"] = np.zeros(6, np.uint32)
        h.attrs["MassTable"] = np.zeros(6)
        h.attrs["Time"] = 0.0
        h.attrs["NumFilesPerSnapshot"] = 1
        for t, (n, centre) in components.items():
            g = f.create_group(f"PartType{t}")
            g["Coordinates"] = (np.asarray(centre) + rng.uniform(-1, 1, (n, 3))).astype(np.float32)
            g["Velocities"] = np.zeros((n, 3), np.float32)
            g["Masses"] = np.full(n, t + 1.0, np.float32)


def test_render_type_draws_one_component(cli, tmp_path):
    # A halo at x = -4, a disc at x = +4, a bulge at y = +4, black holes at y = -4.
    snap = tmp_path / "galaxy.hdf5"
    write_components(snap, {1: (4000, (-4, 0, 0)), 2: (1000, (4, 0, 0)), 3: (300, (0, 4, 0)), 5: (6, (0, -4, 0))})
    field = ("--centre", "0,0,0", "--extent", 6, "--size", 120, "--map-only")

    def draw(name, *args):
        r = cli("render", snap, "--out", tmp_path / f"{name}.png", *field, *args)
        return brightness(read_png(tmp_path / f"{name}.png")), r.stdout

    everything, _ = draw("all")
    disc, out = draw("disc", "--type", 2)
    assert "1000 particles of type 2 (disc), of 5306 in all" in out and "inside the field: 1000 particles" in out
    background = disc.min()
    # 10 pixels a unit; image column 10 (x + 6), row 10 (6 - y). Inside each cube, 2 pixels off its edges:
    halo, disc_part = (slice(52, 68), slice(12, 28)), (slice(52, 68), slice(92, 108))
    bulge = (slice(12, 28), slice(52, 68))
    assert (everything[halo] > background).mean() > 0.9  # the halo, drawn without --type
    assert (everything[bulge] > background).mean() > 0.8  # 300 particles on 256 pixels: a few stay dark
    assert (disc[halo] == background).all() and (disc[bulge] == background).all() and (disc[:, :80] == background).all()
    assert (disc[disc_part] > background).mean() > 0.9
    # By name, the same image; several types at once.
    by_name, _ = draw("disc-by-name", "--type", "disc")
    assert np.array_equal(by_name, disc)
    two, out = draw("disc-bulge", "--type", "disc,bulge")
    assert "1300 particles of types 2 (disc), 3 (bulge)" in out
    assert (two[bulge] > background).mean() > 0.8 and (two[disc_part] > background).mean() > 0.9
    assert (two[halo] == background).all()
    # Without --centre and --extent the field is framed on the selected particles: the disc's centre of mass.
    r = cli("render", snap, "--out", tmp_path / "framed.png", "--type", "disc")
    centre = re.search(r"centre \(([-0-9.e+]+), ([-0-9.e+]+), ([-0-9.e+]+)\), half-width ([0-9.e+]+)", r.stdout)
    assert centre, r.stdout
    x, y, z, half_width = map(float, centre.groups())
    assert abs(x - 4) < 0.1 and abs(y) < 0.1 and abs(z) < 0.1 and half_width < 2.5


def test_render_type_refuses_unknown_and_absent_types(cli, tmp_path):
    snap = tmp_path / "galaxy.hdf5"
    write_components(snap, {1: (400, (0, 0, 0)), 2: (100, (2, 0, 0)), 5: (1, (0, 0, 0))})
    for value, words in (("discs", "unknown particle type 'discs'"), ("7", "unknown particle type '7'"),
                         ("disc,,bh", "an empty item"),
                         ("3", "--type 3: the snapshot has no particles of type 3 (bulge); "
                               "it has types 1 (400), 2 (100), 5 (1)"),
                         ("disc,stars", "no particles of type 4 (stars)")):
        r = cli("render", snap, "--out", tmp_path / "x.png", "--type", value, check=False)
        assert r.returncode == 2 and words in r.stderr, (value, r.stderr)
    assert not (tmp_path / "x.png").exists()
    assert "--type" in cli("render", "--help").stdout
