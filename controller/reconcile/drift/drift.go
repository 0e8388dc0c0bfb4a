// Package drift decides whether a live child needs an apply, from what the
// API server records rather than from its values.
//
// Comparing rendered values with stored ones cannot work: the server
// normalises what it stores (cpu: 1 becomes "1", 0.5 becomes "500m", false
// and "" may be dropped, defaults are filled in, a mutating webhook may
// rewrite a field), so a value comparison sees drift that is not there and
// writes forever, and it misses drift that is (an element appended to an
// atomic list such as args). Two records answer the question instead:
//
//   - The applied-hash annotation says whether the template output changed
//     since stencil last applied it.
//   - Server-side apply's field ownership (metadata.managedFields) says
//     whether someone else changed a field stencil sets: a field another
//     manager changes, or removes, leaves stencil's Apply entry. An object
//     whose stencil entry still holds every field the render sets is exactly
//     what stencil last applied, whatever the server made of the values.
//
// The choice a newcomer may question: the walk is schema-free on purpose.
// The desired object's fields are matched
// against stencil's field set as the server wrote it, with the server's own
// schema (list keys, atomic lists) already applied. A list element matches a
// keyed entry (k:{...}) when every key field the render sets has the same
// value; key fields the server defaulted (a Service port's protocol) match
// anything. A list with no keyed entries in the set is atomic: stencil owns
// it whole, so its presence is enough, and an element someone appends moves
// the whole list to them. An element another manager adds to a keyed list
// (env, ports, volumes) is in their entry, not stencil's, and is not drift.
//
// What ownership cannot tell, a field of the render that no manager holds
// (the server dropped it, or someone deleted it), is asked of the server
// itself with a dry-run apply (the reconcile package's serverAgrees).
//
// Its tests live in package reconcile (drift_test.go): they run against the
// API server's own field manager (serverform_test.go), which the
// reconciler's tests share.
package drift

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"stencil.dev/stencil/contract"
)

// Kind says why a child needs an apply.
type Kind int

const (
	// InSync: stencil's entry holds every field of the render.
	InSync Kind = iota
	// TemplateChanged: the render differs from what stencil last applied.
	TemplateChanged
	// TakenOver: another field manager holds a field the render sets.
	TakenOver
	// Unowned: a field of the render is held by no manager at all.
	Unowned
)

// Verdict is the verdict on one live child.
type Verdict struct {
	// Kind says whether, and why, the child needs an apply.
	Kind Kind
	// Path is the first field of the render stencil does not hold.
	Path string
	// Manager holds Path, for TakenOver.
	Manager string
}

// Detect compares the live child with the render want, whose hash is
// hash, through the applied-hash annotation and stencil's managed fields.
func Detect(live, want *unstructured.Unstructured, hash string) Verdict {
	entries := ManagedFields(live)
	mine := FieldSet(entries, func(e metav1.ManagedFieldsEntry) bool { return isStencilApply(e) })
	if live.GetAnnotations()[contract.AnnotationAppliedHash] != hash {
		hashPath := []string{"f:metadata", "f:annotations", "f:" + contract.AnnotationAppliedHash}
		if hasPath(mine, hashPath) {
			return Verdict{Kind: TemplateChanged}
		}
		// Someone else rewrote or removed stencil's hash: that is drift in
		// a field stencil sets, not a template change, and goes through
		// the fight limiter like any other.
		return ownerOf(entries, "metadata.annotations."+contract.AnnotationAppliedHash, hashPath)
	}
	path, where := missingField(want.Object, mine, nil, true)
	if path == nil {
		return Verdict{Kind: InSync}
	}
	return ownerOf(entries, where, path)
}

// ownerOf names the other manager that holds path, if any.
func ownerOf(entries []metav1.ManagedFieldsEntry, where string, path []string) Verdict {
	var managers []string
	for _, e := range entries {
		if isStencilApply(e) {
			continue
		}
		if hasPath(FieldSet([]metav1.ManagedFieldsEntry{e}, func(metav1.ManagedFieldsEntry) bool { return true }), path) {
			managers = append(managers, e.Manager)
		}
	}
	if len(managers) == 0 {
		return Verdict{Kind: Unowned, Path: where}
	}
	sort.Strings(managers)
	return Verdict{Kind: TakenOver, Path: where, Manager: strings.Join(managers, ", ")}
}

func isStencilApply(e metav1.ManagedFieldsEntry) bool {
	return e.Manager == contract.FieldManager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == ""
}

