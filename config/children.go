package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"stencil.dev/stencil/config/decode"
)

// ChildKind is one entry of a config entry's children list: a kind its
// templates may render.
type ChildKind struct {
	// APIVersion is the child's apiVersion, e.g. policy/v1.
	APIVersion string `json:"apiVersion"`
	// Kind is the child's kind, e.g. PodDisruptionBudget.
	Kind string `json:"kind"`
	// Resource is the lowercase plural. It is needed only for kinds outside
	// stencil's table of built-in kinds (a custom resource of another
	// operator), so that "stencil rbac" can name it without a cluster.
	Resource string `json:"resource,omitempty"`
}

// Describe words a child kind for type errors: its required fields.
func (ChildKind) Describe() (one, many string) {
	names := "{" + strings.Join(decode.FieldNames(reflect.TypeFor[ChildKind](), true), ", ") + "}"
	return "a mapping " + names, names
}

// GVK returns the child kind's GroupVersionKind.
func (k ChildKind) GVK() schema.GroupVersionKind {
	gv, _ := schema.ParseGroupVersion(k.APIVersion)
	return gv.WithKind(k.Kind)
}

// DefaultChildren are the kinds an entry without a children list renders.
var DefaultChildren = []schema.GroupVersionKind{
	{Group: "apps", Version: "v1", Kind: "Deployment"},
	{Version: "v1", Kind: "Service"},
}

// ChildGVKs returns the kinds the entry's templates may render: its
// children list, or DefaultChildren.
func (r Resource) ChildGVKs() []schema.GroupVersionKind {
	if len(r.Children) == 0 {
		return slices.Clone(DefaultChildren)
	}
	out := make([]schema.GroupVersionKind, 0, len(r.Children))
	for _, c := range r.Children {
		out = append(out, c.GVK())
	}
	return out
}

// ChildResource returns the resource (plural) of a child kind: from the
// entry's children list when it names one, else from the table of built-in
// kinds. The table is static on purpose: a plural guessed from a kind
// ("Ingress" -> "ingresss") yields a ClusterRole that silently lacks a
// permission.
func (r Resource) ChildResource(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool) {
	for _, c := range r.Children {
		if c.GVK() == gvk && c.Resource != "" {
			return gvk.GroupVersion().WithResource(c.Resource), true
		}
	}
	res, ok := builtinResources[gvk.GroupKind()]
	if !ok {
		return schema.GroupVersionResource{}, false
	}
	return gvk.GroupVersion().WithResource(res), true
}

// builtinResources maps the namespaced built-in kinds to their resources.
var builtinResources = map[schema.GroupKind]string{
	{Group: "apps", Kind: "Deployment"}:                             "deployments",
	{Group: "apps", Kind: "StatefulSet"}:                            "statefulsets",
	{Group: "apps", Kind: "DaemonSet"}:                              "daemonsets",
	{Group: "apps", Kind: "ReplicaSet"}:                             "replicasets",
	{Group: "batch", Kind: "Job"}:                                   "jobs",
	{Group: "batch", Kind: "CronJob"}:                               "cronjobs",
	{Kind: "Service"}:                                               "services",
	{Kind: "ConfigMap"}:                                             "configmaps",
	{Kind: "Secret"}:                                                "secrets",
	{Kind: "ServiceAccount"}:                                        "serviceaccounts",
	{Kind: "PersistentVolumeClaim"}:                                 "persistentvolumeclaims",
	{Group: "networking.k8s.io", Kind: "Ingress"}:                   "ingresses",
	{Group: "networking.k8s.io", Kind: "NetworkPolicy"}:             "networkpolicies",
	{Group: "policy", Kind: "PodDisruptionBudget"}:                  "poddisruptionbudgets",
	{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}:         "horizontalpodautoscalers",
	{Group: "rbac.authorization.k8s.io", Kind: "Role"}:              "roles",
	{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}:       "rolebindings",
	{Group: "coordination.k8s.io", Kind: "Lease"}:                   "leases",
	{Group: "discovery.k8s.io", Kind: "EndpointSlice"}:              "endpointslices",
	{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute"}:         "httproutes",
	{Group: "monitoring.coreos.com", Kind: "ServiceMonitor"}:        "servicemonitors",
	{Group: "cert-manager.io", Kind: "Certificate"}:                 "certificates",
	{Group: "autoscaling.k8s.io", Kind: "VerticalPodAutoscaler"}:    "verticalpodautoscalers",
	{Group: "keda.sh", Kind: "ScaledObject"}:                        "scaledobjects",
	{Group: "external-secrets.io", Kind: "ExternalSecret"}:          "externalsecrets",
	{Group: "networking.istio.io", Kind: "VirtualService"}:          "virtualservices",
	{Group: "networking.istio.io", Kind: "DestinationRule"}:         "destinationrules",
	{Group: "security.istio.io", Kind: "AuthorizationPolicy"}:       "authorizationpolicies",
	{Group: "policy.networking.k8s.io", Kind: "AdminNetworkPolicy"}: "adminnetworkpolicies",
	// Kinds charts commonly render (chart mode reads them from the
	// templates).
	{Kind: "Pod"}:                   "pods",
	{Kind: "Endpoints"}:             "endpoints",
	{Kind: "LimitRange"}:            "limitranges",
	{Kind: "ResourceQuota"}:         "resourcequotas",
	{Kind: "ReplicationController"}: "replicationcontrollers",
	{Group: "gateway.networking.k8s.io", Kind: "GRPCRoute"}:      "grpcroutes",
	{Group: "gateway.networking.k8s.io", Kind: "TCPRoute"}:       "tcproutes",
	{Group: "gateway.networking.k8s.io", Kind: "TLSRoute"}:       "tlsroutes",
	{Group: "gateway.networking.k8s.io", Kind: "Gateway"}:        "gateways",
	{Group: "monitoring.coreos.com", Kind: "PodMonitor"}:         "podmonitors",
	{Group: "monitoring.coreos.com", Kind: "PrometheusRule"}:     "prometheusrules",
	{Group: "cert-manager.io", Kind: "Issuer"}:                   "issuers",
	{Group: "networking.istio.io", Kind: "Gateway"}:              "gateways",
	{Group: "networking.istio.io", Kind: "ServiceEntry"}:         "serviceentries",
	{Group: "keda.sh", Kind: "ScaledJob"}:                        "scaledjobs",
	{Group: "external-secrets.io", Kind: "SecretStore"}:          "secretstores",
	{Group: "traefik.io", Kind: "IngressRoute"}:                  "ingressroutes",
	{Group: "autoscaling.k8s.io", Kind: "VerticalPodAutoscaler"}: "verticalpodautoscalers",
}

// clusterScoped are well-known cluster-scoped kinds: a child lives in its
// custom resource's namespace, so these are refused when the config is
// loaded. The controller also refuses any kind the REST mapper reports as
// cluster-scoped.
var clusterScoped = map[schema.GroupKind]bool{
	{Kind: "Namespace"}:        true,
	{Kind: "Node"}:             true,
	{Kind: "PersistentVolume"}: true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                       true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:               true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:   true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}: true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:      true,
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                           true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                 true,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                    true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                             true,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                                    true,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                              true,
	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}:               true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "FlowSchema"}:                     true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "PriorityLevelConfiguration"}:     true,
	{Group: "cert-manager.io", Kind: "ClusterIssuer"}:                               true,
}

