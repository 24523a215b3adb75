#!/usr/bin/env bash
# The OpenCL kernels under Oclgrind (Debian package oclgrind), the OpenCL counterpart of compute-sanitizer: the
# race-check part of the suite (tests/kernels/test_race_check.cpp: every kernel once, at small sizes, results checked
# against the CPU) runs on Oclgrind's simulated device with its data-race, barrier-divergence, out-of-bounds,
# API-misuse and uninitialised-value checks, the last at AMD's 64 KiB of local memory. Any report fails the check,
# and so does a kernel of the program (PROGRAM_CL) that did not run.
#
# usage: oclgrind_check.sh BANYAN_TESTS SHIM PROGRAM_CL
#   BANYAN_TESTS  the conformance binary; SHIM  tests/tools/oclgrind_shim.c built as a shared object (it works around
#   three faults of Oclgrind 21.10's shadow memory, see there); PROGRAM_CL  the OpenCL program as built (generated/).
# Exit 77 (CTest: skipped) when Oclgrind is not installed.
#
# Two passes. The walk (test cases named "race check: walk ...") runs without the uninitialised-value check: Oclgrind
# 21.10's Uninitialized plugin crashes (SIGSEGV in Uninitialized::instructionExecuted) while interpreting walkForces,
# with or without banyan's shim; walkForces, walkPrepare and walkScatter are therefore checked for races, barriers
# and bounds but not for uninitialised reads. So are directListedPartial and directListedSum (test case "race check:
# direct sums on listed particles"), on which the plugin stops with a fatal error (Uninitialized.cpp:1805) and
# leaves the results unwritten. Every other kernel gets every check.
#
# One kind of report is not a finding and is dropped, by its exact form: "Uninitialized value written" whose
# instruction is `store <N x T> undef` (or `poison`, as the compiler spells it for a vector whose every element is
# set anew, e.g. integrateKickDrift's velocity with |a| in w). Oclgrind's compiler lowers a vector built from
# scalars and stored to global memory, e.g. out[i] = (float4)(a, b, c, d), into a store of undef followed by one
# store per element (see it with OCLGRIND_DUMP_SPIR=1); the plugin checks the first. The element stores that follow
# are checked like any other, so a truly uninitialised component is still reported.
#
# MALLOC_PERTURB_ fills the heap's fresh blocks with a nonzero byte: a shadow that Oclgrind allocates and never sets
# (the faults the shim works around) then reads as uninitialised on every machine, rather than as whatever the heap
# held, so a fault of that kind fails here as it would in CI, not only on some machines.
set -uo pipefail

if [ $# -ne 3 ]; then
  echo "usage: $0 BANYAN_TESTS SHIM PROGRAM_CL" >&2
  exit 2
fi
tests=$1 shim=$2 program=$3

runtime=""
for d in /usr/lib/oclgrind /usr/lib/x86_64-linux-gnu/oclgrind /usr/local/lib/oclgrind; do
  if [ -f "$d/liboclgrind-rt.so" ]; then runtime="$d/liboclgrind-rt.so"; break; fi
done
if [ -z "$runtime" ]; then
  echo "SKIPPED: Oclgrind is not installed (Debian: apt-get install oclgrind; scripts/ensure-deps --test does it)"
  exit 77
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
kernels_log="$work/kernels.log"
failed=0

# pass NAME DOCTEST_FILTER OCLGRIND_CHECKS...: runs the race-check cases the filter selects under Oclgrind.
pass() {
  local name=$1 filter=$2
  shift 2
  local log="$work/$name.oclgrind.log" out="$work/$name.out"
  echo "== $name: $filter"
  env "$@" MALLOC_PERTURB_=165 OCLGRIND_CHECK_API=1 OCLGRIND_LOCAL_MEM_SIZE=65536 OCLGRIND_MAX_ERRORS=1000000 \
    OCLGRIND_LOG="$log" BANYAN_KERNEL_LOG="$kernels_log" LD_PRELOAD="$shim $runtime" \
    "$tests" --backend opencl --source-file='*/test_race_check.cpp' "$filter" --duration=true >"$out" 2>&1
  local rc=$?
  grep -E '^conformance on|^[0-9.]+ s: |^\[doctest\] (test cases|Status)' "$out"
  if ! grep -q '^conformance on opencl device 0: Oclgrind' "$out"; then
    echo "FAILED: the tests did not run on Oclgrind's device (is $runtime loadable?)"
    cat "$out"
    failed=1
    return
  fi
  if [ $rc -ne 0 ]; then
    echo "FAILED: the race-check tests failed (exit $rc) under Oclgrind:"
    cat "$out"
    failed=1
  fi
  touch "$log"
  # One report per paragraph; drop the vector-literal stores described above.
  awk 'BEGIN { RS = ""; ORS = "\n\n" }
       /Uninitialized value written to/ && /\n[ \t]*store <[0-9]+ x [a-z0-9]+> (undef|poison),/ { next }
       { print }' "$log" >"$work/$name.reports"
  local reports
  reports=$(grep -c '^[A-Z]' "$work/$name.reports" || true)
  if [ "$reports" -ne 0 ]; then
    echo "FAILED: Oclgrind reported $reports problem(s) in pass $name; the first:"
    head -n 80 "$work/$name.reports"
    failed=1
  else
    echo "no Oclgrind reports"
  fi
}

pass all-checks --test-case-exclude='race check: walk*,race check: direct sums on listed*' OCLGRIND_DATA_RACES=1 \
  OCLGRIND_UNINITIALIZED=1
pass walk --test-case='race check: walk*,race check: direct sums on listed*' OCLGRIND_DATA_RACES=1

# Every kernel of the program ran at least once.
all=$(tr '\n' ' ' <"$program" | grep -oE '__kernel[^{;]*void[[:space:]]+[A-Za-z_][A-Za-z0-9_]*[[:space:]]*\(' |
  sed -E 's/.*void[[:space:]]+([A-Za-z_][A-Za-z0-9_]*)[[:space:]]*\($/\1/' | sort -u)
ran=$(sort -u "$kernels_log" 2>/dev/null)
missing=$(comm -23 <(echo "$all") <(echo "$ran"))
if [ -z "$all" ]; then
  echo "FAILED: no kernels found in $program"
  failed=1
elif [ -n "$missing" ]; then
  echo "FAILED: kernels that did not run under Oclgrind: $(echo $missing)"
  failed=1
else
  echo "all $(echo "$all" | wc -l) kernels of the program ran under Oclgrind"
fi
exit $failed
