#!/usr/bin/env bash
# paralab test — an interrupted run: SIGNAL sent to a running `paralab execute` after DELAY_S
# must end it within 5 s with exit 128+signal and a message naming the signal, and leave
# neither the result file nor a temporary beside it.
#   interrupt.sh SIGNAL DELAY_S OUTFILE -- CMD...
set -u
sig=$1 delay=$2 out=$3
shift 4
rm -f "$out" "$out".tmp.*
"$@" > /dev/null 2> "$out.stderr" &
pid=$!
sleep "$delay"
if ! kill -0 "$pid" 2>/dev/null; then echo "FAIL: the run ended before the signal"; cat "$out.stderr"; exit 1; fi
kill -"$sig" "$pid"
for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid"; echo "FAIL: still running 5 s after SIG$sig"; exit 1; fi
wait "$pid"
rc=$?
num=$(kill -l "$sig")
[ "$rc" -eq $((128 + num)) ] || { echo "FAIL: exit code $rc, expected $((128 + num))"; cat "$out.stderr"; exit 1; }
grep -q "SIG$sig" "$out.stderr" || { echo "FAIL: no message naming SIG$sig"; cat "$out.stderr"; exit 1; }
if ls "$out" "$out".tmp.* >/dev/null 2>&1; then echo "FAIL: output left behind"; ls -la "$out"*; exit 1; fi
echo "ok: SIG$sig -> exit $rc, no output file"
rm -f "$out.stderr"
