// Package contract names what stencil writes on the objects it owns and
// reads back from them: the labels and annotations on each child, the
// field manager of every write, the status fields and the condition types
// of each custom resource.
//
// The choice a newcomer may question: these names sit in one file of a
// package of their own instead of beside the code that writes each. They
// are stencil's interface to everything outside it: users select children
// with kubectl (-l app.kubernetes.io/managed-by=stencil), kstatus, Argo CD
// and kubectl wait read the conditions, tools written for helm-operator read
// deployedRelease and the Deployed condition, and the annotations let
// stencil read back the children it wrote before a restart or an upgrade.
// Changing any of them breaks someone, so the whole contract is read, and
// reviewed, in one place. The package imports nothing of stencil's, so
// that the pure packages (drift, status) name the contract without pulling
// in the template engine and Helm.
package contract

// Labels stencil stamps on every child, whatever the template wrote.
const (
	// LabelManagedBy marks a child as written by stencil.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = "stencil"
	// LabelOwnerUID holds the UID of the custom resource that owns a child.
	LabelOwnerUID = "stencil.dev/owner-uid"
)

// Annotations stencil writes on children, and reads on custom resources.
const (
	// AnnotationAppliedHash records, on each child, a hash of what stencil
	// last applied. A changed hash means the template output changed
	// (apply, even if only a field was removed); an unchanged hash with
	// different live fields means someone else reverted a field (drift,
	// guarded by the fight limiter).
	AnnotationAppliedHash = "stencil.dev/applied-hash"
	// AnnotationTemplateRevision names the templates that rendered a child
	// of an entry with a rollout. stencil stamps it on each child only
	// where the CRD's status schema would prune StatusTemplateRevision; it
	// also reads it on a child that carries it from a stencil that stamped
	// every child, so that an upgrade rewrites nothing.
	AnnotationTemplateRevision = "stencil.dev/template-revision"
	// AnnotationPaused on a custom resource, set to "true", stops every
	// write for it.
	AnnotationPaused = "stencil.dev/paused"
)

// FieldManager is the server-side apply field manager of every write
// stencil makes, and the source of its events: drift detection reads its
// Apply entry in managedFields.
const FieldManager = "stencil"

// Status fields stencil writes on a custom resource.
const (
	// StatusTemplateRevision is the status field that names the templates
	// a resource of a rollout entry was last rendered with: which
	// resources a rollout has moved is read back from the cluster, once
	// per resource, so a template change writes only the children whose
	// render changed.
	StatusTemplateRevision = "templateRevision"
	// StatusDeployedRelease is the status field helm-operator writes for a
	// chart entry: {name: <release>}. stencil writes the same, so that what
	// reads it keeps working.
	StatusDeployedRelease = "deployedRelease"
	// StatusReads is the status field that lists what the last render of
	// an entry with reads read: apiVersion, kind, namespace, name and
	// resourceVersion of each object (generation for a kind stencil
	// serves), so a user sees why it re-rendered.
	StatusReads = "reads"
)

// ReservedStatusFields are the status fields the controller owns; a status
// template that renders one of them fails instead of fighting the controller.
var ReservedStatusFields = []string{"observedGeneration", "phase", "replicas", "readyReplicas", "conditions", StatusTemplateRevision, StatusReads}

// Condition types stencil writes on a custom resource.
const (
	// ConditionReady is True when every child is ready.
	ConditionReady = "Ready"
	// ConditionReconciling is True while stencil is converging the resource:
	// children not ready yet, or a failure that is being retried. Present
	// only while True, with the Ready condition's reason and message.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True while stencil cannot make progress without a
	// change by a person: a failed render, a child the API server rejects as
	// invalid, a foreign object holding a child's name. Present only while
	// True, with the Ready condition's reason and message.
	ConditionStalled = "Stalled"
	// ConditionThrottled is True while drift corrections are rate-limited
	// because another actor keeps reverting fields stencil sets.
	ConditionThrottled = "Throttled"
	// ConditionDeployed is helm-operator's condition, written for a chart
	// entry: True once the chart's objects were applied. Its value also
	// tells the next render it is an upgrade (.Release.IsUpgrade).
	ConditionDeployed = "Deployed"
)
