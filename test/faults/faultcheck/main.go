// Command faultcheck checks, from outside stencil, the invariants the fault
// suite (test/faults) demands at the end of every scenario. It reads the
// cluster with the admin kubeconfig, never through stencil's counting proxy,
// so its reads are not counted as stencil's.
//
//	faultcheck wait-ready  --namespace NS --count N [--selector S] [--timeout 300s]
//	faultcheck invariants  --namespace NS --config crds/stencil.yaml [--selector S]
//	                       [--expect NAME=REASON]... [--foreign-rv Kind/name=RV]...
//	                       [--proxy URL --since MS] [--write-ns NS]...
//	faultcheck diff-json   < plan.json
//
// diff-json checks the JSON form of stencil diff against docs/operating.md's
// schema and prints its counts and its changed fields (diffjson.go).
//
// wait-ready polls until N custom resources (of the configured kinds, matching
// the selector) are Ready at their generation, with as many ready replicas as
// desired (no rollout still settling), and prints the Unix milliseconds at
// which it first saw that.
//
// invariants checks, and prints what it checked:
//   - every custom resource matching the selector is Ready=True, with
//     status.observedGeneration and the Ready condition's observedGeneration
//     equal to metadata.generation; each --expect NAME=REASON resource is
//     instead Ready=False with that reason and Stalled=True (Reconciling=True
//     for Progressing);
//   - every child the templates render for it (rendered here, with stencil's
//     own template code, from the resource as stored) exists once, carries
//     the controller ownerReference and the owner-uid label of that UID, and
//     holds every rendered field with the rendered value (extra fields, the
//     API server's defaults, are allowed); the status template's fields are
//     in the status;
//   - no object labelled app.kubernetes.io/managed-by=stencil is left over:
//     each belongs to a current resource that renders it (no orphan, no
//     stray);
//   - every object labelled faults.stencil.dev/foreign=true carries no
//     stencil field manager, and those given with --foreign-rv still have
//     that resourceVersion;
//   - with --proxy, every write stencil made since MS stayed in NS (or a
//     --write-ns) and named none of the foreign objects.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"stencil.dev/stencil/contract"
	"stencil.dev/stencil/controller/reload"
	"stencil.dev/stencil/templates"
	"stencil.dev/stencil/templates/view"
)

const labelForeign = "faults.stencil.dev/foreign"

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: faultcheck wait-ready|invariants|diff-json [flags]")
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	if cmd == "diff-json" {
		if err := checkDiffJSON(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "faultcheck:", err)
			os.Exit(1)
		}
		return
	}
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "admin kubeconfig")
	config := fs.String("config", "crds/stencil.yaml", "stencil config: which resources, which templates")
	namespace := fs.String("namespace", "", "namespace of the workload")
	selector := fs.String("selector", "", "label selector of the custom resources that must be Ready")
	count := fs.Int("count", 0, "wait-ready: how many must be Ready")
	timeout := fs.Duration("timeout", 300*time.Second, "wait-ready: how long to wait")
	proxy := fs.String("proxy", "", "invariants: countproxy base URL, to check where stencil wrote")
	since := fs.Int64("since", 0, "invariants: check writes from this Unix millisecond on")
	var expect, foreignRV, writeNS multi
	fs.Var(&expect, "expect", "NAME=REASON: this resource must be Ready=False with REASON and Stalled (Reconciling for Progressing) (repeatable)")
	fs.Var(&foreignRV, "foreign-rv", "Kind/name=RV: this foreign object must still have resourceVersion RV (repeatable)")
	fs.Var(&writeNS, "write-ns", "invariants: another namespace stencil may write in (repeatable)")
	_ = fs.Parse(args)
	if *namespace == "" {
		fmt.Fprintln(os.Stderr, "faultcheck: --namespace is required")
		os.Exit(2)
	}
	c, err := newChecker(*kubeconfig, *config, *namespace)
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultcheck:", err)
		os.Exit(1)
	}
	ctx := context.Background()
	switch cmd {
	case "wait-ready":
		err = c.waitReady(ctx, *selector, *count, *timeout)
	case "invariants":
		err = c.invariants(ctx, *selector, expect, foreignRV, *proxy, *since, writeNS)
	default:
		err = fmt.Errorf("unknown command %q", cmd)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultcheck:", err)
		os.Exit(1)
	}
}

