// Package readview is what a template sees of an object it reads, by
// allowlist: a Secret read without secretData shows its name, namespace,
// labels, type and key names, nothing else; any other read shows the
// object without managedFields and the last-applied annotation.
//
// The choice a newcomer may question: it is its own package, below both
// templates (the copy a render sees) and controller/reads (the read
// informers' transform, before an object enters the cache), so that the
// one allowlist is applied in both places and cannot be written twice.
package readview

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"stencil.dev/stencil/config"
)

// What a read shows, by allowlist (docs/configuration.md, "What a read
// shows"). A Secret read without secretData shows its name, namespace,
// labels, type and key names and nothing else: not its annotations,
// which kubectl apply fills with the whole manifest, password included
// (last-applied-configuration), and which a tenant's own tooling may fill
// with anything; not its owner references or managedFields. Every other
// read, of any kind, shows the object without managedFields and without
// the last-applied annotation, which repeat the object (managedFields its
// field names, last-applied its content) and, on a Secret read with
// secretData, would carry data the read's object no longer has.
//
// Readable is written once and applied twice: by the read informers'
// transform, before an object enters the cache, so that stencil's memory
// never holds what no template may see, and by View, on the copy a
// template sees, so that a view is right whatever cache or file the
// object came from.

// Readable reduces obj, in place, to what a read may show; secretData is
// the read's (it matters only for a core Secret). It keeps
// metadata.resourceVersion, which a template never sees (View drops
// it) but status.reads names a read Secret by, and the cache's informer
// compares; it drops metadata.uid, which nothing that reads needs (the
// cache keys by namespace and name).
func Readable(obj map[string]any, secretData bool) {
	if isSecret(obj) && !secretData {
		keysOnly(obj)
		return
	}
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		return
	}
	delete(md, "managedFields")
	if a, ok := md["annotations"].(map[string]any); ok {
		delete(a, corev1.LastAppliedConfigAnnotation)
		if len(a) == 0 {
			delete(md, "annotations")
		}
	}
}

// keysOnly reduces a Secret to its allowlist: apiVersion, kind, name,
// namespace, labels, resourceVersion (Readable), type, and data with
// every value "" (the key names tell a template which key to reference,
// as secretKeyRef does).
func keysOnly(obj map[string]any) {
	kept := map[string]any{}
	for _, k := range []string{"apiVersion", "kind", "type"} {
		if v, ok := obj[k]; ok {
			kept[k] = v
		}
	}
	if md, ok := obj["metadata"].(map[string]any); ok {
		m := map[string]any{}
		for _, k := range []string{"name", "namespace", "labels", "resourceVersion"} {
			if v, ok := md[k]; ok {
				m[k] = v
			}
		}
		kept["metadata"] = m
	}
	if data, ok := obj["data"].(map[string]any); ok {
		keys := make(map[string]any, len(data))
		for k := range data {
			keys[k] = ""
		}
		kept["data"] = keys
	}
	clear(obj)
	for k, v := range kept {
		obj[k] = v
	}
}

// isSecret reports whether obj is a core Secret.
func isSecret(obj map[string]any) bool {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	return err == nil && gv.Group == "" && kind == "Secret"
}

// View is u as a read's templates see it: a copy, reduced by Readable
// to what rd may show, without resourceVersion (it changes on every
// write, and a render that printed it would change with it), and without
// status when served (a kind stencil serves: its status is stencil's own
// output, and a render that read it would re-render its peers on every
// status patch).
func View(u *unstructured.Unstructured, rd config.Read, served bool) map[string]any {
	out := runtime.DeepCopyJSON(u.Object)
	Readable(out, rd.SecretData)
	if md, ok := out["metadata"].(map[string]any); ok {
		delete(md, "resourceVersion")
	}
	if served {
		delete(out, "status")
	}
	return out
}
