"""A file-size limit (ulimit -f, RLIMIT_FSIZE) fails a write of `banyan run` as a full disk does: an error that names
the file and the limit, exit status 1, and no temporary file left (issue 45: the run died of SIGXFSZ without a word,
and an HDF5 snapshot's failed close then crashed the HDF5 library at exit)."""
import resource
import subprocess

import pytest

# Bytes: a snapshot or checkpoint of 30000 particles (about 1.7 MB) does not fit; the energy log and an OpenCL
# runtime's kernel cache (PoCL's largest file is under 0.5 MB) do.
LIMIT = 1 << 20


def limit_file_size():
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


@pytest.mark.parametrize("args, name", [
    (["--format", "hdf5"], "snapshot_00000.hdf5"),
    (["--format", "tipsy"], "snapshot_00000.tipsy"),
    (["--snapshot-every", "never"], "checkpoint.bin"),
])
def test_a_file_size_limit_is_reported_as_a_full_disk_is(banyan_exe, backend, tmp_path, args, name):
    out = tmp_path / "run"
    # subprocess restores SIGXFSZ's default action in the child (Python itself ignores it): as from a shell.
    r = subprocess.run([banyan_exe, "run", "-n", "30000", "--t-end", "1/64", "--backend", backend, "--quiet",
                        "--out", str(out), *args], capture_output=True, text=True, preexec_fn=limit_file_size)
    assert r.returncode == 1, f"exit status {r.returncode}:\n{r.stderr}"
    assert name in r.stderr and "File too large" in r.stderr and "ulimit -f" in r.stderr, r.stderr
    assert [p.name for p in out.iterdir() if ".tmp." in p.name] == []
    assert not (out / name).exists()
