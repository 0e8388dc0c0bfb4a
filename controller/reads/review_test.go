package reads

import (
	"context"
	"slices"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
)

// TestReviewsAskOncePerTTL: an identity's read is reviewed as the
// ServiceAccount with its groups, the answer is remembered for ReviewTTL
// (a second render asks nothing), and asked again after it.
func TestReviewsAskOncePerTTL(t *testing.T) {
	kube := fake.NewClientset()
	var asked []authorizationv1.SubjectAccessReviewSpec
	kube.PrependReactor("create", "subjectaccessreviews", func(a core.Action) (bool, runtime.Object, error) {
		review := a.(core.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		asked = append(asked, review.Spec)
		review.Status.Allowed = review.Spec.ResourceAttributes.Resource == "configmaps"
		return true, review, nil
	})
	now := time.Unix(1000, 0)
	r := NewReviews(kube.AuthorizationV1().SubjectAccessReviews())
	r.now = func() time.Time { return now }
	user := "system:serviceaccount:team-a:builder"
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	configmaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	for range 2 {
		if ok, err := r.Allowed(context.Background(), user, "get", secrets, "team-a", "db"); ok || err != nil {
			t.Errorf("get secrets db = %v, %v; want refused", ok, err)
		}
		if ok, err := r.Allowed(context.Background(), user, "list", configmaps, "team-a", ""); !ok || err != nil {
			t.Errorf("list configmaps = %v, %v; want allowed", ok, err)
		}
	}
	if len(asked) != 2 {
		t.Fatalf("%d reviews for two reads asked twice, want 2 (remembered)", len(asked))
	}
	spec := asked[0]
	if spec.User != user || !slices.Equal(spec.Groups, []string{"system:authenticated", "system:serviceaccounts", "system:serviceaccounts:team-a"}) ||
		spec.ResourceAttributes.Namespace != "team-a" || spec.ResourceAttributes.Name != "db" || spec.ResourceAttributes.Verb != "get" {
		t.Errorf("review %+v (%+v): want builder with its groups, get secrets team-a/db", spec, spec.ResourceAttributes)
	}
	now = now.Add(ReviewTTL)
	if _, err := r.Allowed(context.Background(), user, "get", secrets, "team-a", "db"); err != nil || len(asked) != 3 {
		t.Errorf("after ReviewTTL: %d reviews (err %v), want the read asked again", len(asked), err)
	}
}