// FieldSet decodes the FieldsV1 of the entries that keep selects, merged.
// An entry that does not decode counts as empty: it can only make stencil
// apply once more, never skip a needed write.
func FieldSet(entries []metav1.ManagedFieldsEntry, keep func(metav1.ManagedFieldsEntry) bool) map[string]any {
	set := map[string]any{}
	for _, e := range entries {
		if !keep(e) || e.FieldsV1 == nil {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(e.FieldsV1.Raw, &m); err == nil {
			mergeSets(set, m)
		}
	}
	return set
}

func mergeSets(dst, src map[string]any) {
	for k, v := range src {
		sv, _ := v.(map[string]any)
		dv, ok := dst[k].(map[string]any)
		if !ok {
			dv = map[string]any{}
			dst[k] = dv
		}
		mergeSets(dv, sv)
	}
}

// hasPath reports whether set holds the path of FieldsV1 keys.
func hasPath(set map[string]any, path []string) bool {
	node := set
	for _, p := range path {
		next, ok := node[p].(map[string]any)
		if !ok {
			return false
		}
		node = next
	}
	return true
}

// skippedTopLevel are fields of a render that never appear in a field set:
// the type, the identity, and status (not applied by stencil).
var skippedTopLevel = map[string]bool{"apiVersion": true, "kind": true, "status": true}

// missingField walks want and returns the FieldsV1 path (and a readable
// field path) of the first field set holds no entry for, or nil.
func missingField(want any, set map[string]any, at []string, top bool) ([]string, string) {
	if len(set) == 0 && !top {
		// A leaf of the set: stencil owns this field whole (a scalar, an
		// atomic list, or an atomic struct such as a label selector or an
		// owner reference), whatever it holds.
		return nil, ""
	}
	switch w := want.(type) {
	case map[string]any:
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := w[k]
			if skipField(v) || (top && skippedTopLevel[k]) {
				continue
			}
			if top && k == "metadata" {
				if p, where := missingMetadata(v, set); p != nil {
					return p, where
				}
				continue
			}
			path := append(append([]string{}, at...), "f:"+k)
			child, ok := set["f:"+k].(map[string]any)
			if !ok {
				return path, readable(path)
			}
			if p, where := missingField(v, child, path, false); p != nil {
				return p, where
			}
		}
	case []any:
		if !isGranular(set) {
			// Not a keyed list or set, yet not a leaf: nothing to match
			// elements against, so presence is all there is to check.
			return nil, ""
		}
		for i, elem := range w {
			if skipField(elem) {
				continue
			}
			key, child := matchElement(elem, set)
			if child == nil {
				path := append(append([]string{}, at...), fmt.Sprintf("[%d]", i))
				return path, readable(path)
			}
			path := append(append([]string{}, at...), key)
			if p, where := missingField(elem, child, path, false); p != nil {
				return p, where
			}
		}
	}
	return nil, ""
}

// missingMetadata checks the metadata fields stencil sets (labels,
// annotations, owner references); name and namespace identify the object
// and are not in any field set.
func missingMetadata(v any, set map[string]any) ([]string, string) {
	md, _ := v.(map[string]any)
	meta, ok := set["f:metadata"].(map[string]any)
	if !ok {
		meta = map[string]any{}
	}
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch k {
		case "name", "namespace", "generateName", "uid", "resourceVersion", "creationTimestamp", "managedFields":
			continue
		}
		if skipField(md[k]) {
			continue
		}
		path := []string{"f:metadata", "f:" + k}
		child, ok := meta["f:"+k].(map[string]any)
		if !ok {
			return path, readable(path)
		}
		if p, where := missingField(md[k], child, path, false); p != nil {
			return p, where
		}
	}
	return nil, ""
}

// skipField: a null asks the server to remove a field, and an empty map or
// list carries nothing the server must keep, so neither is owned.
func skipField(v any) bool {
	return v == nil || isEmptyCollection(v)
}

func isEmptyCollection(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}

// isGranular reports whether a list's node in the field set has per-element
// entries (a keyed list or a set); otherwise the list is atomic.
func isGranular(set map[string]any) bool {
	for k := range set {
		if strings.HasPrefix(k, "k:") || strings.HasPrefix(k, "v:") || strings.HasPrefix(k, "i:") {
			return true
		}
	}
	return false
}

// matchElement finds the entry of the list node set that holds elem: a
// k:{...} entry whose key fields elem agrees with (key fields elem does not
// set were defaulted by the server), or a v:<value> entry for a scalar.
func matchElement(elem any, set map[string]any) (string, map[string]any) {
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	switch e := elem.(type) {
	case map[string]any:
		for _, k := range keys {
			if !strings.HasPrefix(k, "k:") {
				continue
			}
			var fields map[string]any
			if json.Unmarshal([]byte(k[2:]), &fields) != nil {
				continue
			}
			if keyMatches(fields, e) {
				child, _ := set[k].(map[string]any)
				if child == nil {
					child = map[string]any{}
				}
				return k, child
			}
		}
	default:
		data, err := json.Marshal(e)
		if err != nil {
			return "", nil
		}
		for _, k := range keys {
			if !strings.HasPrefix(k, "v:") {
				continue
			}
			var v any
			if json.Unmarshal([]byte(k[2:]), &v) == nil && scalarEqual(v, e) {
				return k, map[string]any{}
			}
		}
		if child, ok := set["v:"+string(data)].(map[string]any); ok {
			return "v:" + string(data), child
		}
	}
	return "", nil
}

