#!/usr/bin/env bash
# paralab — seed corpora and a dictionary for the fuzz targets, made from the repository's own
# files at run time (nothing binary is checked in):
#   OUT/scenario/  every scenarios/*.toml; every preset as a runnable scenario; every scenario
#                  re-pointed at each topology through the harness's "#@topology" part
#   OUT/topology/  every topologies/*.toml
#   OUT/config.dict  section headers, keys and enum spellings taken from the loaders' sources
# plus the saved regression inputs of tests/hardening/regressions/.
#   bash fuzz/make_corpus.sh OUT
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:?usage: make_corpus.sh OUT}"
rm -rf "$out/scenario" "$out/topology"
mkdir -p "$out/scenario" "$out/topology"

for f in "$root"/scenarios/*.toml; do cp "$f" "$out/scenario/$(basename "$f")"; done
for f in "$root"/scenarios/presets/*.toml; do
  name=$(basename "$f" .toml)
  { echo "[model]"; echo "preset = \"$name\""; echo "[training]"; echo "global_batch_size = 8";
    echo "[cluster]"; echo "topology = \"dgx-a100\""; } > "$out/scenario/preset-$name.toml"
  cp "$f" "$out/scenario/preset-raw-$name.toml"
done
for s in "$root"/scenarios/*.toml; do
  for t in "$root"/topologies/*.toml; do
    seed="$out/scenario/$(basename "$s" .toml)+$(basename "$t" .toml).toml"
    sed -E 's/^topology *=.*/topology = "topo.toml"/' "$s" > "$seed"
    { echo "#@topology"; cat "$t"; } >> "$seed"
  done
done
for f in "$root"/topologies/*.toml; do cp "$f" "$out/topology/$(basename "$f")"; done
# A calibrated topology (schema 2: measured op times, corrections, executions).
cp "$root"/bench/results/gpu/2026-11-30-h200/cuda-np1-gpu-1.calibration.toml "$out/topology/calibrated-gpu-1.toml"
for f in "$root"/tests/hardening/regressions/*.scenario; do
  [ -e "$f" ] && cp "$f" "$out/scenario/regression-$(basename "$f")"
done
for f in "$root"/tests/hardening/regressions/*.topology; do
  [ -e "$f" ] && cp "$f" "$out/topology/regression-$(basename "$f")"
done

# Dictionary: "[section]", "key = ", enum words; from the schema definitions themselves.
{
  grep -ohE '"[a-z_]+\.[a-z_0-9]+"' "$root"/ir/scenario_loader.cpp "$root"/ir/topology_format.cpp |
    tr -d '"' | sort -u | while IFS=. read -r section key; do
      echo "\"[$section]\""
      echo "\"$key = \""
    done
  for a in gemm kernel correction execution; do echo "\"[[calibration.$a]]\""; done
  grep -ohE 'x\.[a-z_]+(<[A-Za-z]+>)?\("[a-z_]+"' "$root"/ir/topology_format.cpp | grep -oE '"[a-z_]+"$' | tr -d '"' |
    sort -u | while read -r key; do echo "\"$key = \""; done
  grep -ohE '\{"[a-z0-9_]+", [A-Za-z]+::' "$root"/ir/enum_names.cpp | grep -oE '"[a-z0-9_]+"' |
    sed -E 's/^"(.*)"$/"\\"\1\\""/'
  printf '%s\n' '"\x0a#@topology\x0a"' '"topology = \"topo.toml\""' '"preset = "' '"true"' '"false"' \
    '"1e308"' '"-1"' '"0"' '"9223372036854775807"' '"inf"' '"nan"' '"0x"' '"1_000"' '"\"\"\""'
} | sort -u | awk '{ printf "kw%d=%s\n", NR, $0 }' > "$out/config.dict"

echo "paralab fuzz corpus: $(ls "$out/scenario" | wc -l) scenario seeds, $(ls "$out/topology" | wc -l) topology seeds, $(wc -l < "$out/config.dict") dictionary entries in $out"
