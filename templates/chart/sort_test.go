package chart

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
)

// FuzzSplitDocumentsAsHelm holds splitDocuments to Helm's SplitManifests:
// the same documents in the same order, for any text.
func FuzzSplitDocumentsAsHelm(f *testing.F) {
	for _, s := range []string{
		"", "---", "a: 1", "---\na: 1\n---\nb: 2\n", "a: 1\n---apiVersion: v1\n", "------\n", "--- \t\na\n", " \n\n---\n\n---\n",
		"a: |\n  ---\n  x\n", "a: 1\r\n---\r\nb: 2", "x\n--- # c\ny", "\u0085---\na", "---\t---\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m := releaseutil.SplitManifests(s)
		want := make([]string, len(m))
		for k, v := range m {
			i, err := strconv.Atoi(strings.TrimPrefix(k, "manifest-"))
			if err != nil || i >= len(want) {
				t.Fatalf("Helm's key %q", k)
			}
			want[i] = v
		}
		if got := splitDocuments(s); !slices.Equal(got, want) {
			t.Fatalf("%q: split into\n%q\nHelm splits it into\n%q", s, got, want)
		}
	})
}
