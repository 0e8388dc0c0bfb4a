#!/usr/bin/env bash
# rbac-check.sh shows that deploy/base/clusterrole.yaml and deploy/base/role.yaml (the
# leader-election Lease Role) hold no rule stencil can do without: for each
# rule in turn it writes the role without that rule and runs the
# least-privilege smoke scenario with it, which must fail. The plane runs the
# OwnerReferencesPermissionEnforcement admission plugin, so the finalizers
# rules are needed too. Prints one line per rule and fails if any removal
# went unnoticed. Needs the plane (make rbac-check provides it) and
# bin/stencil.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

total=0
unnoticed=0
# check FILE VAR: VAR is the environment variable through which the
# least-privilege scenario takes a replacement for FILE.
check() {
  local role=$1 var=$2 dir
  dir="$work/$(basename "$1" .yaml)"
  mkdir -p "$dir"
  # Split the role into its header and its rules ("- apiGroups:" each).
  awk -v dir="$dir" '
    /^rules:/ { print > (dir "/head"); inrules = 1; next }
    !inrules { print > (dir "/head"); next }
    /^- / { n++ }
    { print > (dir "/rule." n) }
  ' "$role"
  local rules=("$dir"/rule.*) r o what reduced log why
  echo "rbac-check: ${#rules[@]} rules in $role"
  for r in "${rules[@]}"; do
    total=$((total + 1))
    what=$(awk '/^  - / { printf "%s%s", sep, $2; sep = " " } /^[a-z]/ { sep = " | " }' "$r" | sed 's/^ | //')
    reduced="$dir/without.yaml"
    { cat "$dir/head"; for o in "${rules[@]}"; do [ "$o" = "$r" ] || cat "$o"; done; } >"$reduced"
    # A role left with no rule at all still needs its "rules:" key.
    [ "${#rules[@]}" -gt 1 ] || sed -i 's/^rules:$/rules: []/' "$reduced"
    log="$dir/run.log"
    if env "$var=$reduced" "$root/test/cluster/smoke.sh" least-privilege >"$log" 2>&1; then
      echo "rbac-check: NOT NEEDED?  without [$what] the scenario still passes"
      unnoticed=$((unnoticed + 1))
    else
      why=$(grep -m1 'FAIL:' "$log" | sed 's/^\[least-privilege\] FAIL: //' | cut -c1-220)
      echo "rbac-check: needed       without [$what]: $why"
    fi
  done
}
check "$root/deploy/base/clusterrole.yaml" STENCIL_SMOKE_CLUSTERROLE
check "$root/deploy/base/role.yaml" STENCIL_SMOKE_ROLE
echo "rbac-check: $total rules, $unnoticed not needed by the scenario"
[ "$unnoticed" = 0 ]
