#!/usr/bin/env bash
# Builds the pinned control-plane binaries into ./bin from the Go module proxy:
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl (Kubernetes
# v1.36.3), etcd (3.6, from the same module graph) and kwok (v0.8.0), and
# copies kwok's "fast" Stage configs into bin/kwok-stages.
# The binaries are rebuilt only when what they are built from changes: the
# pinned versions (this module's go.mod and go.sum), the Go toolchain and the
# link flags. bin/.tools.stamp holds a hash of those.
# promtool has a module and a stamp of its own (promtool/install.sh); make
# tools builds both, while make run (through test/cluster/up.sh) builds only
# what the plane runs.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin="$root/bin"
mkdir -p "$bin"
cd "$here"

k8s_version=v1.36.3
tools=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok)

ver=k8s.io/component-base/version
cver=k8s.io/client-go/pkg/version
ldflags="-s -w"
for pkg in $ver $cver; do
  ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=36"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

# kwok exits with "no stages found" without Stage configs; its module ships
# them. These are the ones its kustomize/stage/fast bundle uses. The pod
# stages exist twice (fast/ and general/): general/pod-ready waits for a
# pod-create stage we do not install, so naming the directory matters.
stages=(
  node/fast/node-initialize.yaml
  node/heartbeat-with-lease/node-heartbeat-with-lease.yaml
  pod/fast/pod-ready.yaml
  pod/fast/pod-complete.yaml
  pod/fast/pod-delete.yaml
)

stamp=$( { cat go.mod go.sum; go env GOVERSION; echo "$ldflags ${tools[*]} ${stages[*]}"; } | sha256sum | cut -c1-16)

fresh=1
for t in "${tools[@]}"; do [ -x "$bin/$t" ] || fresh=0; done
for s in "${stages[@]}"; do [ -f "$bin/kwok-stages/$(basename "$s")" ] || fresh=0; done
if [ "$fresh" = 1 ] && [ "$(cat "$bin/.tools.stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "tools: up to date in $bin ($k8s_version)"
  exit 0
fi

echo "tools: building ${tools[*]} into $bin (cold: about 12 minutes on 2 cores, module downloads included)"
start=$(date +%s)
# One go build for all five shares the compilation of their common packages.
go build -ldflags "$ldflags" -o "$bin/" \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler \
  k8s.io/kubernetes/cmd/kubectl \
  sigs.k8s.io/kwok/cmd/kwok
go build -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3

kwokdir=$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
rm -rf "$bin/kwok-stages"
mkdir -p "$bin/kwok-stages"
for s in "${stages[@]}"; do
  f="$kwokdir/kustomize/stage/$s"
  [ -f "$f" ] || { echo "tools: kwok stage $f not found" >&2; exit 1; }
  install -m 0644 "$f" "$bin/kwok-stages/"
done

echo "$stamp" > "$bin/.tools.stamp"
echo "tools: built in $(( $(date +%s) - start ))s"
