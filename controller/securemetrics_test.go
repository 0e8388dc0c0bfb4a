package controller

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The guard lets through exactly the callers the API server authenticates
// and authorises to get /metrics, and asks once a minute per token.
func TestSecureMetricsAuthorises(t *testing.T) {
	client := fake.NewClientset()
	reviews := 0
	client.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		reviews++
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		switch tr.Spec.Token {
		case "prometheus", "tenant":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "system:serviceaccount:monitoring:" + tr.Spec.Token}}
		}
		return true, tr, nil
	})
	client.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		attrs := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = sar.Spec.User == "system:serviceaccount:monitoring:prometheus" && attrs != nil && attrs.Path == "/metrics" && attrs.Verb == "get"
		return true, sar, nil
	})
	now := time.Unix(0, 0)
	auth := &metricsAuth{tokens: client.AuthenticationV1().TokenReviews(), access: client.AuthorizationV1().SubjectAccessReviews(), now: func() time.Time { return now }}
	h := auth.wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("metrics")) }))
	get := func(token string) int {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for _, c := range []struct {
		token string
		want  int
	}{{"", http.StatusUnauthorized}, {"forged", http.StatusUnauthorized}, {"tenant", http.StatusForbidden}, {"prometheus", http.StatusOK}} {
		if got := get(c.token); got != c.want {
			t.Errorf("token %q: %d, want %d", c.token, got, c.want)
		}
	}
	asked := reviews
	for range 4 {
		get("prometheus")
	}
	if reviews != asked {
		t.Errorf("4 scrapes within the minute asked %d more token reviews, want 0", reviews-asked)
	}
	now = now.Add(decisionTTL + time.Second)
	get("prometheus")
	if reviews != asked+1 {
		t.Errorf("a scrape after the minute asked %d token reviews, want 1", reviews-asked)
	}
}

// Without a certificate directory the server makes a self-signed one.
func TestSecureMetricsSelfSigned(t *testing.T) {
	cfg, err := metricsTLS("")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Certificates) != 1 || cfg.MinVersion != tls.VersionTLS12 {
		t.Fatalf("tls config %+v", cfg)
	}
	if _, err := metricsTLS(t.TempDir()); err == nil {
		t.Error("an empty certificate directory was accepted")
	}
}
