"""docs/python.md runs as written: its `banyan ...` shell lines and its Python blocks, in order, in a fresh folder;
then what it claims is checked (the tree's error, the energy error, the figure)."""
import os
import re
import shlex
from pathlib import Path

import numpy as np

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "python.md"


def blocks(text, lang):
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def test_tutorial_runs_as_written(cli, tmp_path, monkeypatch):
    text = TUTORIAL.read_text()
    monkeypatch.chdir(tmp_path)
    commands = [line for b in blocks(text, "sh") for line in b.splitlines() if line.startswith("banyan ")]
    assert commands, "the tutorial makes its snapshot with banyan run"
    for line in commands:
        cli(*shlex.split(line)[1:])
    ns = {}
    for code in blocks(text, "python"):
        exec(compile(code, str(TUTORIAL), "exec"), ns)
    err = ns["err"]
    assert np.median(err) < 1e-3 and np.percentile(err, 99) < 6e-3  # "a few parts in 10^4 ... 10^3"
    assert np.all(np.isfinite(ns["acc_line"])) and ns["acc_line"].shape == (61, 3)
    assert abs(ns["de"][-1]) < 1e-3 and len(ns["de"]) == 16
    later = ns["later"]
    assert later.steps == ns["sim"].steps and np.array_equal(later.positions, ns["sim"].positions)
    fast = ns["fast"]
    assert fast.opening == "bmax" and fast.alpha == 0.006 and fast.time == ns["t0"]
    blocky = ns["blocky"]
    assert blocky.time_steps == "block" and blocky.steps == 1 and sum(blocky.block_stats["rungs"]) == len(ns["mass"])
    png = tmp_path / "merger.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20000
    assert os.path.exists("merger/snapshot_00000.hdf5")


def test_the_install_section_says_what_installs_each_module_the_tutorial_imports():
    # The tutorial once needed h5py and matplotlib, which only `python-install --test` installs, and said pytest was
    # there after a plain install (issue 48). Each module its Python blocks import is installed by a plain
    # scripts/python-install, or by --test and named in the Install section with it.
    text = TUTORIAL.read_text()
    install = text.split("## Install", 1)[1].split("\n## ", 1)[0]
    script = (TUTORIAL.parents[1] / "scripts" / "python-install").read_text()
    plain = set(re.search(r"^packages=\((.*?)\)", script, flags=re.M).group(1).split())
    with_test = set(re.search(r"packages\+=\((.*?)\)", script).group(1).split())
    imported = {m for b in blocks(text, "python") for m in re.findall(r"^(?:import|from) (\w+)", b, flags=re.M)}
    assert {"numpy", "banyan", "matplotlib"} <= imported
    for module in imported - {"banyan"}:
        if module not in plain:
            assert module in with_test and module in install and "python-install --test" in install, module
