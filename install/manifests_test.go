package install

import (
	"os"
	"path/filepath"
	"testing"
)

// The embedded monitoring files are deploy/monitoring's.
func TestManifestsMonitoringIsDeploys(t *testing.T) {
	for _, name := range []string{"servicemonitor.yaml", "prometheusrule.yaml"} {
		got, err := os.ReadFile(filepath.Join("monitoring", name))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("..", "deploy", "monitoring", name))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("install/monitoring/%s differs from deploy/monitoring/%s: cp deploy/monitoring/%s install/monitoring/", name, name, name)
		}
	}
}
