#!/usr/bin/env bash
# A checkpoint set survives a kill of any one rank at any point of its writing: `banyan run` on 2, 3 and 4 ranks,
# one rank killed (SIGKILL, through the test hook BANYAN_TEST_CRASH_AT=RANK:POINT:STEP of core/simulation/
# run_checkpoints.cpp) at each point of the checkpoint write of a step, the job then ended by mpiexec; continued as a
# user would (`--restart` when the folder holds checkpoint.bin, else the same run afresh), the folder must end up as
# the straight run's: the same files, byte for byte (snapshots, energy log, every checkpoint file).
#
# Usage: checkpoint_kills.sh BANYAN BACKEND MPIEXEC NUMPROC_FLAG [MPIEXEC_FLAGS...]
# Exits 77 (skipped) when BACKEND has no device here.
set -uo pipefail
exe=$1 backend=$2 mpiexec=$3 np_flag=$4
shift 4
flags=("$@")

if ! "$exe" devices | grep -Eq "^$backend +[0-9]"; then
  echo "no $backend device here: skipped"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Open MPI ends the other ranks of a job that lost one with SIGTERM, and with SIGKILL only a second later: at once.
export OMPI_MCA_odls_base_sigkill_timeout=0

# 8 steps; checkpoints at steps 0, 2, 4, 6 and 8.
args=(--backend "$backend" -n 1024 --seed 5 --dt 1/32 --t-end 1/4 --snapshot-every 1/8 --checkpoint-every 1/16
      --format tipsy --quiet)
failures=0 cases=0

banyan() { # P, then banyan's arguments
  local P=$1
  shift
  "$mpiexec" "$np_flag" "$P" "${flags[@]}" "$exe" "$@"
}

fail() {
  echo "FAILED: $*"
  failures=$((failures + 1))
}

# Rank RANK of a run on P ranks killed at POINT of the checkpoint write of step STEP, then continued.
kill_and_continue() {
  local P=$1 rank=$2 point=$3 step=$4
  local d="$work/on$P.rank$rank.$point.step$step" what="$P ranks, rank $rank killed at '$point' of step $step"
  cases=$((cases + 1))
  if BANYAN_TEST_CRASH_AT="$rank:$point:$step" banyan "$P" run "${args[@]}" --out "$d" >"$d.log" 2>&1; then
    fail "$what: the run was not killed"
    return
  fi
  if [ -e "$d/checkpoint.bin" ]; then
    banyan "$P" run --restart "$d" --quiet >>"$d.log" 2>&1 || { fail "$what: the restart failed"; cat "$d.log"; return; }
  else
    banyan "$P" run "${args[@]}" --out "$d" >>"$d.log" 2>&1 || { fail "$what: the new run failed"; cat "$d.log"; return; }
  fi
  local straight="$work/on$P" f
  if [ "$(ls "$straight")" != "$(ls "$d")" ]; then
    fail "$what: other files than the straight run's:" $(ls "$d")
    return
  fi
  for f in $(ls "$straight"); do
    cmp -s "$straight/$f" "$d/$f" || fail "$what: $f differs from the straight run's"
  done
}

# What each rank does in a checkpoint write (Run::write_checkpoint): every rank writes its file (start: nothing yet,
# torn: half of its temporary file, written: its file whole), then all meet (all_written); rank 0 then renames its
# file into place (committed) and removes the previous set (cleaned).
first_rank_points="start torn written all_written committed cleaned"
other_rank_points="start torn written all_written"

for P in 2 3 4; do
  banyan "$P" run "${args[@]}" --out "$work/on$P" >"$work/on$P.log" 2>&1 || { cat "$work/on$P.log"; exit 1; }
  for ((rank = 0; rank < P; ++rank)); do
    points=$other_rank_points
    [ "$rank" = 0 ] && points=$first_rank_points
    for point in $points; do
      kill_and_continue "$P" "$rank" "$point" 4
    done
  done
done
# The first checkpoint (before it none: the run starts afresh, or continues from step 0) and the last (the run's
# end: continued from step 6, or with no step left to take).
for point in start all_written committed; do
  kill_and_continue 2 0 "$point" 0
  kill_and_continue 2 0 "$point" 8
done
kill_and_continue 2 1 written 0
kill_and_continue 2 1 written 8

echo "$cases kills, $failures failed"
[ "$failures" = 0 ]
