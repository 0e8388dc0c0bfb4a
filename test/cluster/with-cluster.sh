#!/usr/bin/env bash
# with-cluster.sh CMD [ARG...] runs CMD against the local control plane with
# KUBECONFIG exported. If the plane is not up it is started first and stopped
# afterwards (also on failure or Ctrl-C); a plane that was already up is left
# running. Exits with CMD's status.
set -euo pipefail
# shellcheck source=test/cluster/env.sh
source "$(dirname "$0")/env.sh"

[ $# -gt 0 ] || { echo "usage: $0 CMD [ARG...]" >&2; exit 2; }

started=0
stop_if_started() {
  if [ "$started" = 1 ]; then "$root/test/cluster/down.sh" || true; fi
}
trap stop_if_started EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ! plane_up; then
  started=1
  "$root/test/cluster/up.sh"
fi
export KUBECONFIG="$kubeconfig"
rc=0
"$@" || rc=$?
exit "$rc"
