package install

// "stencil manifests": everything a cluster needs to run stencil with a
// config, as one YAML stream, derived from the config with no list kept by
// hand. The config and every file it names travel in ConfigMaps, mounted
// by one projected volume at their paths relative to the config file; a
// config too large for ConfigMaps is refused and goes into an image
// instead (docs/operating.md).

import (
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"stencil.dev/stencil/config"
	"stencil.dev/stencil/config/snapshot"
	"stencil.dev/stencil/entry"
)

// The ServiceMonitor and PrometheusRule of deploy/monitoring, copied here
// because a package cannot embed files above its directory
// (TestManifestsMonitoringIsDeploys keeps the copies equal).
//
//go:embed monitoring/servicemonitor.yaml monitoring/prometheusrule.yaml
var monitoringFiles embed.FS

const (
	// configMapBudget bounds one ConfigMap's keys and JSON-encoded values:
	// kubectl apply copies the object into its last-applied annotation,
	// which holds 256 KiB.
	configMapBudget = 200 << 10
	// maxConfigMaps is where ConfigMaps stop being the right carrier.
	maxConfigMaps = 16
	// configDir is where the projected volume mounts the config tree.
	configDir = "/etc/stencil"
	// imageRoute is what a config too large for ConfigMaps does instead.
	imageRoute = `build an image FROM stencil's adding the config instead (docs/operating.md, "A config too large for ConfigMaps")`
)

// Options are the flags of stencil manifests.
type Options struct {
	// Image is stencil's container image; Namespace the one it runs in.
	Image, Namespace string
	// Ring is the number of ring replicas (run --ring); 0 runs two under
	// leader election.
	Ring int
	// Monitoring adds the ServiceMonitor and PrometheusRule.
	Monitoring bool
	// Role are the run flags that need more rules.
	Role RoleOptions
	// DefaultIdentity, when set, runs stencil with --default-identity
	// (the entries were compiled with it, so the roles match).
	DefaultIdentity *config.Identity
}