type entry struct {
	res schema.GroupVersionResource
	set *templates.Set
}

type checker struct {
	dyn     dynamic.Interface
	ns      string
	entries []entry
	// children maps each child kind the templates may render to its resource.
	children map[schema.GroupVersionKind]schema.GroupVersionResource
}

func newChecker(kubeconfig, config, ns string) (*checker, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = 100, 200
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	cfg, sets, err := reload.Load(config)
	if err != nil {
		return nil, err
	}
	disco, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	c := &checker{dyn: dyn, ns: ns, children: map[schema.GroupVersionKind]schema.GroupVersionResource{}}
	for i, r := range cfg.Resources {
		c.entries = append(c.entries, entry{res: r.GVR(), set: sets[i]})
		for _, k := range sets[i].Kinds() {
			m, err := mapper.RESTMapping(k.GroupKind(), k.Version)
			if err != nil {
				return nil, fmt.Errorf("child kind %s: %w", k, err)
			}
			c.children[k] = m.Resource
		}
	}
	return c, nil
}

// readyAtGeneration says why u is not Ready at its generation, or "".
func readyAtGeneration(u *unstructured.Unstructured) string {
	gen := u.GetGeneration()
	og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	cond := condition(u, "Ready")
	switch {
	case cond == nil:
		return "no Ready condition"
	case cond["status"] != "True":
		return fmt.Sprintf("Ready=%v %v: %v", cond["status"], cond["reason"], cond["message"])
	case og != gen:
		return fmt.Sprintf("status.observedGeneration %d, generation %d", og, gen)
	case fmt.Sprint(cond["observedGeneration"]) != fmt.Sprint(gen):
		return fmt.Sprintf("Ready observedGeneration %v, generation %d", cond["observedGeneration"], gen)
	}
	// Settled too: a rollout is Ready once the new pods are, while the old
	// ones still terminate; their going changes readyReplicas once more.
	replicas, _, _ := unstructured.NestedInt64(u.Object, "status", "replicas")
	ready, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
	if ready != replicas {
		return fmt.Sprintf("readyReplicas %d, replicas %d (a rollout still settling)", ready, replicas)
	}
	return ""
}

func condition(u *unstructured.Unstructured, t string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == t {
			return m
		}
	}
	return nil
}

// parents lists the custom resources of every configured kind in the namespace.
func (c *checker) parents(ctx context.Context, selector string) ([]entry, [][]unstructured.Unstructured, error) {
	var out [][]unstructured.Unstructured
	for _, e := range c.entries {
		l, err := c.dyn.Resource(e.res).Namespace(c.ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return nil, nil, err
		}
		out = append(out, l.Items)
	}
	return c.entries, out, nil
}

