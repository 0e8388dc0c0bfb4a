#!/usr/bin/env bash
# rbac-check.sh shows that deploy/clusterrole.yaml holds no rule stencil can
# do without: for each rule in turn it writes the ClusterRole without that
# rule and runs the least-privilege smoke scenario with it, which must fail.
# Prints one line per rule and fails if any removal went unnoticed. Needs the
# plane (make rbac-check provides it) and bin/stencil.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
role="$root/deploy/clusterrole.yaml"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Split the ClusterRole into its header and its rules ("- apiGroups:" each).
awk -v dir="$work" '
  /^rules:/ { print > (dir "/head"); inrules = 1; next }
  !inrules { print > (dir "/head"); next }
  /^- / { n++ }
  { print > (dir "/rule." n) }
' "$role"
rules=("$work"/rule.*)
echo "rbac-check: ${#rules[@]} rules in $role"

unnoticed=0
for r in "${rules[@]}"; do
  what=$(awk '/^  - / { printf "%s%s", sep, $2; sep = " " } /^[a-z]/ { sep = " | " }' "$r" | sed 's/^ | //')
  reduced="$work/without.yaml"
  { cat "$work/head"; for o in "${rules[@]}"; do [ "$o" = "$r" ] || cat "$o"; done; } >"$reduced"
  log="$work/run.log"
  if STENCIL_SMOKE_CLUSTERROLE="$reduced" "$root/test/cluster/smoke.sh" least-privilege >"$log" 2>&1; then
    echo "rbac-check: NOT NEEDED?  without [$what] the scenario still passes"
    unnoticed=$((unnoticed + 1))
  else
    why=$(grep -m1 'FAIL:' "$log" | sed 's/^\[least-privilege\] FAIL: //' | cut -c1-220)
    echo "rbac-check: needed       without [$what]: $why"
  fi
done
echo "rbac-check: ${#rules[@]} rules, $unnoticed not needed by the scenario"
[ "$unnoticed" = 0 ]
