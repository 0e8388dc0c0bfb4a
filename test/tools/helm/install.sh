#!/usr/bin/env bash
# Builds Helm's CLI, helm.sh/helm/v4 v4.3.1, into ./bin/helm from the Go
# module proxy. Chart mode's tests compare stencil's rendering of unmodified
# charts with what the real `helm template` prints, and
# templates/chart/testdata/regen.sh uses this binary to write that expected
# output. It is built with go install pkg@version, outside any module of
# ours, so that Helm's dependency versions never move stencil's or
# test/tools's go.mod.
# The build is skipped when bin/helm already reports v4.3.1.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
bin="$root/bin"
mkdir -p "$bin"

version=v4.3.1

# go install ...@version leaves Helm's version variable at its source default
# ("v4.3"); Helm's Makefile sets it with -X when building a tag, and so do we,
# so that `helm version` names the patch release. metadata stays empty, as for
# a tagged release build. The module zip carries no git commit, so gitCommit
# stays empty. The Kubernetes version `helm template` assumes
# (.Capabilities.KubeVersion) is not a link flag: Helm reads it from the
# k8s.io/client-go version in the binary's build info, which go install keeps.
hv=helm.sh/helm/v4/internal/version
ldflags="-s -w -X $hv.version=$version -X $hv.metadata= -X $hv.gitTreeState=clean"

if [ -x "$bin/helm" ] && "$bin/helm" version --template '{{.Version}}' 2>/dev/null | grep -qx "$version"; then
  echo "tools: helm up to date in $bin ($version)"
  exit 0
fi

echo "tools: building helm $version into $bin (cold: about 2 minutes on 2 cores, module downloads included)"
start=$(date +%s)
# Outside the repository, so that go install reads no go.mod or go.work of
# ours; CGO_ENABLED=0 and -trimpath as Helm's release builds.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
GOBIN="$bin" CGO_ENABLED=0 GOWORK=off go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v4/cmd/helm@$version"
"$bin/helm" version --template '{{.Version}}' | grep -qx "$version" || {
  echo "tools: $bin/helm does not report $version" >&2
  exit 1
}
echo "tools: built helm in $(( $(date +%s) - start ))s"
