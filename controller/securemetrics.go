package controller

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/klog/v2"
)

// Secure metrics (run --metrics-secure), as kubebuilder's controllers serve
// them: /metrics over HTTPS, to a caller whose bearer token the API server
// authenticates (TokenReview) and whose user it authorises to get the
// /metrics non-resource URL (SubjectAccessReview). Answers are remembered
// for a minute per token, so a scrape every 15 s costs the API server two
// reviews a minute per scraper, not eight.

// decisionTTL is how long an authentication and authorisation answer is
// remembered per token.
const decisionTTL = time.Minute

// metricsAuth guards a handler with the API server's authentication and
// authorisation of the caller's bearer token.
type metricsAuth struct {
	tokens  authenticationv1client.TokenReviewInterface
	access  authorizationv1client.SubjectAccessReviewInterface
	now     func() time.Time
	mu      sync.Mutex
	decided map[[sha256.Size]byte]decision
}

// decision is a remembered answer for one token.
type decision struct {
	status  int // http.StatusOK, Unauthorized or Forbidden
	expires time.Time
}

// wrap serves next to callers the API server lets get /metrics.
func (a *metricsAuth) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" {
			http.Error(w, "a bearer token is required", http.StatusUnauthorized)
			return
		}
		if status := a.decide(r.Context(), token, r.URL.Path); status != http.StatusOK {
			http.Error(w, http.StatusText(status), status)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// decide asks the API server about token, or remembers its last answer.
func (a *metricsAuth) decide(ctx context.Context, token, path string) int {
	key := sha256.Sum256([]byte(token + "\x00" + path))
	a.mu.Lock()
	d, ok := a.decided[key]
	a.mu.Unlock()
	if ok && a.now().Before(d.expires) {
		return d.status
	}
	status, err := a.review(ctx, token, path)
	if err != nil {
		// Not remembered: the next scrape asks again.
		klog.FromContext(ctx).Error(err, "Reviewing a /metrics caller")
		return http.StatusInternalServerError
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.decided == nil || len(a.decided) > 1000 {
		a.decided = map[[sha256.Size]byte]decision{}
	}
	a.decided[key] = decision{status: status, expires: a.now().Add(decisionTTL)}
	return status
}

// review authenticates token and authorises its user to get path.
func (a *metricsAuth) review(ctx context.Context, token, path string) (int, error) {
	tr, err := a.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return 0, fmt.Errorf("token review: %w", err)
	}
	if !tr.Status.Authenticated {
		return http.StatusUnauthorized, nil
	}
	u := tr.Status.User
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := a.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: "get"},
	}}, metav1.CreateOptions{})
	if err != nil {
		return 0, fmt.Errorf("subject access review: %w", err)
	}
	if !sar.Status.Allowed {
		return http.StatusForbidden, nil
	}
	return http.StatusOK, nil
}

// metricsTLS returns the TLS config of secure metrics: the certificate and
// key in dir (tls.crt, tls.key, as a kubernetes.io/tls Secret mounts them),
// or, with dir empty, a self-signed one made at start, as kubebuilder's
// controllers do (Prometheus then scrapes with insecureSkipVerify, or a
// certificate is mounted).
func metricsTLS(dir string) (*tls.Config, error) {
	if dir != "" {
		cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
		if err != nil {
			return nil, fmt.Errorf("metrics certificate in %s: %w", dir, err)
		}
		return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
	}
	cert, err := selfSigned()
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// selfSigned makes a self-signed certificate for this host, valid a year.
func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	host, _ := os.Hostname()
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "stencil-metrics"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", host},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
