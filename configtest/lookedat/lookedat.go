// Package lookedat says what a failed CEL assertion of "stencil test"
// looked at. "got false" says little about
// objects.exists(o, o.kind == 'Deployment' && o.spec.replicas == 2) in a
// render of eight objects; the reader wants the objects it read and the
// values it found there. So the failure lists, per object, the deepest
// fields the assertion read and their values:
//
//	looked at:
//	  Deployment team-a/g: .kind = "Deployment", .spec.replicas = 2
//	  status: .readyReplicas = <absent>
//	  only the kind or name of: Service team-a/g-db
//
// An object of which only apiVersion, kind and metadata.name or
// namespace were read (one a filter passed over) is named on the last
// line, not listed, so that a large render stays short.
//
// The choice a newcomer may question: the reads are not recorded when the
// assertion first runs. A failed assertion runs once more, over values
// that record each field read (Activation), so that a passing case, the
// common one, pays nothing for the wrappers; the second run's result is
// the first's, only its reads count.
package lookedat

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// maxLooked caps the objects a failure lists, and the names it lists of
// those passed over.
const maxLooked = 10

// seenRoot is one value an assertion may read: an object of objects, the
// status or the resource; reads are the paths it read, in order.
type seenRoot struct {
	label string
	// object says it is an object of objects (identity reads count less).
	object bool
	reads  []seenRead
	index  map[string]int
}

// seenRead is one path read and its value; absent says it was not there.
type seenRead struct {
	path   string
	val    ref.Val
	absent bool
}

// record notes that path was read, with val (nil: absent).
func (r *seenRoot) record(path string, val ref.Val) {
	if r.index == nil {
		r.index = map[string]int{}
	}
	if _, ok := r.index[path]; ok {
		return
	}
	r.index[path] = len(r.reads)
	r.reads = append(r.reads, seenRead{path: path, val: val, absent: val == nil})
}

// leaves are the reads no other read is below: what the assertion looked
// at, not the maps it passed through on the way.
func (r *seenRoot) leaves() []seenRead {
	var out []seenRead
	for _, rd := range r.reads {
		deeper := false
		for _, other := range r.reads {
			if strings.HasPrefix(other.path, rd.path+".") || strings.HasPrefix(other.path, rd.path+"[") {
				deeper = true
				break
			}
		}
		if !deeper && rd.path != "" {
			out = append(out, rd)
		}
	}
	return out
}

// identityOnly says whether an object was read for its identity alone.
func (r *seenRoot) identityOnly() bool {
	for _, rd := range r.leaves() {
		switch rd.path {
		case ".apiVersion", ".kind", ".metadata.name", ".metadata.namespace":
		default:
			return false
		}
	}
	return true
}

// Record is what one run of an assertion read: one root per object of
// objects, then the status and the resource.
type Record struct {
	roots []*seenRoot
	// listed says the objects list itself was read (its size, say).
	listed bool
}

// Activation returns a copy of vars, an assertion's variables, whose
// objects (a list of maps), status and resource record every read into
// the returned Record. objectLabels name the objects in a failure, in
// order; resourceLabel names the resource.
func Activation(vars map[string]any, objectLabels []string, resourceLabel string) (map[string]any, *Record) {
	vars = maps.Clone(vars)
	rec := &Record{}
	objects := vars["objects"].([]any)
	elems := make([]ref.Val, len(objects))
	for i, o := range objects {
		root := &seenRoot{label: objectLabels[i], object: true}
		rec.roots = append(rec.roots, root)
		elems[i] = seenValue(types.DefaultTypeAdapter.NativeToValue(o), root, "")
	}
	status := &seenRoot{label: "status"}
	res := &seenRoot{label: resourceLabel}
	rec.roots = append(rec.roots, status, res)
	vars["objects"] = &seenObjects{Lister: types.NewRefValList(types.DefaultTypeAdapter, elems).(traits.Lister), listed: &rec.listed}
	vars["status"] = seenValue(types.DefaultTypeAdapter.NativeToValue(vars["status"]), status, "")
	vars["resource"] = seenValue(types.DefaultTypeAdapter.NativeToValue(vars["resource"]), res, "")
	return vars, rec
}

// String is what a failure prints of what the assertion read, "looked
// at:" and a line per object: "" when it read none of objects, status and
// resource.
func (rec *Record) String() string {
	roots, listed := rec.roots, rec.listed
	var lines, passed []string
	objects, more := 0, 0
	for _, r := range roots {
		if len(r.reads) == 0 {
			continue
		}
		if r.object {
			objects++
			if r.identityOnly() {
				passed = append(passed, r.label)
				continue
			}
		}
		if len(lines) == maxLooked {
			more++
			continue
		}
		var reads []string
		for _, rd := range r.leaves() {
			reads = append(reads, rd.path+" = "+oneLine(rd))
		}
		if len(reads) == 0 {
			reads = append(reads, "the whole of it")
		}
		lines = append(lines, r.label+": "+strings.Join(reads, ", "))
	}
	if more > 0 {
		lines = append(lines, fmt.Sprintf("and %d more", more))
	}
	if len(passed) > 0 {
		names := passed
		if len(names) > maxLooked {
			names = append(names[:maxLooked:maxLooked], fmt.Sprintf("and %d more", len(passed)-maxLooked))
		}
		lines = append(lines, "only the kind or name of: "+strings.Join(names, ", "))
	}
	if objects == 0 && listed {
		// objects.size() == 2: name what there was.
		var names []string
		for _, r := range roots {
			if r.object {
				names = append(names, r.label)
			}
		}
		if len(names) > maxLooked {
			names = append(names[:maxLooked:maxLooked], fmt.Sprintf("and %d more", len(names)-maxLooked))
		}
		if len(names) == 0 {
			names = []string{"none"}
		}
		lines = append(lines, "objects: "+strings.Join(names, ", "))
	}
	if len(lines) == 0 {
		return ""
	}
	return "looked at:\n    " + strings.Join(lines, "\n    ")
}

