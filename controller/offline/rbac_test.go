package offline

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

func objectsOf(t *testing.T, docs ...string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, d := range docs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(d), &u.Object); err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

// TestRBACAllows: what a case's RBAC objects allow an account, as the API
// server's RBAC authorizer would answer: a Role only in its namespace,
// a ClusterRole through a RoleBinding in the binding's namespace and
// through a ClusterRoleBinding everywhere, groups of service accounts,
// wildcards, resourceNames and subresources.
func TestRBACAllows(t *testing.T) {
	r, err := newRBAC(objectsOf(t,
		`{apiVersion: v1, kind: ServiceAccount, metadata: {name: builder, namespace: a}}`,
		`{apiVersion: rbac.authorization.k8s.io/v1, kind: Role, metadata: {name: deploy, namespace: a}, rules: [{apiGroups: [apps], resources: [deployments], verbs: [create, patch]}]}`,
		`{apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: deploy, namespace: a}, roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: deploy}, subjects: [{kind: ServiceAccount, name: builder, namespace: a}]}`,
		`{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, metadata: {name: cm}, rules: [{apiGroups: [""], resources: [configmaps], verbs: ["*"], resourceNames: [settings]}]}`,
		`{apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: cm, namespace: b}, roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cm}, subjects: [{kind: Group, name: "system:serviceaccounts:a"}]}`,
		`{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, metadata: {name: fin}, rules: [{apiGroups: [example.com], resources: [things/finalizers], verbs: [update]}]}`,
		`{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRoleBinding, metadata: {name: fin}, roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: fin}, subjects: [{kind: User, name: "system:serviceaccount:a:builder"}]}`,
	))
	if err != nil {
		t.Fatal(err)
	}
	const user = "system:serviceaccount:a:builder"
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	configmaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	things := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "things"}
	for _, c := range []struct {
		user, verb  string
		gvr         schema.GroupVersionResource
		sub, ns, nm string
		want        bool
	}{
		{user, "create", deployments, "", "a", "d", true},
		{user, "patch", deployments, "", "a", "d", true},
		{user, "delete", deployments, "", "a", "d", false},
		{user, "create", deployments, "", "b", "d", false},
		{"system:serviceaccount:a:other", "create", deployments, "", "a", "d", false},
		{user, "patch", configmaps, "", "b", "settings", true},
		{user, "patch", configmaps, "", "b", "other", false},
		{user, "patch", configmaps, "", "a", "settings", false},
		{"system:serviceaccount:c:builder", "patch", configmaps, "", "b", "settings", false},
		{user, "update", things, "finalizers", "z", "t", true},
		{user, "update", things, "", "z", "t", false},
	} {
		err := r.allowed(c.user, c.verb, c.gvr, c.sub, c.ns, c.nm)
		if got := err == nil; got != c.want {
			t.Errorf("%s %s %s/%s in %s %s: allowed %v, want %v (%v)", c.user, c.verb, c.gvr.Resource, c.sub, c.ns, c.nm, got, c.want, err)
		}
		if err != nil && !apierrors.IsForbidden(err) {
			t.Errorf("a refusal is not Forbidden: %v", err)
		}
	}
	if !r.hasAccount("a", "builder") || r.hasAccount("b", "builder") {
		t.Error("the account a/builder, and only it, exists")
	}
	if _, err := newRBAC(objectsOf(t, `{apiVersion: v1, kind: Secret, metadata: {name: s}}`)); err == nil {
		t.Error("a Secret among the RBAC objects is not refused")
	}
}

// TestAdopt: an observed object with no controller becomes the resource's
// child as stencil writes it; one with another controller stays foreign.
func TestAdopt(t *testing.T) {
	parent := objectsOf(t, `{apiVersion: example.com/v1, kind: Thing, metadata: {name: p, namespace: ns, uid: u1}}`)[0]
	objs := objectsOf(t,
		`{apiVersion: v1, kind: Service, metadata: {name: s}}`,
		`{apiVersion: apps/v1, kind: Deployment, metadata: {name: d, ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: rs, uid: other, controller: true}]}}`,
	)
	own, foreign := adopt(objs[0], parent), adopt(objs[1], parent)
	if own.GetNamespace() != "ns" || own.GetLabels()["stencil.dev/owner-uid"] != "u1" || len(own.GetOwnerReferences()) != 1 || own.GetOwnerReferences()[0].UID != "u1" {
		t.Errorf("not adopted as the resource's child: %v", own.Object["metadata"])
	}
	if objs[0].GetNamespace() != "" {
		t.Error("adopt changed the case's object")
	}
	if len(foreign.GetOwnerReferences()) != 1 || foreign.GetOwnerReferences()[0].UID != "other" || foreign.GetLabels()["stencil.dev/owner-uid"] != "" {
		t.Errorf("a foreign object was adopted: %v", foreign.Object["metadata"])
	}
}
