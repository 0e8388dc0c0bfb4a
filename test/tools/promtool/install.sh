#!/usr/bin/env bash
# Builds promtool into ./bin from the Go module proxy, at the version pinned
# in this directory's go.mod (Prometheus 3.15.0, module v0.315.0). make
# monitoring-check uses it on deploy/monitoring/rules.yaml and the endpoints
# smoke scenario on a live /metrics. Like test/tools/install.sh, it rebuilds
# only when what promtool is built from changes: bin/.promtool.stamp holds a
# hash of this module's go.mod and go.sum, the Go toolchain, the link flags
# and the build tags.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
bin="$root/bin"
mkdir -p "$bin"
cd "$here"

version=3.15.0
pv=github.com/prometheus/common/version
ldflags="-s -w -X $pv.Version=$version -X $pv.Branch=HEAD -X $pv.Revision=v0.315.0"
ldflags+=" -X $pv.BuildUser=stencil -X $pv.BuildDate=19700101-00:00:00"
# Without the service-discovery plugins (cloud SDKs) that only promtool check
# config and check service-discovery use: this halves the build.
tags=remove_all_sd

stamp=$( { cat go.mod go.sum; go env GOVERSION; echo "$ldflags $tags"; } | sha256sum | cut -c1-16)
if [ -x "$bin/promtool" ] && [ "$(cat "$bin/.promtool.stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "tools: promtool up to date in $bin ($version)"
  exit 0
fi

echo "tools: building promtool $version into $bin (cold: about 8 minutes on 2 cores, module downloads included)"
start=$(date +%s)
go build -tags "$tags" -ldflags "$ldflags" -o "$bin/promtool" github.com/prometheus/prometheus/cmd/promtool
echo "$stamp" > "$bin/.promtool.stamp"
echo "tools: built promtool in $(( $(date +%s) - start ))s"
