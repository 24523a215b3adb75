"""`banyan accuracy --in` and `banyan bench forces --in`: the same measurements on a user's snapshot as on the
built-in Plummer spheres, and the error-against-time report (CSV)."""
import csv
import json
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def plummer_files(tmp_path_factory, cli):
    """The Plummer sphere `accuracy --n 4096 --seed 3` makes, written by `banyan run` in both formats."""
    d = tmp_path_factory.mktemp("tools")
    for fmt in ("hdf5", "tipsy"):
        cli("run", "-n", 4096, "--seed", 3, "--t-end", 1 / 64, "--snapshot-every", 0, "--format", fmt, "--quiet",
            "--out", d / fmt)
    return d / "hdf5" / "snapshot_00000.hdf5", d / "tipsy" / "snapshot_00000.tipsy"


def test_accuracy_of_a_file_is_that_of_the_same_particles_built_in(cli, plummer_files, tmp_path):
    hdf5, tipsy = plummer_files
    args = ["--theta", "0.3,0.5,0.75", "--sample", 1024, "--seed", 3, "--reps", 1]
    cli("accuracy", "--n", 4096, *args, "--csv", tmp_path / "builtin.csv")
    cli("accuracy", "--in", hdf5, *args, "--csv", tmp_path / "hdf5.csv")
    cli("accuracy", "--in", tipsy, *args, "--csv", tmp_path / "tipsy.csv")
    builtin, from_hdf5, from_tipsy = (read_csv(tmp_path / f"{k}.csv") for k in ("builtin", "hdf5", "tipsy"))
    assert len(builtin) == len(from_hdf5) == len(from_tipsy) == 3
    keys = ("n", "theta", "sample", "median", "p90", "p99", "max", "pp_mean", "pc_mean")
    for a, b, c in zip(builtin, from_hdf5, from_tipsy):
        assert [a[k] for k in keys] == [b[k] for k in keys] == [c[k] for k in keys]
    # The report: time and errors per setting; smaller theta, smaller errors and more time.
    p99 = [float(r["p99"]) for r in from_hdf5]
    ms = [float(r["ms"]) for r in from_hdf5]
    assert p99[0] < p99[1] < p99[2] < 1e-2 and all(m > 0 for m in ms) and ms[0] > ms[2]


def test_accuracy_reports_each_criterion(cli, plummer_files, tmp_path):
    hdf5, _ = plummer_files
    cli("accuracy", "--in", hdf5, "--opening", "paper,bmax", "--theta", "0.4,0.7", "--sample", 512, "--reps", 0,
        "--csv", tmp_path / "c.csv")
    rows = read_csv(tmp_path / "c.csv")
    assert [(r["opening"], r["theta"]) for r in rows] == [("paper", "0.4"), ("paper", "0.7"), ("bmax", "0.4"),
                                                          ("bmax", "0.7")]
    # bmax <= sqrt(3)/2 l + delta < l / theta + delta: at equal theta bmax accepts more cells, so fewer interactions
    # and larger errors.
    paper, bmax = rows[:2], rows[2:]
    for p, b in zip(paper, bmax):
        assert float(b["pp_mean"]) + float(b["pc_mean"]) < float(p["pp_mean"]) + float(p["pc_mean"])
        assert float(p["median"]) < float(b["median"]) < 1e-2


def test_bench_forces_on_a_file(cli, plummer_files, tmp_path):
    hdf5, _ = plummer_files
    cli("bench", "forces", "--in", hdf5, "--theta", "0.5,0.75", "--reps", 1, "--json", tmp_path / "b.json")
    rows = json.loads((tmp_path / "b.json").read_text())["results"]
    assert [(r["n"], r["theta"]) for r in rows] == [(4096, 0.5), (4096, 0.75)]
    assert all(r["total_ms"] > 0 and r["pp_per_particle"] > 0 for r in rows)


def test_file_options_are_checked(cli, plummer_files, tmp_path):
    hdf5, _ = plummer_files
    r = cli("bench", "forces", "--in", hdf5, "--min-log2", 10, check=False)
    assert r.returncode == 2 and "--min-log2 cannot be given with --in" in r.stderr
    r = cli("accuracy", "--in", hdf5, "--n", 1000, check=False)
    assert r.returncode == 2 and "either --n or --in" in r.stderr
    r = cli("accuracy", "--in", tmp_path / "missing.hdf5", check=False)
    assert r.returncode == 2 and "missing.hdf5" in r.stderr
    r = cli("accuracy", "--in", hdf5, "--opening", "paper,dehnen", check=False)
    assert r.returncode == 2 and "paper or bmax, got 'dehnen'" in r.stderr
    r = cli("bench", "forces", "--in", hdf5, "--opening", "", check=False)
    assert r.returncode == 2 and "opening criterion" in r.stderr


def test_help_texts_say_what_a_newcomer_needs(cli):
    """`banyan --help` and each command's help name the inputs (HDF5 and tipsy files, every --ic), the outputs, units,
    block steps and mpirun, with examples (issue 31: they once spoke of tipsy input and Plummer spheres only)."""
    top = cli("--help").stdout
    for word in ("HDF5", "tipsy", "--in FILE", "galaxy-merger", "hernquist", "--units", "--steps block", "mpirun",
                 "examples:", "banyan run --in snap.hdf5"):
        assert word in top, word
    assert "a tipsy file's particles" not in top and "on Plummer spheres;" not in top
    run = cli("run", "--help").stdout
    for word in ("--in FILE", "HDF5", "GADGET-2/4", "SWIFT", "tipsy", "--format", "--units", "--steps", "block",
                 "--restart", "mpirun", "examples:"):
        assert word in run, word
    for kind in ("plummer", "hernquist", "disc", "uniform", "uniform-cold", "merger", "galaxy", "galaxy-merger"):
        assert f" {kind}" in run, kind
    assert "block runs on one rank" not in run  # block steps run over ranks too
    for command, words in ((["forces"], ("HDF5", "tipsy", "--direct", "mpirun", "examples:")),
                           (["render"], ("HDF5", "tipsy", "--type", "examples:")),
                           (["accuracy"], ("--in FILE", "HDF5", "hernquist", "examples:")),
                           (["bench", "forces"], ("--in FILE", "HDF5", "hernquist", "mpirun", "examples:")),
                           (["bench", "tree"], ("Plummer", "examples:")),
                           (["bench", "primitives"], ("examples:",)),
                           (["bench", "galaxy"], ("examples:",))):
        text = cli(*command, "--help").stdout
        for word in words:
            assert word in text, (command, word)
    group = cli("bench", "--help").stdout
    assert "bench forces" in group and "--in FILE" in group


def test_readme_lists_the_options_a_restart_takes_as_the_program_does(cli):
    """Every list in README of the options allowed beside --restart is the program's own (its --restart help, made
    from the options a restart takes): one once left out --render, which the CLI takes."""
    help_line = re.search(r"--restart DIR\s+continue[^\n]*\(with ([^)]*) only\)", cli("run", "--help").stdout)
    assert help_line, "banyan run --help lists what --restart takes"
    takes = set(re.findall(r"--[a-z-]+", help_line.group(1)))
    assert {"--t-end", "--render", "--quiet"} <= takes
    text = " ".join(README.read_text().split())
    lists = re.findall(r"--restart[^.;]*? only ((?:`--[a-z-]+`(?:,| and| or)? ?)+)", text)
    assert len(lists) >= 2, lists
    for found in lists:
        assert set(re.findall(r"--[a-z-]+", found)) == takes, found
