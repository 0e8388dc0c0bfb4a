package access

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	authorizationfake "k8s.io/client-go/kubernetes/typed/authorization/v1/fake"
	core "k8s.io/client-go/testing"
)

// reviews refuses the verbs in denied ("verb resource[/subresource]
// namespace[ name]"), allows the rest, and fails every review when broken.
func reviews(broken bool, denied ...string) *authorizationfake.FakeAuthorizationV1 {
	f := &authorizationfake.FakeAuthorizationV1{Fake: &core.Fake{}}
	f.AddReactor("create", "selfsubjectaccessreviews", func(a core.Action) (bool, runtime.Object, error) {
		if broken {
			return true, nil, errors.New("connection refused")
		}
		r := a.(core.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		at := r.Spec.ResourceAttributes
		res := at.Resource
		if at.Subresource != "" {
			res += "/" + at.Subresource
		}
		key := at.Verb + " " + res + " " + at.Namespace
		if at.Name != "" {
			key += " " + at.Name
		}
		allowed := true
		for _, d := range denied {
			if d == key {
				allowed = false
			}
		}
		r.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: allowed}
		return true, r, nil
	})
	return f
}

func TestCheck(t *testing.T) {
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	gizmos := schema.GroupVersionResource{Group: "toys.example.com", Version: "v1", Resource: "gizmos"}
	needs := []Need{
		{GVR: gizmos, Subresource: "status", Namespace: "team-a", Verbs: []string{"patch"}},
		{GVR: configMaps, Namespace: "platform", Name: "defaults", Verbs: []string{"get", "list", "watch"}},
		{GVR: configMaps, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
	}
	Sort(needs)
	if needs[0].ResourceName() != "configmaps" || needs[0].Namespace != "" || needs[1].Name != "defaults" ||
		needs[2].ResourceName() != "gizmos.toys.example.com/status" {
		t.Fatalf("Sort: %+v; want configmaps in all namespaces first, then by name in platform", needs)
	}
	tests := []struct {
		name   string
		broken bool
		denied []string
		want   []string // messages, joined; none when allowed
	}{
		{"all allowed", false, nil, nil},
		{"verbs refused are named, in order, per resource and namespace", false,
			[]string{"delete configmaps ", "create configmaps ", "patch gizmos/status team-a"},
			[]string{"reload refused: stencil may not create, delete configmaps in all namespaces (RBAC)",
				"reload refused: stencil may not patch gizmos.toys.example.com/status in namespace team-a (RBAC)"}},
		{"one object refused is named", false,
			[]string{"delete configmaps ", "create configmaps ", "watch configmaps platform defaults"},
			[]string{"reload refused: stencil may not create, delete configmaps in all namespaces (RBAC)",
				"reload refused: stencil may not watch configmaps named defaults in namespace platform (RBAC)"}},
		{"a review that fails refuses", true, nil,
			[]string{"reload refused: asking whether stencil may get configmaps: connection refused"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(context.Background(), reviews(tt.broken, tt.denied...).SelfSubjectAccessReviews(), time.Second, needs)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != strings.Join(tt.want, "\n") {
				t.Fatalf("Check = %v\nwant %s", err, strings.Join(tt.want, "\n"))
			}
			var denied *DeniedError
			if !tt.broken && (!errors.As(err, &denied) || denied.Resource != "configmaps" || strings.Join(denied.Verbs, ",") != "create,delete") {
				t.Errorf("first DeniedError = %#v, want configmaps create, delete", denied)
			}
		})
	}
}
