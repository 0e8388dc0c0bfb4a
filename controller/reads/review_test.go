package reads

import (
	"context"
	"errors"
	goruntime "runtime"
	"slices"
	"sync"
	"sync/atomic"
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

// TestReviewsAskOnceAtATime: renders that ask the same question while it
// is being asked (the workers rendering a tenant's resources at once)
// wait for its answer: one review, not one each.
func TestReviewsAskOnceAtATime(t *testing.T) {
	kube := fake.NewClientset()
	var mu sync.Mutex
	asked := 0
	release := make(chan struct{})
	kube.PrependReactor("create", "subjectaccessreviews", func(a core.Action) (bool, runtime.Object, error) {
		mu.Lock()
		asked++
		mu.Unlock()
		<-release
		review := a.(core.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		review.Status.Allowed = true
		return true, review, nil
	})
	r := NewReviews(kube.AuthorizationV1().SubjectAccessReviews())
	var looked atomic.Int32
	r.now = func() time.Time { looked.Add(1); return time.Unix(1000, 0) }
	const callers = 8
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	errs := make(chan error, callers)
	for range callers {
		go func() {
			ok, err := r.Allowed(context.Background(), "system:serviceaccount:team-a:builder", "get", secrets, "team-a", "db")
			if err == nil && !ok {
				err = errors.New("refused, want allowed")
			}
			errs <- err
		}()
	}
	// Every caller has looked for an answer (and found none: the one
	// review is held) before it is answered.
	deadline := time.Now().Add(10 * time.Second)
	for looked.Load() < callers {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d callers looked for an answer in 10s", looked.Load(), callers)
		}
		goruntime.Gosched()
	}
	close(release)
	for range callers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if asked != 1 {
		t.Errorf("%d reviews for %d callers asking the same question at once, want 1", asked, callers)
	}
}
