"""`banyan run`'s times and what it prints (issue 48): the run ends, and writes its snapshots, at the times asked
(an interval or a list); it says what it will do and how long it will take, in units that show the figures; a stopped
run's summary gives the energy of the state it stopped in; and the commands print as they go into files, with
defaults sized to the device."""
import os
import re
import signal
import subprocess
import time

import banyan
from conftest import read_tipsy_dark


def snapshot_times(out):
    return [read_tipsy_dark(out / p)[0] for p in sorted(os.listdir(out)) if p.startswith("snapshot_")]


def test_the_run_ends_and_writes_snapshots_at_the_times_asked(cli, backend, tmp_path):
    out = tmp_path / "run"
    r = cli("run", "-n", 2000, "--backend", backend, "--format", "tipsy", "--t-end", 0.1, "--snapshot-every", 0.05,
            "--out", out)
    assert snapshot_times(out) == [0.0, 0.05, 0.1]
    text = r.stdout
    assert "t = 0 to 0.1 (7 steps, the last cut to 0.00625 to end at t = 0.1)" in text
    assert "snapshot_NNNNN.tipsy every 0.05 (steps cut short to reach each)" in text
    # Not a terminal: plain lines, no live line's carriage returns or ESC[K.
    assert "\r" not in text and "\x1b" not in text
    # The first step's time and the estimate; the log's line at the end, of step 7 at t = 0.1.
    assert re.search(r"^first step: [0-9.e+-]+ s; the 6 steps left to t = 0.1 take about \d+:\d\d:\d\d", text, re.M)
    assert re.search(r"^step 7/7  t 0.1  dE/E ", text, re.M)
    assert "dE/E +0.00e+00" not in text
    assert (out / "energy.csv").read_text().splitlines()[-1].startswith("7,0.1,")
    # Memory of a small run in a unit that shows it, not "0.00 GiB".
    assert re.search(r"^device memory: about [0-9.]+ KiB needed \(\d+ bytes per particle\)", text, re.M)
    assert re.search(r"^device memory: peak [0-9.]+ KiB,", text, re.M)
    assert "0.00 GiB" not in text

    # A list of times, given or in a file (GADGET's output list), beside the start and the end.
    listed = tmp_path / "listed"
    cli("run", "-n", 2000, "--backend", backend, "--format", "tipsy", "--t-end", 0.1, "--snapshot-times",
        "0.07,0.03", "--quiet", "--out", listed)
    assert snapshot_times(listed) == [0.0, 0.03, 0.07, 0.1]
    (tmp_path / "times.txt").write_text("# GADGET output list\n0.02 1\n0.0625 1\n")
    from_file = tmp_path / "from-file"
    r = cli("run", "-n", 2000, "--backend", backend, "--format", "tipsy", "--t-end", 0.1, "--snapshot-times",
            tmp_path / "times.txt", "--out", from_file)
    assert snapshot_times(from_file) == [0.0, 0.02, 0.0625, 0.1]
    assert "snapshot_NNNNN.tipsy at t = 0.02, 0.0625," in r.stdout
    both = cli("run", "--snapshot-every", 1, "--snapshot-times", 0.5, "--out", tmp_path / "x", check=False)
    assert both.returncode == 2 and "give either --snapshot-every or --snapshot-times" in both.stderr
    none = cli("run", "--snapshot-times", tmp_path / "missing.txt", "--out", tmp_path / "x", check=False)
    assert none.returncode == 2 and "no file" in none.stderr and "missing.txt" in none.stderr


def test_a_files_softening_is_echoed_as_the_file_holds_it(cli, backend, tmp_path):
    cli("run", "-n", 1000, "--backend", backend, "--t-end", 1 / 64, "--snapshot-every", 0, "--quiet", "--out",
        tmp_path / "a")
    r = cli("run", "--in", tmp_path / "a" / "snapshot_00000.hdf5", "--backend", backend, "--t-end", 1 / 64, "--out",
            tmp_path / "b")
    assert "softening eps = 0.05 (the particles' own" in r.stdout and ", eps 0.05, " in r.stdout
    assert "0.0500000007" not in r.stdout


def test_a_stopped_run_reports_the_energy_of_the_state_it_stopped_in(banyan_exe, backend, tmp_path):
    # Its log's last line is of t = 0 (--log-every 1000): the summary gave "dE/E 0 at t = 0" for any stop.
    out = tmp_path / "run"
    p = subprocess.Popen([banyan_exe, "run", "-n", "20000", "--backend", backend, "--t-end", "2", "--log-every",
                          "1000", "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = False
    for line in p.stdout:  # line by line as printed: stdout is line-buffered into a pipe too
        if line.startswith("first step:"):
            first = True
            p.send_signal(signal.SIGINT)
            break
    rest, err = p.communicate(timeout=600)
    assert first, "no line of the first step before the run ended"
    assert p.returncode == 130, err
    stopped = re.search(r"^stopped by SIGINT at step (\d+) \(t = ([0-9.e+-]+)\)", rest, re.M)
    energy = re.search(r"^energy: dE/E ([0-9.e+-]+) at t = ([0-9.e+-]+),", rest, re.M)
    assert stopped and energy, rest
    assert int(stopped.group(1)) >= 1 and energy.group(2) == stopped.group(2)
    assert float(energy.group(1)) != 0


def test_accuracy_sizes_its_defaults_to_the_device_and_says_what_it_is_doing(cli, backend):
    gpu = next(d["gpu"] for d in banyan.devices() if d["backend"] == backend and d["index"] == 0)
    r = cli("accuracy", "--backend", backend, "--device", 0, "--theta", 0.75, "--reps", 0)
    sizes = [int(line.split()[0]) for line in r.stdout.splitlines() if re.match(r"^\s+\d+\s+paper", line)]
    notes = re.findall(r"\(N = (\d+): the direct reference on (\d+) targets \.\.\. [0-9.]+ s\)", r.stdout)
    if gpu:
        assert sizes == [32768, 131072, 1048576] and {k for _, k in notes} == {"16384"}
    else:
        assert sizes == [16384, 65536] and {k for _, k in notes} == {"2048"}
    assert [int(n) for n, _ in notes] == sizes


def test_bench_galaxy_prints_into_a_file_as_it_goes(banyan_exe, backend, tmp_path):
    # Its output was buffered when it went to a file: nothing there for minutes. Here its header is in the file while
    # the galaxy is still being made (seconds), and on a CPU the defaults are a CPU's.
    gpu = next(d["gpu"] for d in banyan.devices() if d["backend"] == backend and d["index"] == 0)
    log = tmp_path / "galaxy.txt"
    with open(log, "w") as f:
        p = subprocess.Popen([banyan_exe, "bench", "galaxy", "--backend", backend, "--device", "0", "--rotations",
                              "0.002"], stdout=f, stderr=subprocess.STDOUT)
        try:
            while p.poll() is None and "galaxy mw: N " not in log.read_text():
                time.sleep(0.02)
            assert p.poll() is None, "the header reached the file only when the program ended"
        finally:
            p.wait(timeout=600)
    text = log.read_text()
    assert p.returncode == 0, text
    assert f"galaxy mw: N {262144 if gpu else 16384}," in text
    assert "first step:" in text and "wall " in text
