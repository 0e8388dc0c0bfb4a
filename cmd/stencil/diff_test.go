package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestDiffCommandErrors(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if got := dispatch([]string{"diff", "--config", "testdata/none.yaml"}, nil, &stdout, &stderr); got != exitUsage {
		t.Errorf("missing config: exit %d, want %d", got, exitUsage)
	}
	stderr.Reset()
	if got := dispatch([]string{"diff", "-o", "yaml"}, nil, &stdout, &stderr); got != exitUsage {
		t.Errorf("-o yaml: exit %d, want %d (%s)", got, exitUsage, stderr.String())
	}
	stderr.Reset()
	// A cluster nobody listens on: an error, not "nothing changes".
	kubeconfig := t.TempDir() + "/kubeconfig"
	err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]
contexts: [{name: c, context: {cluster: c}}]
current-context: c
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if got := dispatch([]string{"diff", "--config", "../../crds/stencil.yaml", "--kubeconfig", kubeconfig}, nil, &stdout, &stderr); got != exitUsage {
		t.Errorf("unreachable cluster: exit %d, want %d (%s)", got, exitUsage, stderr.String())
	}
	if !strings.Contains(stderr.String(), "stencil diff: cannot read the cluster at http://127.0.0.1:1: ") || !strings.Contains(stderr.String(), "connection refused") {
		t.Errorf("stderr = %q", stderr.String())
	}
}
