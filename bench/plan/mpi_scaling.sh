#!/usr/bin/env bash
# bench/plan/mpi_scaling.sh — `paralab plan` of a sweep on 2 MPI ranks of 1 thread each against
# 1 process of 1 thread, alternated REPS times side by side (the VM's speed drifts: a ratio of
# neighbours, not two separate means). Prints each pair's wall seconds, the median ratio and
# whether the two printed the same bytes (bench/results/plan_speed.md, "Sweeps on MPI").
#
#   bench/plan/mpi_scaling.sh [--build DIR] [--reps N] [SWEEP.toml]   (default: bench/plan/sweep-gpt3.toml, 3)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build reps=3 sweep=$root/bench/plan/sweep-gpt3.toml
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) sweep=$1; shift ;;
  esac
done
paralab=$build/apps/paralab
[ -x "$paralab" ] || { echo "mpi_scaling.sh: no $paralab (build first)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
now() { date +%s.%N; }
echo "sweep $sweep; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), paralab $(git -C "$root" rev-parse --short HEAD)"
ratios=()
for i in $(seq 1 "$reps"); do
  t0=$(now); "$paralab" plan "$sweep" --threads 1 >"$out/one.txt" 2>/dev/null; t1=$(now)
  mpirun --oversubscribe -np 2 "$paralab" plan "$sweep" --threads 1 >"$out/two.txt" 2>/dev/null; t2=$(now)
  one=$(awk "BEGIN {print $t1 - $t0}") two=$(awk "BEGIN {print $t2 - $t1}")
  same=$(cmp -s "$out/one.txt" "$out/two.txt" && echo same || echo DIFFERENT)
  ratio=$(awk "BEGIN {print $two / $one}")
  ratios+=("$ratio")
  printf '| %d | %.1f | %.1f | %.3f | %s |\n' "$i" "$one" "$two" "$ratio" "$same"
done
printf '%s\n' "${ratios[@]}" | sort -g | awk '{a[NR] = $1} END {printf "median ratio (2 ranks / 1 process): %.3f; goal <= 0.6 (1.2x of half)\n", a[int((NR + 1) / 2)]}'
