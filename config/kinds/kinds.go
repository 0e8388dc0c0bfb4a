// Package kinds is stencil's table of the Kubernetes kinds it knows
// without a cluster: the resource (lowercase plural) of each namespaced
// built-in kind and of the custom kinds charts commonly render, the
// well-known cluster-scoped kinds, and the namespaced kinds that grant
// permissions. Package config checks a config's children and reads
// against it; "stencil rbac" names a kind's resource from it.
//
// The choice a newcomer may question: the table is static, not asked of
// discovery and not derived from a kind. A plural guessed from a kind
// ("Ingress" -> "ingresss") yields a ClusterRole that silently lacks a
// permission, and "stencil rbac" and "stencil validate" run without a
// cluster; a kind the table lacks is named by the config's resource
// field, and the controller still asks its REST mapper at run time.
package kinds

import "k8s.io/apimachinery/pkg/runtime/schema"

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

// clusterScoped are well-known cluster-scoped kinds: a child or a read
// lives in its custom resource's namespace, so package config refuses
// these when the config is loaded. The controller also refuses any kind the REST mapper reports as
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

// Resource returns the resource (lowercase plural) of a namespaced
// built-in kind; false when the table does not know the kind.
func Resource(gk schema.GroupKind) (string, bool) {
	res, ok := builtinResources[gk]
	return res, ok
}

// IsClusterScoped reports whether a kind is a well-known cluster-scoped one.
func IsClusterScoped(gk schema.GroupKind) bool { return clusterScoped[gk] }

// GrantsPermissions reports whether a kind grants permissions.
func GrantsPermissions(gk schema.GroupKind) bool { return grantsPermissions[gk] }
