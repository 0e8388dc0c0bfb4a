#!/usr/bin/env bash
# Regenerates golden/<chart>-<case>.yaml: the stdout of the real `helm template`
# (Helm v4.3.1, bin/helm) for charts/<chart> with values/<chart>-<case>.yaml,
# release "demo" in namespace "team-a". Chart mode's tests compare stencil's
# rendering of the same chart and values with these files.
# bin/helm is built, or found up to date, by test/tools/helm/install.sh.
#
# Three checks guard the fixtures:
#   - every case renders without error;
#   - every case renders the same twice, up to the names of podinfo's test
#     hooks (below): a value set that makes a template call genCA,
#     randAlphaNum and the like outside a hook fails here;
#   - no two cases of a chart render the same output.
#
# podinfo's tests/grpc.yaml, jwt.yaml and service.yaml are rendered whatever
# the values, and name their Pods <fullname>-<test>-test-<randAlphaNum 5>.
# Those documents carry the helm.sh/hook annotation, which the tests skip.
# So that a regeneration does not rewrite a golden file for those five
# characters alone, a file is only rewritten when the new output differs from
# it in something other than that suffix.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
helm="$root/bin/helm"
release=demo
namespace=team-a

"$root/test/tools/helm/install.sh" >&2

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Masks the random suffix of test hook Pod names (see above).
mask() {
  sed -E 's/^(  name: .+-test-)[a-z0-9]{5}$/\1XXXXX/' "$1"
}

mkdir -p "$here/golden"
cd "$here"
shopt -s nullglob
cases=(values/*.yaml)
[ "${#cases[@]}" -gt 0 ] || { echo "regen: no values/*.yaml" >&2; exit 1; }

for v in "${cases[@]}"; do
  name=$(basename "$v" .yaml)
  chart=${name%%-*}
  out="golden/$name.yaml"
  [ -d "charts/$chart" ] || { echo "regen: $v: no chart charts/$chart" >&2; exit 1; }
  # helm template names a chart's files by chart name ("# Source:
  # podinfo/templates/..."), not by directory, so the output does not depend
  # on where the repository is checked out.
  "$helm" template "$release" "charts/$chart" --namespace "$namespace" -f "$v" > "$tmp/$name.1"
  "$helm" template "$release" "charts/$chart" --namespace "$namespace" -f "$v" > "$tmp/$name.2"
  if ! cmp -s <(mask "$tmp/$name.1") <(mask "$tmp/$name.2"); then
    echo "regen: $name renders differently each time (a random function outside a test hook?):" >&2
    diff <(mask "$tmp/$name.1") <(mask "$tmp/$name.2") | head -20 >&2
    exit 1
  fi
  if [ -f "$out" ] && cmp -s <(mask "$out") <(mask "$tmp/$name.1"); then
    echo "regen: $out unchanged"
  else
    cp "$tmp/$name.1" "$out"
    echo "regen: $out written ($(wc -l < "$out") lines)"
  fi
done

# No two cases of one chart may render the same: each value set is there to
# change at least one object.
for a in "${cases[@]}"; do
  for b in "${cases[@]}"; do
    na=$(basename "$a" .yaml)
    nb=$(basename "$b" .yaml)
    [[ "$na" < "$nb" && "${na%%-*}" == "${nb%%-*}" ]] || continue
    if cmp -s <(mask "golden/$na.yaml") <(mask "golden/$nb.yaml"); then
      echo "regen: $na and $nb render the same output" >&2
      exit 1
    fi
  done
done

# Golden files of value sets that no longer exist.
for g in golden/*.yaml; do
  [ -f "values/$(basename "$g")" ] || { echo "regen: $g has no values/$(basename "$g"); remove it" >&2; exit 1; }
done

# The Kubernetes version and API versions that helm template assumes without
# a cluster (.Capabilities) come from the k8s.io/client-go version Helm was
# built with; the README records them. A throwaway chart prints them.
mkdir -p "$tmp/capabilities/templates"
printf 'apiVersion: v2\nname: capabilities\nversion: 0.1.0\n' > "$tmp/capabilities/Chart.yaml"
echo 'capabilities: helm {{ .Capabilities.HelmVersion.Version }}, Kubernetes {{ .Capabilities.KubeVersion.Version }}, {{ len .Capabilities.APIVersions }} API versions' \
  > "$tmp/capabilities/templates/capabilities.yaml"
echo "regen: $("$helm" template capabilities "$tmp/capabilities" | sed -n 's/^capabilities: //p')"
