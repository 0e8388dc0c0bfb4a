//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// floor is the baseline of BenchmarkConverge: a hand-written client-go
// controller for WebApps that does exactly the minimum, 2 server-side
// applies (a Deployment and a Service) and 1 status patch (Ready, once
// kstatus says the Deployment is Current, stencil's rule) per resource, with
// the same workers and client
// limits as stencil. It has no templates, drift detection, pruning,
// conflict checks or events: it is the floor stencil is measured against,
// not a controller to copy.
type floor struct {
	dyn     dynamic.Interface
	ns      string
	queue   workqueue.TypedRateLimitingInterface[string]
	webapps cache.SharedIndexInformer
	deploys cache.SharedIndexInformer

	mu      sync.Mutex
	applied map[string]bool // children applied, by WebApp name
}

func newFloor(cfg *rest.Config, ns string) *floor {
	dyn := dynamic.NewForConfigOrDie(cfg)
	f := &floor{dyn: dyn, ns: ns, applied: map[string]bool{},
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, ns, nil)
	f.webapps = factory.ForResource(webapps).Informer()
	f.deploys = factory.ForResource(deployments).Informer()
	enqueue := func(obj any) {
		if m, err := meta.Accessor(obj); err == nil {
			f.queue.Add(m.GetName())
		}
	}
	_, _ = f.webapps.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }})
	_, _ = f.deploys.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }})
	return f
}

// run runs the floor with workers until ctx ends.
func (f *floor) run(ctx context.Context, workers int) {
	go f.webapps.RunWithContext(ctx)
	go f.deploys.RunWithContext(ctx)
	cache.WaitForCacheSync(ctx.Done(), f.webapps.HasSynced, f.deploys.HasSynced)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				name, quit := f.queue.Get()
				if quit {
					return
				}
				if err := f.sync(ctx, name); err != nil {
					f.queue.AddRateLimited(name)
				} else {
					f.queue.Forget(name)
				}
				f.queue.Done(name)
			}
		})
	}
	<-ctx.Done()
	f.queue.ShutDown()
	wg.Wait()
}

func (f *floor) sync(ctx context.Context, name string) error {
	obj, ok, err := f.webapps.GetIndexer().GetByKey(f.ns + "/" + name)
	if err != nil || !ok {
		return err
	}
	wa := obj.(*unstructured.Unstructured)
	if isReady(wa) {
		return nil
	}
	f.mu.Lock()
	done := f.applied[name]
	f.mu.Unlock()
	if !done {
		ref := map[string]any{"apiVersion": wa.GetAPIVersion(), "kind": wa.GetKind(), "name": name,
			"uid": string(wa.GetUID()), "controller": true, "blockOwnerDeletion": true}
		labels := map[string]any{"app.kubernetes.io/name": "webapp", "app.kubernetes.io/instance": name}
		image, _, _ := unstructured.NestedString(wa.Object, "spec", "image")
		for _, child := range []*unstructured.Unstructured{
			{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
				"metadata": map[string]any{"name": name, "namespace": f.ns, "labels": labels, "ownerReferences": []any{ref}},
				"spec": map[string]any{"replicas": int64(1), "selector": map[string]any{"matchLabels": labels},
					"template": map[string]any{"metadata": map[string]any{"labels": labels},
						"spec": map[string]any{"containers": []any{map[string]any{"name": "web", "image": image,
							"ports": []any{map[string]any{"name": "http", "containerPort": int64(8080), "protocol": "TCP"}}}}}}}}},
			{Object: map[string]any{"apiVersion": "v1", "kind": "Service",
				"metadata": map[string]any{"name": name, "namespace": f.ns, "labels": labels, "ownerReferences": []any{ref}},
				"spec": map[string]any{"selector": labels,
					"ports": []any{map[string]any{"name": "http", "port": int64(8080), "targetPort": "http", "protocol": "TCP"}}}}},
		} {
			res := deployments
			if child.GetKind() == "Service" {
				res = services
			}
			if _, err := f.dyn.Resource(res).Namespace(f.ns).Apply(ctx, name, child, metav1.ApplyOptions{FieldManager: "floor", Force: true}); err != nil {
				return err
			}
		}
		f.mu.Lock()
		f.applied[name] = true
		f.mu.Unlock()
	}
	dobj, ok, err := f.deploys.GetIndexer().GetByKey(f.ns + "/" + name)
	if err != nil || !ok {
		return err
	}
	// Ready by the same rule as stencil's, kstatus (Flux's and Helm's):
	// a Deployment is Current once its rollout is complete (Progressing
	// with NewReplicaSetAvailable), which comes one Deployment status
	// update after it is first available.
	res, err := status.Compute(dobj.(*unstructured.Unstructured))
	if err != nil || res.Status != status.CurrentStatus {
		return err // the Deployment's next event comes back here
	}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{
		"observedGeneration": wa.GetGeneration(),
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "AllChildrenReady",
			"message": "all children ready", "observedGeneration": wa.GetGeneration(),
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}},
	}})
	_, err = f.dyn.Resource(webapps).Namespace(f.ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("status of %s: %w", name, err)
	}
	return nil
}
