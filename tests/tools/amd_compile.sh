#!/usr/bin/env bash
# amd_compile PROGRAM.cl: the evidence that banyan's OpenCL program builds for AMD GPUs and as portable SPIR-V.
#
# PROGRAM.cl is the program text exactly as the OpenCL backend builds it (generated/banyan_program.cl). For every
# AMD target below and every work-group size the backend builds with (-DBANYAN_WG=32..256, as
# OpenCLBackend::program() passes it), clang compiles it with libclc's builtins for amdhsa and links a complete
# code object (unresolved symbols fail the link). Every kernel must stay within 64 KiB of local memory (LDS) and
# require a work-group size (reqd_work_group_size) no larger than 256, the size AMD's compiler assumes otherwise.
# Then the program is translated to SPIR-V and validated with spirv-val.
# Exit 0: all pass; 1: a finding (printed); 77: a tool is missing (CTest reports skipped).
set -uo pipefail
program=${1:?usage: amd_compile.sh PROGRAM.cl}

# The targets, in one place: gfx90a (MI200, wave64), gfx942 (MI300, wave64), gfx1100 (RDNA3, wave32, and wave64).
targets=("gfx90a" "gfx942" "gfx1100" "gfx1100 -mwavefrontsize64")
work_groups=(32 64 128 256)
clc=/usr/lib/clc/amdgcn--amdhsa.bc

missing=()
for tool in clang-19 ld.lld-19 clang-15 llvm-spirv-15 spirv-val; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
[ -f "$clc" ] || missing+=("$clc (libclc-19)")
if [ ${#missing[@]} -gt 0 ]; then
  echo "SKIPPED: amd_compile needs ${missing[*]} (scripts/ensure-deps --test installs them)"
  exit 77
fi
[ -f "$program" ] || { echo "amd_compile: no program text at $program"; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

# Every kernel requires its work-group size, at most 256 (BANYAN_WG <= 256 by the backend; BANYAN_WALK_WG fixed).
while IFS= read -r line; do
  if [[ $line != *reqd_work_group_size* ]]; then
    echo "FINDING: a kernel without reqd_work_group_size: $line"
    fail=1
  fi
done < <(grep -E '^\s*(__kernel|kernel)\b' "$program")
walk_wg=$(grep -E '^#define BANYAN_WALK_WG ' "$program" | awk '{print $3}')
if [ -z "$walk_wg" ] || [ "$walk_wg" -gt 256 ]; then
  echo "FINDING: BANYAN_WALK_WG is '$walk_wg', not a work-group size of at most 256"
  fail=1
fi

for target in "${targets[@]}"; do
  for wg in "${work_groups[@]}"; do
    name="${target// /}-wg$wg"
    # shellcheck disable=SC2086 # the target's word splits into -mcpu and its option
    if ! clang-19 -x cl -cl-std=CL1.2 --target=amdgcn-unknown-amdhsa -mcpu=$target -nogpulib -O2 \
        -Xclang -mlink-builtin-bitcode -Xclang "$clc" -DBANYAN_WG="$wg" -Wl,--no-undefined \
        -Rpass-analysis=kernel-resource-usage -o "$work/$name.co" "$program" >"$work/$name.log" 2>&1; then
      echo "FINDING: $target, BANYAN_WG=$wg does not compile and link:"
      grep -vE 'remark:|Linking two modules of different target triples|Wlinker-warnings|warning generated' \
        "$work/$name.log" | head -20
      fail=1
      continue
    fi
    # The resource remarks name each kernel, then its LDS bytes per work-group.
    over=$(awk '{ for (i = 1; i < NF; ++i) { if ($i == "Name:") k = $(i + 1); if ($i == "[bytes/block]:") n = $(i + 1) } }
                /LDS Size/ && n + 0 > 65536 { print k ": " n " bytes" }' "$work/$name.log")
    kernels=$(grep -c 'Function Name:' "$work/$name.log")
    if [ -n "$over" ]; then
      echo "FINDING: $target, BANYAN_WG=$wg: more than 64 KiB of local memory: $over"
      fail=1
    fi
    echo "ok: $target BANYAN_WG=$wg: $kernels kernels linked into a code object, local memory within 64 KiB"
  done
done

for wg in "${work_groups[@]}"; do
  # SPIR-V through the Khronos translator (LLVM 15); -O0 because it cannot translate LLVM's 'freeze'.
  if clang-15 -x cl -cl-std=CL1.2 --target=spir64 -O0 -DBANYAN_WG="$wg" -emit-llvm -c -o "$work/spir.bc" "$program" \
      >"$work/spir.log" 2>&1 &&
    llvm-spirv-15 --spirv-max-version=1.2 "$work/spir.bc" -o "$work/spir.spv" >>"$work/spir.log" 2>&1 &&
    spirv-val --target-env opencl1.2 "$work/spir.spv" >>"$work/spir.log" 2>&1; then
    echo "ok: SPIR-V 1.2 of BANYAN_WG=$wg validates (spirv-val, OpenCL 1.2 environment)"
  else
    echo "FINDING: SPIR-V of BANYAN_WG=$wg:"
    head -20 "$work/spir.log"
    fail=1
  fi
done
exit $fail
