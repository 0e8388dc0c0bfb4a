#!/usr/bin/env bash
# faults.sh [SCENARIO...] runs the fault scenarios, test/faults/*.sh except
# lib.sh, against the plane in KUBECONFIG (make faults provides one and
# builds bin/countproxy and bin/faultcheck). A SCENARIO is a name such as
# "apiserver-kill"; without any, every scenario runs, one at a time: some
# stop the plane's API server or etcd. Each runs in its own bash process, at
# most STENCIL_FAULTS_TIMEOUT seconds (default 420), and gets one PASS or
# FAIL line with its figures; the summary and the total time end the output.
# Exits non-zero if any scenario failed.
set -euo pipefail
# shellcheck source=test/cluster/env.sh
source "$(dirname "$0")/env.sh"
# shellcheck source=test/cluster/components.sh
source "$root/test/cluster/components.sh"
faults="$root/test/faults"
limit=${STENCIL_FAULTS_TIMEOUT:-420}

: "${KUBECONFIG:?KUBECONFIG must name the cluster to test; use make faults}"

scenarios=()
if [ $# -gt 0 ]; then
  for name in "$@"; do
    name=${name%.sh}
    f="$faults/${name##*/}.sh"
    if [ ! -f "$f" ] || [ "${name##*/}" = lib ]; then echo "faults: no scenario $f" >&2; exit 2; fi
    scenarios+=("$f")
  done
else
  for f in "$faults"/*.sh; do
    [ "$(basename "$f")" = lib.sh ] || scenarios+=("$f")
  done
fi
[ ${#scenarios[@]} -gt 0 ] || { echo "faults: no scenarios in $faults" >&2; exit 1; }

figures=$(mktemp)
trap 'rm -f "$figures"' EXIT
passed=() failed=() lines=()
total=$SECONDS
for f in "${scenarios[@]}"; do
  name=$(basename "$f" .sh)
  echo "=== RUN   $name"
  start=$SECONDS
  : >"$figures"
  if STENCIL_FAULTS_FIGURES="$figures" timeout --kill-after=10 "$limit" bash "$f"; then
    result=PASS
    passed+=("$name")
  else
    rc=$?
    [ "$rc" = 124 ] && echo "faults: $name did not finish within ${limit}s" >&2
    result=FAIL
    failed+=("$name")
  fi
  # A scenario that failed half-way may leave a component stopped (or
  # still shutting down): start it again, so that the next scenario finds
  # the whole plane.
  deadline=$((SECONDS + 180))
  until plane_up; do
    for c in "${components[@]}"; do
      if ! pid=$(pid_of "$c"); then
        echo "faults: $c is not running after $name; starting it again" >&2
        start_component "$c"
      else
        kill -CONT "$pid" 2>/dev/null || true
      fi
    done
    ((SECONDS < deadline)) || { echo "faults: the plane is not up after $name" >&2; exit 1; }
    sleep 1
  done
  line=$(printf -- '--- %s  %s (%ss): %s' "$result" "$name" "$((SECONDS - start))" "$(cat "$figures")")
  echo "$line"
  lines+=("$line")
done

echo "faults: summary"
printf '%s\n' "${lines[@]}"
echo "faults: ${#passed[@]} passed, ${#failed[@]} failed${failed:+ (${failed[*]})} in $((SECONDS - total))s"
[ ${#failed[@]} -eq 0 ]
