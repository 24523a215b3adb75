#!/usr/bin/env bash
# The conformance suite on a CPU OpenCL runtime whose sub-groups are 64 wide, the width of an AMD wavefront (CDNA,
# RDNA in wave64): Intel's CPU runtime for OpenCL from PyPI (scripts/fetch-intel-opencl), made to vectorise every
# kernel 64 ways (CL_CONFIG_CPU_VECTORIZER_MODE=64), so that 64 work-items run as one sub-group in lockstep. A probe
# kernel first shows that sub-groups are 64 wide, then the suite runs at sizes up to 2^16: its parts of kernels and
# phases, not the simulations (simulation, block_steps, galaxy: 500 of the suite's 970 s on this runtime, on a 2-core
# machine), which launch the same kernels step after step. Every kernel still runs here, its results checked
# against the CPU: the race-check part launches each one (the Oclgrind check shows that it does).
#
# usage: subgroup64_check.sh BANYAN_TESTS PROBE
# Exit 77 (CTest: skipped) when the runtime has not been fetched.
set -uo pipefail
tests=$1 probe=$2
dir="${XDG_CACHE_HOME:-$HOME/.cache}/banyan/intel-opencl-2026.2.0"
if [ ! -f "$dir/icd/intel-cpu.icd" ]; then
  echo "SKIPPED: Intel's CPU OpenCL runtime is not here (scripts/fetch-intel-opencl fetches it; the test command runs it)"
  exit 77
fi
export OCL_ICD_VENDORS="$dir/icd" LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CL_CONFIG_CPU_VECTORIZER_MODE=64 BANYAN_TEST_MAX_LOG2=${BANYAN_TEST_MAX_LOG2:-16}
probe_out=$("$probe")
probe_rc=$?
echo "$probe_out"
if [ $probe_rc -ne 0 ] || ! grep -q '^Intel(R) OpenCL: sub-group size 64$' <<<"$probe_out"; then
  echo "FAILED: this is not Intel's runtime with 64-wide sub-groups"
  exit 1
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$tests" --backend opencl --source-file-exclude='*/test_simulation.cpp,*/test_block_steps.cpp,*/test_galaxy.cpp' \
  >"$out" 2>&1
rc=$?
if ! grep -q '^conformance on opencl device 0: ' "$out"; then
  echo "FAILED: the suite did not run on the runtime's device"
  cat "$out"
  exit 1
fi
if [ $rc -ne 0 ]; then
  cat "$out"
  exit $rc
fi
grep -E '^conformance on|^\[doctest\] (test cases|assertions|Status)' "$out"
