package templates

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// FindSet picks the set of the entry that serves u: the entry with u's
// group and version, narrowed by plural when given. A custom resource names
// a kind, not a resource, and stencil never guesses a plural from a kind,
// so ambiguity is an error; errors name the config file at path.
func FindSet(path string, sets []*Set, u *unstructured.Unstructured, plural string) (*Set, error) {
	gv, err := schema.ParseGroupVersion(u.GetAPIVersion())
	if err != nil {
		return nil, fmt.Errorf("apiVersion %q: %w", u.GetAPIVersion(), err)
	}
	var matches []*Set
	var names []string
	for _, s := range sets {
		r := s.Resource()
		if r.Group != gv.Group || r.Version != gv.Version {
			continue
		}
		names = append(names, r.Resource)
		if plural == "" || r.Resource == plural {
			matches = append(matches, s)
		}
	}
	switch {
	case len(matches) == 1:
		return matches[0], nil
	case len(names) == 0:
		return nil, fmt.Errorf("%s lists no resource of %s", path, gv)
	case len(matches) == 0:
		return nil, fmt.Errorf("%s lists no resource %q in %s (it lists %s)", path, plural, gv, strings.Join(names, ", "))
	default:
		return nil, fmt.Errorf("%s lists several resources in %s (%s): pick one by its plural (render --resource, a test case's entry)", path, gv, strings.Join(names, ", "))
	}
}
