# Helpers for the kubectl smoke scenarios in test/smoke; source it first:
#
#   source "$(dirname "$0")/lib.sh"
#   use_namespace plane          # fresh namespace in $NS, deleted on exit
#   step "what is being checked"
#   kn apply -f - <<EOF ... EOF  # kubectl in $NS
#   wait_for 60 "the thing to happen" CMD...
#   ok "what was shown"
#
# A scenario is a plain bash script run by test/cluster/smoke.sh with
# KUBECONFIG set; it passes by exiting 0. Scenarios never sleep to wait for
# something: they use kubectl wait or wait_for, which poll with a deadline.
# STENCIL_SMOKE_KEEP=1 keeps the namespace of a failed scenario for a look.

set -euo pipefail

smoke_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
KUBECTL=${KUBECTL:-$smoke_root/bin/kubectl}
: "${KUBECONFIG:?KUBECONFIG must name the cluster to test; use make smoke}"
export KUBECONFIG
SCENARIO=$(basename "$0" .sh)
NS=""

# k runs kubectl; kn runs it in the scenario's namespace.
k() { "$KUBECTL" "$@"; }
kn() { "$KUBECTL" --namespace "$NS" "$@"; }

# step says what the scenario checks next; ok says that it held.
step() { echo "[$SCENARIO] check: $*"; }
ok() { echo "[$SCENARIO] ok: $*"; }

# fail prints why the scenario failed and exits non-zero.
fail() {
  echo "[$SCENARIO] FAIL: $*" >&2
  exit 1
}

# expect_eq WHAT WANT GOT fails unless GOT equals WANT.
expect_eq() {
  [ "$3" = "$2" ] || fail "$1: want '$2', got '$3'"
}

# wait_for SECONDS WHAT CMD [ARG...] runs CMD every quarter second until it
# succeeds, and fails the scenario with CMD's last output after SECONDS.
wait_for() {
  local limit=$1 what=$2 out
  shift 2
  local deadline=$((SECONDS + limit))
  while ! out=$("$@" 2>&1); do
    if ((SECONDS >= deadline)); then
      fail "timed out after ${limit}s waiting for $what; last output: $out"
    fi
    sleep 0.25
  done
}

# use_namespace NAME creates a fresh namespace smoke-NAME-<random> and sets NS.
# When the scenario exits the namespace is deleted (without waiting for it to
# go away); if the scenario failed, what was in it is printed first.
use_namespace() {
  NS="smoke-$1-$(head -c4 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  k create namespace "$NS" >/dev/null
  k label namespace "$NS" stencil.dev/smoke="$SCENARIO" >/dev/null
  trap _cleanup_namespace EXIT
  echo "[$SCENARIO] namespace $NS"
}

_cleanup_namespace() {
  local rc=$?
  [ -n "$NS" ] || return "$rc"
  if [ "$rc" != 0 ]; then
    echo "[$SCENARIO] objects in $NS at failure:" >&2
    kn get all,configmaps,events -o wide >&2 2>&1 || true
    if [ "${STENCIL_SMOKE_KEEP:-}" = 1 ]; then
      echo "[$SCENARIO] keeping namespace $NS (STENCIL_SMOKE_KEEP=1)" >&2
      return "$rc"
    fi
  fi
  k delete namespace "$NS" --wait=false >/dev/null 2>&1 || true
  return "$rc"
}