// oneLine prints a read value on one line, short.
func oneLine(rd seenRead) string {
	if rd.absent {
		return "<absent>"
	}
	var native any = rd.val.Value()
	switch v := rd.val.(type) {
	case traits.Mapper:
		if m, err := v.ConvertToNative(reflect.TypeFor[map[string]any]()); err == nil {
			native = m
		}
	case traits.Lister:
		if l, err := v.ConvertToNative(reflect.TypeFor[[]any]()); err == nil {
			native = l
		}
	}
	b, err := json.Marshal(native)
	s := string(b)
	if err != nil {
		s = fmt.Sprint(native)
	}
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

// wrapSeen records v as read at path of root, and returns it as
// seenValue does.
func wrapSeen(v ref.Val, root *seenRoot, path string) ref.Val {
	root.record(path, v)
	return seenValue(v, root, path)
}

// seenValue returns v recording reads below it into root: maps and lists
// wrapped, anything else as is.
func seenValue(v ref.Val, root *seenRoot, path string) ref.Val {
	switch x := v.(type) {
	case traits.Mapper:
		return &seenMap{Mapper: x, root: root, path: path}
	case traits.Lister:
		return &seenList{Lister: x, root: root, path: path}
	default:
		return v
	}
}

// unseen is v without its recording wrapper, for comparisons.
func unseen(v ref.Val) ref.Val {
	switch x := v.(type) {
	case *seenMap:
		return x.Mapper
	case *seenList:
		return x.Lister
	case *seenObjects:
		return x.Lister
	}
	return v
}

// seenMap is a map that records the keys read from it.
type seenMap struct {
	traits.Mapper
	root *seenRoot
	path string
}

// key is the path of k below m.
func (m *seenMap) key(k ref.Val) string {
	if s, ok := k.(types.String); ok {
		return m.path + "." + string(s)
	}
	return fmt.Sprintf("%s[%v]", m.path, k.Value())
}

// Find records the read, and a key not there as absent.
func (m *seenMap) Find(k ref.Val) (ref.Val, bool) {
	v, found := m.Mapper.Find(k)
	if !found || types.IsError(v) {
		m.root.record(m.key(k), nil)
		return v, found
	}
	return wrapSeen(v, m.root, m.key(k)), true
}

// Get records the read, and a key not there as absent.
func (m *seenMap) Get(k ref.Val) ref.Val {
	v := m.Mapper.Get(k)
	if types.IsError(v) {
		m.root.record(m.key(k), nil)
		return v
	}
	return wrapSeen(v, m.root, m.key(k))
}

// Contains records the key tested (k in m), or its absence.
func (m *seenMap) Contains(k ref.Val) ref.Val {
	if v, found := m.Mapper.Find(k); found && !types.IsError(v) {
		m.root.record(m.key(k), v)
	} else {
		m.root.record(m.key(k), nil)
	}
	return m.Mapper.Contains(k)
}

// Iterator records the map as read whole (m.exists(k, ...)).
func (m *seenMap) Iterator() traits.Iterator {
	m.root.record(m.path, m.Mapper)
	return m.Mapper.Iterator()
}

// Equal compares the map itself.
func (m *seenMap) Equal(other ref.Val) ref.Val { return m.Mapper.Equal(unseen(other)) }

// seenList is a list that records the elements read from it.
type seenList struct {
	traits.Lister
	root *seenRoot
	path string
}

// Get records the element read.
func (l *seenList) Get(i ref.Val) ref.Val {
	v := l.Lister.Get(i)
	p := fmt.Sprintf("%s[%v]", l.path, i.Value())
	if types.IsError(v) {
		l.root.record(p, nil)
		return v
	}
	return wrapSeen(v, l.root, p)
}

// Iterator records each element a comprehension reads.
func (l *seenList) Iterator() traits.Iterator {
	return &seenIterator{Iterator: l.Lister.Iterator(), next: func(i int, v ref.Val) ref.Val {
		return wrapSeen(v, l.root, fmt.Sprintf("%s[%d]", l.path, i))
	}}
}

// Contains records the list as read whole (v in l).
func (l *seenList) Contains(v ref.Val) ref.Val {
	l.root.record(l.path, l.Lister)
	return l.Lister.Contains(unseen(v))
}

// Equal compares the list itself.
func (l *seenList) Equal(other ref.Val) ref.Val { return l.Lister.Equal(unseen(other)) }

// Add concatenates the lists themselves.
func (l *seenList) Add(other ref.Val) ref.Val { return l.Lister.Add(unseen(other)) }

// seenObjects is the objects variable: its elements record into their
// own roots; listed says the list itself was read (its size, say).
type seenObjects struct {
	traits.Lister
	listed *bool
}

// Size records that the list was read.
func (l *seenObjects) Size() ref.Val {
	*l.listed = true
	return l.Lister.Size()
}

// Iterator records that the list was read.
func (l *seenObjects) Iterator() traits.Iterator {
	*l.listed = true
	return l.Lister.Iterator()
}

// Equal compares the list itself.
func (l *seenObjects) Equal(other ref.Val) ref.Val {
	*l.listed = true
	return l.Lister.Equal(unseen(other))
}

// seenIterator wraps each element an iterator returns.
type seenIterator struct {
	traits.Iterator
	i    int
	next func(int, ref.Val) ref.Val
}

// Next wraps the next element.
func (it *seenIterator) Next() ref.Val {
	v := it.Iterator.Next()
	i := it.i
	it.i++
	if types.IsError(v) {
		return v
	}
	return it.next(i, v)
}
