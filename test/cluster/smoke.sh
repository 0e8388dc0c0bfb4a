#!/usr/bin/env bash
# smoke.sh [SCENARIO...] runs kubectl smoke scenarios, test/smoke/*.sh except
# lib.sh, against the cluster in KUBECONFIG (make smoke provides one). A
# SCENARIO is a name such as "plane"; without any, every scenario runs. Each
# runs in its own bash process, at most STENCIL_SMOKE_TIMEOUT seconds
# (default 300), and gets a PASS or FAIL line; the summary ends the output.
# Exits non-zero if any scenario failed.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
smoke="$root/test/smoke"
limit=${STENCIL_SMOKE_TIMEOUT:-300}

: "${KUBECONFIG:?KUBECONFIG must name the cluster to test; use make smoke}"

scenarios=()
if [ $# -gt 0 ]; then
  for name in "$@"; do
    name=${name%.sh}
    f="$smoke/${name##*/}.sh"
    if [ ! -f "$f" ] || [ "${name##*/}" = lib ]; then echo "smoke: no scenario $f" >&2; exit 2; fi
    scenarios+=("$f")
  done
else
  for f in "$smoke"/*.sh; do
    [ "$(basename "$f")" = lib.sh ] || scenarios+=("$f")
  done
fi
[ ${#scenarios[@]} -gt 0 ] || { echo "smoke: no scenarios in $smoke" >&2; exit 1; }

passed=() failed=()
for f in "${scenarios[@]}"; do
  name=$(basename "$f" .sh)
  echo "=== RUN   $name"
  start=$SECONDS
  if timeout --kill-after=10 "$limit" bash "$f"; then
    echo "--- PASS  $name ($((SECONDS - start))s)"
    passed+=("$name")
  else
    rc=$?
    [ "$rc" = 124 ] && echo "smoke: $name did not finish within ${limit}s" >&2
    echo "--- FAIL  $name ($((SECONDS - start))s)"
    failed+=("$name")
  fi
done

echo "smoke: ${#passed[@]} passed, ${#failed[@]} failed${failed:+ (${failed[*]})}"
[ ${#failed[@]} -eq 0 ]