// grantsPermissions are namespaced kinds that grant permissions: a custom
// resource author who may create a custom resource must not be able to
// escalate through stencil, so they need allowPermissionGrants.
var grantsPermissions = map[schema.GroupKind]bool{
	{Group: "rbac.authorization.k8s.io", Kind: "Role"}:        true,
	{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}: true,
}

// GrantsPermissions reports whether a kind grants permissions.
func GrantsPermissions(gk schema.GroupKind) bool { return grantsPermissions[gk] }

// IsClusterScoped reports whether a kind is a well-known cluster-scoped one.
func IsClusterScoped(gk schema.GroupKind) bool { return clusterScoped[gk] }

// validateChildren checks an entry's children list, at p: each kind is
// well formed, listed once, namespaced, and, if it grants permissions,
// allowed explicitly.
func validateChildren(r Resource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[schema.GroupVersionKind]int{}
	for j, c := range r.Children {
		cp := p.Index(j)
		if c.APIVersion == "" || c.Kind == "" {
			errs = append(errs, field.Required(cp, "apiVersion and kind are required, e.g. {apiVersion: policy/v1, kind: PodDisruptionBudget}"))
			continue
		}
		if _, err := schema.ParseGroupVersion(c.APIVersion); err != nil {
			errs = append(errs, field.Invalid(cp.Child("apiVersion"), c.APIVersion, fmt.Sprintf("%q: %v", c.APIVersion, err)))
			continue
		}
		gvk := c.GVK()
		if k, dup := seen[gvk]; dup {
			errs = append(errs, field.Invalid(cp, c.Kind, fmt.Sprintf("%s is also children[%d]", c.Kind, k)))
			continue
		}
		seen[gvk] = j
		switch gk := gvk.GroupKind(); {
		case clusterScoped[gk]:
			errs = append(errs, field.Forbidden(cp, fmt.Sprintf("%s is cluster-scoped: children live in their custom resource's namespace", gk)))
		case grantsPermissions[gk] && !r.AllowPermissionGrants:
			errs = append(errs, field.Forbidden(cp, fmt.Sprintf("%s grants permissions: anyone who may create a %s could escalate through stencil; set allowPermissionGrants: true on the entry to allow it", gk, r.Resource)))
		}
		if c.Resource != "" && strings.ToLower(c.Resource) != c.Resource {
			errs = append(errs, field.Invalid(cp.Child("resource"), c.Resource, fmt.Sprintf("%q must be the lowercase plural", c.Resource)))
		}
	}
	return errs
}