// Manifests returns the objects that run stencil with cfg (its entries
// compiled), in the order to apply them.
func Manifests(cfg *config.Config, entries []*entry.Entry, o Options) ([]map[string]any, error) {
	files, err := configFiles(cfg)
	if err != nil {
		return nil, err
	}
	cms, err := packConfigMaps(files, o.Namespace)
	if err != nil {
		return nil, err
	}
	role, err := ClusterRole("stencil", entries, o.Role)
	if err != nil {
		return nil, err
	}
	role.Labels = labels(nil)
	identities, err := IdentityRoles("stencil", entries, o.Role)
	if err != nil {
		return nil, err
	}
	lease := LeaseRole("stencil-leader-election")
	lease.Namespace, lease.Labels = o.Namespace, labels(nil)
	crds, err := entry.CRDObjects(entries)
	if err != nil {
		return nil, err
	}

	objs := []any{namespaceObject(o.Namespace), serviceAccount(o.Namespace)}
	for _, cm := range cms {
		objs = append(objs, cm.object)
	}
	for _, crd := range crds {
		objs = append(objs, crd.Object)
	}
	objs = append(objs, role, clusterRoleBinding(o.Namespace))
	// The roles of the entries' identities, unbound: binding one to its
	// account is the platform's decision, per tenant namespace.
	for _, r := range identities {
		r.Labels = labels(nil)
		objs = append(objs, r)
	}
	objs = append(objs, lease, roleBinding(o.Namespace),
		metricsService(o.Namespace), deployment(o, cms), podDisruptionBudget(o))
	if o.Monitoring {
		for _, name := range []string{"servicemonitor.yaml", "prometheusrule.yaml"} {
			obj, err := monitoringObject(name, o.Namespace)
			if err != nil {
				return nil, err
			}
			objs = append(objs, obj)
		}
	}
	out := make([]map[string]any, len(objs))
	for i, obj := range objs {
		if out[i], err = plainObject(obj); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// configFile is one file of the config tree.
type configFile struct {
	// path is where it lands under configDir, slash-separated.
	path string
	data []byte
}

// configFiles returns the config file (as stencil.yaml) and every file it
// names (config.Files: templates, status templates, helpers, and charts,
// a directory's every file as Helm reads it, or a .tgz), each once,
// sorted by path. Each lands at its path relative to the config file's
// directory: a file outside it, a link to a file outside it, and a name
// that is not UTF-8 (the API server keeps paths as UTF-8 text, so two
// such names could become one) are refused, naming the file.
func configFiles(cfg *config.Config) ([]configFile, error) {
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, err
	}
	byPath := map[string]string{} // path in the tree -> file on disk
	add := func(file string) error {
		abs, err := filepath.Abs(file)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, abs)
		if err != nil || outside(rel) {
			return fmt.Errorf("%s is outside %s, the config file's directory: the ConfigMaps mount only the tree under it", file, cfg.Dir)
		}
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return err
		}
		if relReal, err := filepath.Rel(realDir, real); err != nil || outside(relReal) {
			return fmt.Errorf("%s is a link to %s, outside %s, the config file's directory: the ConfigMaps carry only the tree under it (copy the file in)", file, real, cfg.Dir)
		}
		if !utf8.ValidString(rel) {
			return fmt.Errorf("%q: a file name that is not UTF-8 cannot be a mount path (the API server keeps paths as UTF-8 text); rename it", file)
		}
		rel = filepath.ToSlash(rel)
		if prev, ok := byPath[rel]; ok && prev != abs {
			return fmt.Errorf("%s and %s would both be mounted as %s", prev, abs, rel)
		}
		byPath[rel] = abs
		return nil
	}
	cfgAbs, err := filepath.Abs(cfg.Path)
	if err != nil {
		return nil, err
	}
	byPath["stencil.yaml"] = cfgAbs
	for _, f := range cfg.Files() {
		files := []string{f.Path}
		if f.Chart {
			if files, err = snapshot.ChartFiles(f.Path); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", cfg.Path, f.Field, err)
			}
		}
		for _, file := range files {
			if err := add(file); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", cfg.Path, f.Field, err)
			}
		}
	}
	out := make([]configFile, 0, len(byPath))
	for _, p := range slices.Sorted(maps.Keys(byPath)) {
		data, err := os.ReadFile(byPath[p])
		if err != nil {
			return nil, err
		}
		out = append(out, configFile{path: p, data: data})
	}
	return out, nil
}

// outside says whether a relative path climbs out of its base.
func outside(rel string) bool {
	return rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel)
}

// configMap is one ConfigMap of the config tree and the volume items that
// map its keys back to paths.
type configMap struct {
	object *corev1.ConfigMap
	items  []corev1.KeyToPath
	size   int
}

// packConfigMaps puts files into ConfigMaps stencil-config-0, -1, ... in
// path order, each under configMapBudget, and refuses what does not fit.
func packConfigMaps(files []configFile, namespace string) ([]*configMap, error) {
	var cms []*configMap
	keys := map[string]bool{}
	total := 0
	for _, f := range files {
		key := configKey(f.path, keys)
		size := len(key) + encodedSize(f.data)
		total += size
		if size > configMapBudget {
			return nil, fmt.Errorf("%s is %s (encoded), more than the %s one ConfigMap holds here (kubectl apply copies it into an annotation of at most 256 KiB): %s",
				f.path, kib(size), kib(configMapBudget), imageRoute)
		}
		if len(cms) == 0 || cms[len(cms)-1].size+size > configMapBudget {
			cms = append(cms, &configMap{object: &corev1.ConfigMap{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
				ObjectMeta: objectMeta(fmt.Sprintf("stencil-config-%d", len(cms)), namespace),
			}})
		}
		cm := cms[len(cms)-1]
		cm.size += size
		cm.items = append(cm.items, corev1.KeyToPath{Key: key, Path: f.path})
		if utf8.Valid(f.data) {
			if cm.object.Data == nil {
				cm.object.Data = map[string]string{}
			}
			cm.object.Data[key] = string(f.data)
		} else {
			if cm.object.BinaryData == nil {
				cm.object.BinaryData = map[string][]byte{}
			}
			cm.object.BinaryData[key] = f.data
		}
	}
	if len(cms) > maxConfigMaps {
		return nil, fmt.Errorf("the config and its %d files are %s (encoded), more than %d ConfigMaps of %s: %s",
			len(files), kib(total), maxConfigMaps, kib(configMapBudget), imageRoute)
	}
	return cms, nil
}

