package reconcile

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/managedfields/managedfieldstest"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
	"stencil.dev/stencil/contract"
)

// The unit fixture's "live" children are what the API server would store
// after stencil's apply, not the render itself: field ownership comes from a
// real structured-merge-diff field manager with the built-in types' schemas,
// values are normalised by a round trip through the typed API objects
// (cpu: 1 becomes "1", 0.5 becomes "500m", false and "" are dropped where
// the type omits them), and the defaults the API server fills in are set.
// A drift check that compares values instead of ownership fails here.

var typeConverter = applyconfigurations.NewTypeConverter(scheme.Scheme)

func fieldManagerFor(t *testing.T, u *unstructured.Unstructured) *managedfields.FieldManager {
	t.Helper()
	return managedfieldstest.NewFakeFieldManager(typeConverter, u.GroupVersionKind())
}

// serverApply applies want as stencil would, on top of live (nil: create),
// and returns the object as the API server would store it.
func serverApply(t *testing.T, live, want *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	if live == nil {
		live = &unstructured.Unstructured{}
		live.SetGroupVersionKind(want.GroupVersionKind())
	}
	fm := fieldManagerFor(t, want)
	out, err := fm.Apply(live.DeepCopy(), want.DeepCopy(), contract.FieldManager, true)
	if err != nil {
		t.Fatalf("apply %s/%s: %v", want.GetKind(), want.GetName(), err)
	}
	return normalise(t, toUnstructured(t, out))
}

// serverUpdate changes live with edit, as a client such as kubectl edit
// (manager) would with an update, and returns what the server would store:
// the fields edit changes move to manager.
func serverUpdate(t *testing.T, live *unstructured.Unstructured, manager string, edit func(*unstructured.Unstructured)) *unstructured.Unstructured {
	t.Helper()
	changed := live.DeepCopy()
	edit(changed)
	changed = normalise(t, changed)
	fm := fieldManagerFor(t, live)
	out, err := fm.Update(live.DeepCopy(), changed, manager)
	if err != nil {
		t.Fatalf("update %s/%s: %v", live.GetKind(), live.GetName(), err)
	}
	return toUnstructured(t, out)
}

func toUnstructured(t *testing.T, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	must(t, err)
	return &unstructured.Unstructured{Object: m}
}

// normalise round-trips u through its typed API object and fills in the
// defaults the API server sets, keeping metadata (managedFields included).
func normalise(t *testing.T, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	var typed runtime.Object
	switch u.GetKind() {
	case "Deployment":
		d := &appsv1.Deployment{}
		must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d))
		defaultDeployment(d)
		typed = d
	case "Service":
		s := &corev1.Service{}
		must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, s))
		defaultService(s)
		typed = s
	default:
		return u
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
	must(t, err)
	out := &unstructured.Unstructured{Object: m}
	out.SetGroupVersionKind(u.GroupVersionKind())
	return out
}

func defaultDeployment(d *appsv1.Deployment) {
	if d.Spec.Replicas == nil {
		d.Spec.Replicas = ptr(int32(1))
	}
	if d.Spec.RevisionHistoryLimit == nil {
		d.Spec.RevisionHistoryLimit = ptr(int32(10))
	}
	if d.Spec.ProgressDeadlineSeconds == nil {
		d.Spec.ProgressDeadlineSeconds = ptr(int32(600))
	}
	if d.Spec.Strategy.Type == "" {
		d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
		q := intstr.FromString("25%")
		d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: &q, MaxUnavailable: &q}
	}
	ps := &d.Spec.Template.Spec
	if ps.RestartPolicy == "" {
		ps.RestartPolicy = corev1.RestartPolicyAlways
	}
	if ps.DNSPolicy == "" {
		ps.DNSPolicy = corev1.DNSClusterFirst
	}
	if ps.SchedulerName == "" {
		ps.SchedulerName = corev1.DefaultSchedulerName
	}
	if ps.TerminationGracePeriodSeconds == nil {
		ps.TerminationGracePeriodSeconds = ptr(int64(30))
	}
	if ps.SecurityContext == nil {
		ps.SecurityContext = &corev1.PodSecurityContext{}
	}
	for i := range ps.Containers {
		c := &ps.Containers[i]
		if c.ImagePullPolicy == "" {
			c.ImagePullPolicy = corev1.PullIfNotPresent
		}
		if c.TerminationMessagePath == "" {
			c.TerminationMessagePath = corev1.TerminationMessagePathDefault
		}
		if c.TerminationMessagePolicy == "" {
			c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
		}
		for j := range c.Ports {
			if c.Ports[j].Protocol == "" {
				c.Ports[j].Protocol = corev1.ProtocolTCP
			}
		}
	}
}

func defaultService(s *corev1.Service) {
	if s.Spec.Type == "" {
		s.Spec.Type = corev1.ServiceTypeClusterIP
	}
	if s.Spec.SessionAffinity == "" {
		s.Spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	if s.Spec.ClusterIP == "" {
		s.Spec.ClusterIP = "10.96.0.10"
		s.Spec.ClusterIPs = []string{s.Spec.ClusterIP}
	}
	for i := range s.Spec.Ports {
		p := &s.Spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort.IntVal == 0 && p.TargetPort.StrVal == "" {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// managersOf lists the managers of u's managedFields, for failure messages.
func managersOf(u *unstructured.Unstructured) []string {
	var out []string
	for _, e := range u.GetManagedFields() {
		out = append(out, e.Manager+"/"+string(e.Operation))
	}
	return out
}
