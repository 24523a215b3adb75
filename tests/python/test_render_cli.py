"""`banyan render` and `banyan run --render` from the command line: images beside the snapshots, and what they show
(a Plummer sphere: one round, centrally concentrated blob; a merger: two)."""
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