// keyMatches reports whether elem agrees with every key field it sets, and
// sets at least one.
func keyMatches(key, elem map[string]any) bool {
	matched := 0
	for f, kv := range key {
		ev, ok := elem[f]
		if !ok {
			continue
		}
		if !scalarEqual(kv, ev) {
			return false
		}
		matched++
	}
	return matched > 0
}

// scalarEqual compares scalars, treating numbers of any Go type as equal
// when they hold the same value (JSON decoding picks float64, renders int64).
func scalarEqual(a, b any) bool {
	if fa, ok := toFloat(a); ok {
		fb, ok := toFloat(b)
		return ok && fa == fb
	}
	return a == b
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// readable turns FieldsV1 keys into a field path for messages:
// spec.template.spec.containers[name=web].image.
func readable(path []string) string {
	var b strings.Builder
	for _, p := range path {
		switch {
		case strings.HasPrefix(p, "f:"):
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p[2:])
		case strings.HasPrefix(p, "k:"):
			var fields map[string]any
			_ = json.Unmarshal([]byte(p[2:]), &fields)
			names := make([]string, 0, len(fields))
			for f, v := range fields {
				names = append(names, fmt.Sprintf("%s=%v", f, v))
			}
			sort.Strings(names)
			b.WriteString("[" + strings.Join(names, ",") + "]")
		case strings.HasPrefix(p, "v:"):
			b.WriteString("[" + p[2:] + "]")
		default:
			b.WriteString(p)
		}
	}
	return b.String()
}

// String names the drift kind for logs.
func (k Kind) String() string {
	switch k {
	case InSync:
		return "none"
	case TemplateChanged:
		return "TemplateChanged"
	case TakenOver:
		return "TakenOver"
	default:
		return "Unowned"
	}
}

// FightMessage says which field of which child keeps being reverted, and by
// whom when managedFields name the writer.
func FightMessage(want *unstructured.Unstructured, d Verdict) string {
	who := "removed by a writer that left no field manager entry"
	if d.Manager != "" {
		who = "now held by field manager " + d.Manager
	}
	return fmt.Sprintf("%s/%s: field %s, which stencil sets, keeps being changed (%s)",
		want.GetKind(), want.GetName(), d.Path, who)
}

// StampHash sets the applied-hash annotation on want to a hash of want
// without it. JSON encoding of maps sorts keys, so the hash is stable.
func StampHash(want *unstructured.Unstructured) (string, error) {
	annotations := want.GetAnnotations()
	delete(annotations, contract.AnnotationAppliedHash)
	if len(annotations) == 0 {
		unstructured.RemoveNestedField(want.Object, "metadata", "annotations")
	} else {
		want.SetAnnotations(annotations)
	}
	data, err := json.Marshal(want.Object)
	if err != nil {
		return "", fmt.Errorf("encoding %s/%s: %w", want.GetKind(), want.GetName(), err)
	}
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:8])
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[contract.AnnotationAppliedHash] = hash
	want.SetAnnotations(annotations)
	return hash, nil
}

// StampRevision sets the template revision annotation on want, for an
// entry whose status cannot hold the revision (revisionOnChildren).
func StampRevision(want *unstructured.Unstructured, revision string) {
	annotations := want.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[contract.AnnotationTemplateRevision] = revision
	want.SetAnnotations(annotations)
}

// LegacyHash returns the hash live's applied-hash annotation must equal for
// want, stamped hash, to be unchanged. A live child may carry the template
// revision annotation, covered by its hash, where the render does not
// stamp it (a stencil that stamped every child wrote it). Hashed with the
// child's annotation put back, the render is unchanged when only the
// annotation differs: the child is not written for it, and loses the
// annotation the next time it is written anyway.
func LegacyHash(live, want *unstructured.Unstructured, hash string) string {
	liveHash := live.GetAnnotations()[contract.AnnotationAppliedHash]
	rev, ok := live.GetAnnotations()[contract.AnnotationTemplateRevision]
	if liveHash == hash || !ok {
		return hash
	}
	if _, stamped := want.GetAnnotations()[contract.AnnotationTemplateRevision]; stamped {
		return hash
	}
	old := want.DeepCopy()
	StampRevision(old, rev)
	if h, err := StampHash(old); err == nil && h == liveHash {
		return h
	}
	return hash
}

// Current reports whether live already is want's render as stencil last
// applied it: it carries the applied hash of want (stamped with revision,
// where the entry stamps the revision on its children). A child about to
// be written is not ready for the templates that depend on it, even if its
// old version is. A live child without the annotation (one stencil did not
// write: a file given to stencil render --observed) counts as current.
func Current(want, live *unstructured.Unstructured, revision string) bool {
	have, ok := live.GetAnnotations()[contract.AnnotationAppliedHash]
	if !ok {
		return true
	}
	w := want.DeepCopy()
	if revision != "" {
		StampRevision(w, revision)
	}
	hash, err := StampHash(w)
	return err == nil && have == LegacyHash(live, w, hash)
}