// configKey returns a ConfigMap key for path, unique among keys: a key
// cannot hold "/" (nor most other characters), so each such character is
// "_"; a key longer than the API server takes keeps its end and a hash of
// the whole path in its place; a key taken already gets a numbered suffix.
func configKey(p string, keys map[string]bool) string {
	key := []byte(p)
	for i, c := range key {
		if !(c == '-' || c == '.' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			key[i] = '_'
		}
	}
	if key[0] == '.' && len(key) > 1 && key[1] == '.' {
		key[0] = '_' // a key may not start with ".."
	}
	// Room for the hash, and for a numbered suffix.
	if len(key) > validation.DNS1123SubdomainMaxLength-8 {
		sum := sha256.Sum256([]byte(p))
		tail := key[len(key)-(validation.DNS1123SubdomainMaxLength-8-17):]
		key = append([]byte(hex.EncodeToString(sum[:8])+"-"), tail...)
	}
	k := string(key)
	for n := 2; keys[k] || k == "." || k == ".."; n++ {
		k = fmt.Sprintf("%s-%d", key, n)
	}
	keys[k] = true
	return k
}

// encodedSize is the size of data as a ConfigMap value in JSON: escaped
// text, or base64 for binaryData.
func encodedSize(data []byte) int {
	if !utf8.Valid(data) {
		return base64.StdEncoding.EncodedLen(len(data)) + 2
	}
	js, _ := json.Marshal(string(data))
	return len(js)
}

// kib prints a size in KiB.
func kib(n int) string { return fmt.Sprintf("%.1f KiB", float64(n)/1024) }

// labels are the labels of every object, with extra.
func labels(extra map[string]string) map[string]string {
	l := map[string]string{"app.kubernetes.io/name": "stencil", "app.kubernetes.io/part-of": "stencil"}
	for k, v := range extra {
		l[k] = v
	}
	return l
}

// podLabels select stencil's pods.
func podLabels() map[string]string {
	return map[string]string{"app.kubernetes.io/name": "stencil", "app.kubernetes.io/instance": "stencil"}
}

func objectMeta(name, namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels(nil)}
}

func namespaceObject(name string) *corev1.Namespace {
	m := objectMeta(name, "")
	// stencil's own pods meet the restricted Pod Security Standard.
	m.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	return &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: m}
}

func serviceAccount(namespace string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: objectMeta("stencil", namespace)}
}

func clusterRoleBinding(namespace string) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: objectMeta("stencil", ""),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "stencil"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "stencil", Namespace: namespace}},
	}
}

// roleBinding binds the Lease Role: the Leases live in stencil's own
// namespace, so a Role there, not a ClusterRole rule over every namespace.
func roleBinding(namespace string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: objectMeta("stencil-leader-election", namespace),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "stencil-leader-election"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "stencil", Namespace: namespace}},
	}
}

// metricsService is headless: it exists so that a ServiceMonitor finds
// every pod's metrics port, the leader's and the standby's.
func metricsService(namespace string) *corev1.Service {
	m := objectMeta("stencil-metrics", namespace)
	m.Labels["app.kubernetes.io/component"] = "metrics"
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: m,
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  podLabels(),
			Ports: []corev1.ServicePort{{Name: "metrics", Port: 8080, TargetPort: intstr.FromString("metrics"),
				Protocol: corev1.ProtocolTCP}},
		},
	}
}

// podDisruptionBudget keeps one replica through a drain: the standby of
// two under leader election, or all but one member of a ring (whose share
// moves to the others once it has left).
func podDisruptionBudget(o Options) *policyv1.PodDisruptionBudget {
	spec := policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: podLabels()}}
	if o.Ring > 0 {
		spec.MaxUnavailable = ptr.To(intstr.FromInt32(1))
	} else {
		spec.MinAvailable = ptr.To(intstr.FromInt32(1))
	}
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: objectMeta("stencil", o.Namespace),
		Spec:       spec,
	}
}