func (c *checker) waitReady(ctx context.Context, selector string, want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		_, lists, err := c.parents(ctx, selector)
		var notReady []string
		total := 0
		if err == nil {
			for _, l := range lists {
				for i := range l {
					total++
					if why := readyAtGeneration(&l[i]); why != "" {
						notReady = append(notReady, l[i].GetName()+": "+why)
					}
				}
			}
			if total >= want && len(notReady) == 0 {
				fmt.Println(time.Now().UnixMilli())
				return nil
			}
		}
		if time.Now().After(deadline) {
			sort.Strings(notReady)
			if len(notReady) > 5 {
				notReady = append(notReady[:5], fmt.Sprintf("... and %d more", len(notReady)-5))
			}
			return fmt.Errorf("after %s: %d of %d custom resources Ready at their generation (want %d); last error %v; not ready: %s",
				timeout, total-len(notReady), total, want, err, strings.Join(notReady, "; "))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// contains reports where live lacks a field of want, or holds another value.
func contains(live, want any, path string) []string {
	switch w := want.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: live is %T, want a mapping", path, live)}
		}
		var out []string
		for _, k := range sortedKeys(w) {
			lv, ok := l[k]
			if !ok {
				out = append(out, fmt.Sprintf("%s.%s: missing", path, k))
				continue
			}
			out = append(out, contains(lv, w[k], path+"."+k)...)
		}
		return out
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(w) {
			return []string{fmt.Sprintf("%s: live %v, want %d items", path, live, len(w))}
		}
		var out []string
		for i := range w {
			out = append(out, contains(l[i], w[i], fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	default:
		if !scalarEqual(live, want) {
			return []string{fmt.Sprintf("%s: live %v, rendered %v", path, live, want)}
		}
		return nil
	}
}

func scalarEqual(a, b any) bool {
	af, aok := number(a)
	bf, bok := number(b)
	if aok && bok {
		return af == bf
	}
	return fmt.Sprint(a) == fmt.Sprint(b)
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	case int:
		return float64(n), true
	}
	return 0, false
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

type childID struct {
	kind, name string
}

func (c *checker) invariants(ctx context.Context, selector string, expect, foreignRV []string, proxy string, since int64, writeNS []string) error {
	var problems []string
	problem := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	expected := map[string]string{}
	for _, e := range expect {
		name, reason, ok := strings.Cut(e, "=")
		if !ok {
			return fmt.Errorf("--expect %q: want NAME=REASON", e)
		}
		expected[name] = reason
	}

	// Every managed child in the namespace, by kind and name.
	live := map[childID]*unstructured.Unstructured{}
	kinds := make([]schema.GroupVersionKind, 0, len(c.children))
	for k := range c.children {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i].Kind < kinds[j].Kind })
	for _, k := range kinds {
		l, err := c.dyn.Resource(c.children[k]).Namespace(c.ns).List(ctx, metav1.ListOptions{
			LabelSelector: contract.LabelManagedBy + "=" + contract.ManagedByValue})
		if err != nil {
			return err
		}
		for i := range l.Items {
			live[childID{k.Kind, l.Items[i].GetName()}] = &l.Items[i]
		}
	}

	entries, lists, err := c.parents(ctx, "")
	if err != nil {
		return err
	}
	selected, err := labels.Parse(selector)
	if err != nil {
		return err
	}
	uids := map[string]string{} // uid -> Kind/name
	seenExpected := map[string]bool{}
	claimed := map[childID]bool{}
	crs, children, failedSeen := 0, 0, 0
	var failedMessages []string
	for i, e := range entries {
		for j := range lists[i] {
			u := &lists[i][j]
			id := u.GetKind() + "/" + u.GetName()
			uids[string(u.GetUID())] = id
			if reason, ok := expected[u.GetName()]; ok {
				failedSeen++
				seenExpected[u.GetName()] = true
				cond := condition(u, "Ready")
				// A failure waits for a person (Stalled), except Progressing:
				// stencil converges, the cluster cannot (Reconciling).
				progress := "Stalled"
				if reason == "Progressing" {
					progress = "Reconciling"
				}
				other := condition(u, progress)
				switch {
				case cond == nil || cond["status"] != "False" || cond["reason"] != reason:
					problem("%s: want Ready=False %s, got %v", id, reason, cond)
				case other == nil || other["status"] != "True":
					problem("%s: want %s=True, got %v", id, progress, other)
				case fmt.Sprint(cond["observedGeneration"]) != fmt.Sprint(u.GetGeneration()):
					problem("%s: Ready observedGeneration %v, generation %d", id, cond["observedGeneration"], u.GetGeneration())
				default:
					msg := fmt.Sprint(cond["message"])
					if len(msg) > 160 {
						msg = msg[:160] + "..."
					}
					name := u.GetName()
					if len(name) > 40 {
						name = name[:20] + "..." + name[len(name)-10:]
					}
					failedMessages = append(failedMessages, fmt.Sprintf("%s: %s: %s", name, reason, msg))
				}
				// What was rendered for a failed resource is not checked:
				// nothing may be, and a stray child shows below.
				continue
			}
			if !selected.Matches(labels.Set(u.GetLabels())) {
				continue
			}
			crs++
			if why := readyAtGeneration(u); why != "" {
				problem("%s: not Ready at its generation: %s", id, why)
			}
			obj, err := view.NewObject(u, e.res)
			if err != nil {
				problem("%s: %v", id, err)
				continue
			}
			want, err := e.set.Render(obj)
			if err != nil {
				problem("%s: renders with an error: %v", id, err)
				continue
			}
			for _, w := range want {
				cid := childID{w.GetKind(), w.GetName()}
				if claimed[cid] {
					problem("%s %s: rendered by two resources", cid.kind, cid.name)
				}
				claimed[cid] = true
				l, ok := live[cid]
				if !ok {
					problem("%s: child %s/%s is missing", id, cid.kind, cid.name)
					continue
				}
				children++
				ref := metav1.GetControllerOf(l)
				if ref == nil || ref.UID != u.GetUID() || ref.Kind != u.GetKind() || ref.Name != u.GetName() {
					problem("%s/%s: controller ownerReference %v, want %s uid %s", cid.kind, cid.name, ref, id, u.GetUID())
				}
				if n := len(l.GetOwnerReferences()); n != 1 {
					problem("%s/%s: %d ownerReferences, want 1", cid.kind, cid.name, n)
				}
				for _, d := range contains(l.Object, w.Object, "") {
					problem("%s/%s: not as rendered: %s", cid.kind, cid.name, d)
				}
			}
			extra, err := e.set.RenderStatus(obj)
			if err != nil {
				problem("%s: status template: %v", id, err)
			} else if len(extra) > 0 {
				status, _, _ := unstructured.NestedMap(u.Object, "status")
				for _, d := range contains(status, extra, ".status") {
					problem("%s: status not as rendered: %s", id, d)
				}
			}
		}
	}
	for name := range expected {
		if !seenExpected[name] {
			problem("%s: expected resource not found", name)
		}
	}
	// Orphans and strays: managed objects no current resource renders.
	for cid, l := range live {
		if claimed[cid] {
			continue
		}
		ref := metav1.GetControllerOf(l)
		switch {
		case ref == nil:
			problem("%s/%s: managed by stencil, without a controller ownerReference", cid.kind, cid.name)
		case uids[string(ref.UID)] == "":
			problem("%s/%s: orphan: its owner %s/%s (uid %s) is gone", cid.kind, cid.name, ref.Kind, ref.Name, ref.UID)
		default:
			owner := uids[string(ref.UID)]
			if _, failed := expected[ref.Name]; !failed {
				problem("%s/%s: owned by %s, which does not render it (not pruned)", cid.kind, cid.name, owner)
			}
		}
	}

	// Foreign objects.
	foreign, foreignNames, err := c.foreign(ctx, foreignRV)
	if err != nil {
		return err
	}
	problems = append(problems, foreign...)

	writes := 0
	if proxy != "" {
		var ps []string
		writes, ps, err = checkWrites(proxy, since, append([]string{c.ns}, writeNS...), foreignNames)
		if err != nil {
			return err
		}
		problems = append(problems, ps...)
	}

	if len(problems) > 0 {
		sort.Strings(problems)
		n := len(problems)
		if n > 20 {
			problems = append(problems[:20], fmt.Sprintf("... and %d more", n-20))
		}
		return fmt.Errorf("%d invariant(s) broken:\n  %s", n, strings.Join(problems, "\n  "))
	}
	for _, m := range failedMessages {
		fmt.Println("failed as expected:", m)
	}
	fmt.Printf("checked %d custom resources Ready at their generation, %d children (each once, owned by its resource's UID, as rendered), %d failing as expected, 0 orphans, %d foreign objects untouched",
		crs, children, failedSeen, len(foreignNames))
	if proxy != "" {
		fmt.Printf(", %d writes all in %s", writes, c.ns)
	}
	fmt.Println()
	// The last line, for the suite's figures.
	fmt.Printf("checked %d CRs, %d children, %d expected failures, %d foreign objects, %d writes\n",
		crs, children, failedSeen, len(foreignNames), writes)
	return nil
}

// foreign checks the objects labelled foreign: no stencil field manager, and
// the given resourceVersions unchanged. It returns the problems and the
// foreign objects' names by resource.
func (c *checker) foreign(ctx context.Context, rvs []string) ([]string, map[string]bool, error) {
	want := map[string]string{}
	for _, r := range rvs {
		k, v, ok := strings.Cut(r, "=")
		if !ok {
			return nil, nil, fmt.Errorf("--foreign-rv %q: want Kind/name=RV", r)
		}
		want[k] = v
	}
	var problems []string
	names := map[string]bool{}
	resources := []schema.GroupVersionResource{
		{Group: "apps", Version: "v1", Resource: "deployments"},
		{Version: "v1", Resource: "services"},
		{Version: "v1", Resource: "configmaps"},
	}
	for _, r := range resources {
		l, err := c.dyn.Resource(r).Namespace(c.ns).List(ctx, metav1.ListOptions{LabelSelector: labelForeign + "=true"})
		if err != nil {
			return nil, nil, err
		}
		for i := range l.Items {
			u := &l.Items[i]
			id := u.GetKind() + "/" + u.GetName()
			names[r.Resource+"/"+u.GetName()] = true
			for _, m := range u.GetManagedFields() {
				if m.Manager == contract.FieldManager {
					problems = append(problems, fmt.Sprintf("foreign %s: has fields managed by stencil (%s)", id, m.Operation))
				}
			}
			if rv, ok := want[id]; ok && rv != u.GetResourceVersion() {
				problems = append(problems, fmt.Sprintf("foreign %s: resourceVersion %s, was %s", id, u.GetResourceVersion(), rv))
			}
			delete(want, id)
		}
	}
	for id := range want {
		problems = append(problems, fmt.Sprintf("foreign %s: gone", id))
	}
	return problems, names, nil
}

// checkWrites reads countproxy's write log since the given millisecond: every
// successful write must be in one of the namespaces (the Lease lives in the
// scenario's too) and name no foreign object.
func checkWrites(proxy string, since int64, namespaces []string, foreign map[string]bool) (int, []string, error) {
	allowed := map[string]bool{}
	for _, ns := range namespaces {
		allowed[ns] = true
	}
	resp, err := http.Get(fmt.Sprintf("%s/countproxy/writes?since=%d", strings.TrimSuffix(proxy, "/"), since))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, nil, fmt.Errorf("countproxy: %s", resp.Status)
	}
	var problems []string
	n := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		// ms tag verb resource ns name code dryRun
		f := strings.Fields(sc.Text())
		if len(f) != 8 {
			return 0, nil, fmt.Errorf("countproxy: unexpected line %q", sc.Text())
		}
		if f[7] == "true" || !strings.HasPrefix(f[6], "2") {
			continue
		}
		n++
		resource := strings.SplitN(f[3], "/", 2)[0]
		switch {
		case !allowed[f[4]]:
			problems = append(problems, fmt.Sprintf("write outside %s: %s", strings.Join(namespaces, ", "), sc.Text()))
		case foreign[resource+"/"+f[5]]:
			problems = append(problems, fmt.Sprintf("write to a foreign object: %s", sc.Text()))
		}
	}
	if err := sc.Err(); err != nil {
		return 0, nil, err
	}
	return n, problems, nil
}
