#!/bin/bash
# plan_sweep.sh PARALAB SOURCE_DIR [MPIRUN...]: `paralab plan` of a sweep file prints one table
# per entry; with MPIRUN, `MPIRUN -np 2 paralab plan` prints exactly what one process prints
# (table and --json, byte for byte), and a bad sweep file is refused naming the key.
set -u
paralab=$1 src=$2
shift 2
sweep=$src/tests/apps/data/plan_sweep.toml
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$paralab" plan "$sweep" --threads 1 >"$work/one.txt" 2>"$work/one.err" || { cat "$work/one.err"; fail "plan of the sweep"; }
grep -q "^== tiny, 2 nodes ==" "$work/one.txt" || fail "no table for the first entry"
grep -q "^== tiny, 4 nodes ==" "$work/one.txt" || fail "no table for the second entry"
[ "$(grep -c '^rank  layout' "$work/one.txt")" = 2 ] || fail "expected two ranked tables"
"$paralab" plan "$sweep" --threads 1 --json >"$work/one.json" 2>/dev/null || fail "plan --json of the sweep"
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert [e['label'] for e in j['sweep']] == ['tiny, 2 nodes', 'tiny, 4 nodes']" \
  "$work/one.json" || fail "--json of a sweep: a 'sweep' array of labelled plans"

printf '[[sweep]]\nscenario = "%s"\ncolour = "red"\n' "$src/tests/apps/data/plan_tiny.toml" >"$work/bad.toml"
if "$paralab" plan "$work/bad.toml" >/dev/null 2>"$work/bad.err"; then fail "a sweep with an unknown key was accepted"; fi
grep -q "sweep.colour" "$work/bad.err" || { cat "$work/bad.err"; fail "the error does not name sweep.colour"; }

if [ $# -gt 0 ]; then
  "$@" -np 2 "$paralab" plan "$sweep" --threads 1 >"$work/two.txt" 2>"$work/two.err" || { cat "$work/two.err"; fail "mpirun -np 2 plan"; }
  cmp "$work/one.txt" "$work/two.txt" || { diff "$work/one.txt" "$work/two.txt" | head -20; fail "2 ranks print other than 1 process"; }
  "$@" -np 2 "$paralab" plan "$sweep" --threads 1 --json >"$work/two.json" 2>/dev/null || fail "mpirun -np 2 plan --json"
  cmp "$work/one.json" "$work/two.json" || fail "2 ranks' --json differs from 1 process's"
  echo "ok: 2 ranks print what 1 process prints ($(wc -c <"$work/one.txt") and $(wc -c <"$work/one.json") bytes)"
fi
echo "ok: plan of a sweep"