// deployment runs stencil: two replicas under leader election (one works,
// the other takes over within the lease duration), or a ring of o.Ring.
// The config's ConfigMaps are one projected volume at configDir; stencil
// polls its config, so a ConfigMap change is served without a restart once
// the kubelet has synced the volume (about a minute).
func deployment(o Options, cms []*configMap) *appsv1.Deployment {
	replicas := int32(2)
	args := []string{"run", "--config=" + configDir + "/stencil.yaml"}
	if o.Ring > 0 {
		replicas = int32(o.Ring)
		args = append(args, "--ring=stencil")
	} else {
		args = append(args, "--leader-elect", "--leader-elect-id=stencil")
	}
	if o.Role.ManageCRDs {
		args = append(args, "--manage-crds")
	}
	if o.Role.MetricsSecure {
		args = append(args, "--metrics-secure")
	}
	if id := o.DefaultIdentity; id != nil {
		args = append(args, "--default-identity=tenant:"+id.Tenant)
	}
	args = append(args, "--metrics-bind-address=:8080", "--health-probe-bind-address=:8081")
	var sources []corev1.VolumeProjection
	for _, cm := range cms {
		sources = append(sources, corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: cm.object.Name}, Items: cm.items}})
	}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: objectMeta("stencil", o.Namespace),
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: podLabels()},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels(podLabels())},
				Spec: corev1.PodSpec{
					ServiceAccountName:            "stencil",
					AutomountServiceAccountToken:  ptr.To(true),
					TerminationGracePeriodSeconds: ptr.To(int64(30)),
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(65532)),
						RunAsGroup: ptr.To(int64(65532)), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Containers: []corev1.Container{container(o.Image, args)},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
						Projected: &corev1.ProjectedVolumeSource{Sources: sources}}}},
				},
			},
		},
	}
}

// container is stencil's container: probes, resources and a restricted
// security context.
func container(image string, args []string) corev1.Container {
	probe := func(path string, period int32) *corev1.Probe {
		return &corev1.Probe{PeriodSeconds: period, ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("health")}}}
	}
	return corev1.Container{
		Name:            "stencil",
		Image:           image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Args:            args,
		Env: []corev1.EnvVar{
			{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
			// The Go runtime collects harder as the heap nears the memory
			// limit instead of letting the kernel kill the process.
			{Name: "GOMEMLIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}}},
		},
		Ports:          []corev1.ContainerPort{{Name: "metrics", ContainerPort: 8080}, {Name: "health", ContainerPort: 8081}},
		LivenessProbe:  probe("/healthz", 10),
		ReadinessProbe: probe("/readyz", 5),
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
		},
		SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
		VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: configDir, ReadOnly: true}},
	}
}

// monitoringObject reads an embedded file of deploy/monitoring into
// stencil's namespace.
func monitoringObject(name, namespace string) (map[string]any, error) {
	data, err := monitoringFiles.ReadFile(path.Join("monitoring", name))
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := yaml.Unmarshal(data, &obj); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		return nil, fmt.Errorf("%s: no metadata", name)
	}
	meta["namespace"] = namespace
	l := map[string]any{}
	for k, v := range labels(nil) {
		l[k] = v
	}
	meta["labels"] = l
	return obj, nil
}

// plainObject is a typed obj as JSON would have it, without what the
// zero values of its Go types add: status, null creationTimestamps, empty
// mappings (spec: {}, strategy: {}) and a zero divisor. Objects already
// plain (the CRDs, whose empty mappings mean something) pass unchanged.
func plainObject(obj any) (map[string]any, error) {
	if m, ok := obj.(map[string]any); ok {
		return m, nil
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	dropZeroes(m)
	return m, nil
}

// dropZeroes removes, under m, every null creationTimestamp, "0" divisor
// and mapping left empty.
func dropZeroes(m map[string]any) {
	for k, v := range m {
		switch v := v.(type) {
		case nil:
			if k == "creationTimestamp" {
				delete(m, k)
			}
		case string:
			if k == "divisor" && v == "0" {
				delete(m, k)
			}
		case map[string]any:
			dropZeroes(v)
			if len(v) == 0 {
				delete(m, k)
			}
		case []any:
			for _, e := range v {
				if e, ok := e.(map[string]any); ok {
					dropZeroes(e)
				}
			}
		}
	}
}
