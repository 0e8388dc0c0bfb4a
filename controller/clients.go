package controller

// The API clients of the commands that talk to a cluster (run, diff,
// validate --server), built from a kubeconfig, and what discovery tells a
// config (a kind's plural) and a chart (.Capabilities).

import (
	"fmt"
	"net/http"
	"strings"
	"sync"

	"helm.sh/helm/v4/pkg/chart/common"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/transport"
	"k8s.io/client-go/util/flowcontrol"

	"stencil.dev/stencil/config"
)

// Clients are the API clients of a command that watches the cluster (run
// and diff): the dynamic client for whole objects, the metadata client for
// names, and a discovery-backed mapper from kinds to resources.
type Clients struct {
	// Dynamic reads and writes whole objects.
	Dynamic dynamic.Interface
	// Metadata lists and watches objects by name and labels alone.
	Metadata metadata.Interface
	// Mapper maps kinds to resources through discovery.
	Mapper meta.RESTMapper
}

// NewClients builds Clients for rc.
func NewClients(rc *rest.Config) (Clients, error) {
	var c Clients
	var err error
	if c.Dynamic, err = dynamic.NewForConfig(rc); err != nil {
		return c, fmt.Errorf("building dynamic client: %w", err)
	}
	if c.Metadata, err = metadata.NewForConfig(rc); err != nil {
		return c, fmt.Errorf("building metadata client: %w", err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return c, fmt.Errorf("building discovery client: %w", err)
	}
	c.Mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	return c, nil
}

// Impersonators are the clients that write children as the entries'
// identities (config.Identity): one dynamic client per user, built at its
// first use and shared by every write as that user. They share one HTTP
// client (connections, TLS, the write gate of rc's transport) and one rate
// limiter, and differ only in the Impersonate-User header their transport
// adds: impersonation costs no request of its own, and a thousand tenants
// cost a thousand small structs, not a thousand connections.
type Impersonators struct {
	base *rest.Config
	http *http.Client

	mu      sync.Mutex
	clients map[string]dynamic.Interface
}

// WriteLimiter is the rate limiter of rc's QPS and burst (client-go's
// defaults when unset) that the dynamic client and the impersonating
// clients share: every child write, as stencil or as an identity, draws
// from it.
func WriteLimiter(rc *rest.Config) flowcontrol.RateLimiter {
	if rc.RateLimiter != nil {
		return rc.RateLimiter
	}
	qps, burst := rc.QPS, rc.Burst
	if qps == 0 {
		qps, burst = rest.DefaultQPS, rest.DefaultBurst
	}
	return flowcontrol.NewTokenBucketRateLimiter(qps, burst)
}

// NewImpersonators builds the impersonating clients of rc (its transport
// wrappers, the write gate among them, included); rc is not changed.
func NewImpersonators(rc *rest.Config) (*Impersonators, error) {
	rc = rest.CopyConfig(rc)
	rc.RateLimiter = WriteLimiter(rc)
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("building the impersonating clients' transport: %w", err)
	}
	return &Impersonators{base: rc, http: hc, clients: map[string]dynamic.Interface{}}, nil
}

// Client returns the dynamic client that impersonates user, as
// rest.Config.Impersonate.UserName would, building it at its first use.
func (im *Impersonators) Client(user string) (dynamic.Interface, error) {
	im.mu.Lock()
	defer im.mu.Unlock()
	if c, ok := im.clients[user]; ok {
		return c, nil
	}
	hc := &http.Client{Timeout: im.http.Timeout,
		Transport: transport.NewImpersonatingRoundTripper(transport.ImpersonationConfig{UserName: user}, im.http.Transport)}
	c, err := dynamic.NewForConfigAndClient(im.base, hc)
	if err != nil {
		return nil, fmt.Errorf("building the client that impersonates %s: %w", user, err)
	}
	im.clients[user] = c
	return c, nil
}

// ClientConfig loads the kubeconfig the usual way: the flag, then
// $KUBECONFIG, then the in-cluster config.
func ClientConfig(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
}

// groupClients is Kube built from the group clients it needs, not the
// whole clientset (see Kube for why).
type groupClients struct {
	core  corev1.CoreV1Interface
	coord coordinationv1.CoordinationV1Interface
	authz authorizationv1.AuthorizationV1Interface
	authn authenticationv1.AuthenticationV1Interface
}

// CoreV1 returns the core group client (events).
func (g groupClients) CoreV1() corev1.CoreV1Interface { return g.core }

// CoordinationV1 returns the coordination group client (the Lease).
func (g groupClients) CoordinationV1() coordinationv1.CoordinationV1Interface { return g.coord }

// AuthorizationV1 returns the authorization group client (a reload's
// access reviews).
func (g groupClients) AuthorizationV1() authorizationv1.AuthorizationV1Interface { return g.authz }

// AuthenticationV1 returns the authentication group client (the token
// reviews of --metrics-secure).
func (g groupClients) AuthenticationV1() authenticationv1.AuthenticationV1Interface { return g.authn }

// newKube builds the Kube of the run from rc: its four group clients.
func newKube(cfg *rest.Config) (Kube, error) {
	core, err := corev1.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("core client: %w", err)
	}
	coord, err := coordinationv1.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("coordination client: %w", err)
	}
	authz, err := authorizationv1.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("authorization client: %w", err)
	}
	authn, err := authenticationv1.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("authentication client: %w", err)
	}
	return groupClients{core: core, coord: coord, authz: authz, authn: authn}, nil
}

// DiscoveryResolver finds a kind's plural in the API server's discovery.
func DiscoveryResolver(disco discovery.DiscoveryInterface) config.PluralResolver {
	return func(gvk schema.GroupVersionKind) (string, error) {
		list, err := disco.ServerResourcesForGroupVersion(gvk.GroupVersion().String())
		if err != nil {
			return "", fmt.Errorf("finding the plural of %s in discovery (is its CRD installed?): %w", gvk.Kind, err)
		}
		for _, r := range list.APIResources {
			if r.Kind == gvk.Kind && !strings.Contains(r.Name, "/") {
				return r.Name, nil
			}
		}
		return "", fmt.Errorf("%s serves no kind %s (is its CRD installed?)", gvk.GroupVersion(), gvk.Kind)
	}
}

// ClusterCapabilities are what a chart sees as .Capabilities on the
// cluster: its version and every group/version and group/version/Kind it
// serves, as helm install asks them.
func ClusterCapabilities(rc *rest.Config) (*common.Capabilities, error) {
	disco, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, err
	}
	sv, err := disco.ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("reading the server version: %w", err)
	}
	kv, err := common.ParseKubeVersion(sv.GitVersion)
	if err != nil {
		return nil, fmt.Errorf("server version %q: %w", sv.GitVersion, err)
	}
	_, lists, err := disco.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, fmt.Errorf("reading the served APIs: %w", err)
	}
	caps := common.DefaultCapabilities.Copy()
	caps.KubeVersion = *kv
	var set common.VersionSet
	for _, l := range lists {
		set = append(set, l.GroupVersion)
		for _, r := range l.APIResources {
			set = append(set, l.GroupVersion+"/"+r.Kind)
		}
	}
	if len(set) > 0 {
		caps.APIVersions = set
	}
	return caps, nil
}
