#!/usr/bin/env bash
# bench/start/start_time.sh — how fast paralab starts: wall time and peak resident memory of
# short commands (median of RUNS; memory from GNU time, /usr/bin/time of Debian's `time`), and
# with --preload-cuda the same binary beside itself with the CUDA runtime, cuBLASLt and NCCL
# preloaded (what every command paid when the CUDA backend was linked in), alternated.
# Goal (issue 69): `paralab simulate scenarios/quickstart.toml` under 30 ms and 60 MB.
# Results: bench/results/start_time.md.
#
#   bench/start/start_time.sh [--build DIR] [--runs N] [--preload-cuda]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build runs=10 preload=""
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --preload-cuda) preload=1; shift ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "start_time.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
paralab=$build/apps/paralab
[ -x "$paralab" ] || { echo "start_time.sh: no $paralab (build first)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "start_time.sh: needs GNU time (apt-get install time)" >&2; exit 2; }
libs=""
if [ -n "$preload" ]; then
  cuda=${CUDA_HOME:-/usr/local/cuda}
  for l in libcudart.so.13 libcublasLt.so.13 libnccl.so.2; do
    f=$(ls "$cuda"/lib*/"$l" 2>/dev/null | head -1)
    [ -n "$f" ] || { echo "start_time.sh: no $l under $cuda" >&2; exit 2; }
    libs="$libs${libs:+:}$f"
  done
fi
echo "paralab $(git -C "$root" rev-parse --short HEAD); $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$root" "$runs" "$paralab" "$libs" <<'PY'
import os, statistics, subprocess, sys, tempfile, time
root, runs, paralab, libs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
variants = [("this", {})] + ([("CUDA preloaded", {"LD_PRELOAD": libs})] if libs else [])
q = root + "/scenarios/quickstart.toml"
commands = [["--help"], ["inspect", q], ["simulate", q], ["simulate", q, "--json"],
            ["plan", root + "/tests/apps/data/plan_tiny.toml", "--threads", "1"]]
rss = tempfile.NamedTemporaryFile(delete=False).name
def once(argv, env):
    # GNU time's own start is in the wall figure (about 1 ms); its %M is the child's peak RSS.
    e = dict(os.environ, **env)
    t0 = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss] + argv, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env=e)
    wall = time.perf_counter() - t0
    if r.returncode != 0: sys.exit("failed: " + " ".join(argv))
    return wall * 1e3, int(open(rss).read().split()[-1]) / 1024.0  # ms, MiB
print("| command | " + " | ".join("%s: wall ms | peak MiB" % n for n, _ in variants) + " |")
print("|---" * (1 + 2 * len(variants)) + "|")
for c in commands:
    samples = [[] for _ in variants]
    for _ in range(runs):
        for i, (_, env) in enumerate(variants):  # alternated: both see the same moments of the machine
            samples[i].append(once([paralab] + c, env))
    cells = []
    for s in samples:
        cells += ["%.1f" % statistics.median(w for w, _ in s), "%.1f" % statistics.median(m for _, m in s)]
    print("| paralab %s | %s |" % (" ".join(os.path.relpath(x, root) if x.startswith(root) else x for x in c), " | ".join(cells)))
PY
