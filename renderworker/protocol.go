package renderworker

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"helm.sh/helm/v4/pkg/chart/common"

	"stencil.dev/stencil/config/snapshot"
	"stencil.dev/stencil/templates"
	"stencil.dev/stencil/templates/view"
)

// The protocol between the controller and a worker: frames on two pipes
// (the worker's fd 3 in, fd 4 out; its stdout and stderr are only
// diagnostics), each a 4-byte big-endian length, one byte of kind and a
// JSON payload. Both ends are the same binary, so the protocol is
// versioned with it (protocolVersion guards a mismatch all the same). The
// controller reads a frame's length before its body and refuses one over
// the bound of its kind: a worker's output is bounded at the pipe, before
// it is decoded.

// protocolVersion changes with any change to the frames below.
const protocolVersion = 3

// Frame kinds, controller to worker.
const (
	kindHello   byte = 'H' // Hello: what to load
	kindRequest byte = 'R' // request: one render
	kindAnswer  byte = 'A' // answer: to a worker's question
)

// Frame kinds, worker to controller.
const (
	kindReady    byte = 'Y' // ready: loaded, or why not
	kindTemplate byte = 'T' // the template about to run (a name, not JSON)
	kindQuestion byte = 'Q' // question: about a live child
	kindResult   byte = 'D' // result: the render's outcome
)

// maxSmallFrame bounds every frame but a result and a question (which
// carries a rendered object): a template name, a ready, an answer's
// envelope.
const maxSmallFrame = 64 << 10

// Hello tells a new worker what to load: the config snapshot the
// controller compiled (its files' bytes, not their path), so that a worker
// renders exactly what the controller loaded whatever the disk holds now.
type Hello struct {
	// Version is protocolVersion of the controller's binary.
	Version int `json:"version"`
	// Snapshot is every file of the config as the controller read it
	// once, at this load (config.TakeSnapshot).
	Snapshot *snapshot.Snapshot `json:"snapshot"`
	// Plurals are the plurals discovery gave the controller for a
	// watches file, by GroupVersionKind string: the worker asks no API
	// server.
	Plurals map[string]string `json:"plurals,omitempty"`
	// Capabilities and AllowedKinds are the templates.Options the
	// controller loaded with.
	Capabilities *common.Capabilities      `json:"capabilities,omitempty"`
	AllowedKinds []schema.GroupVersionKind `json:"allowedKinds,omitempty"`
}

// ready is the worker's answer to Hello.
type ready struct {
	Error string `json:"error,omitempty"`
}

// request is one render.
type request struct {
	// Snapshot is the digest of the config snapshot the render is for:
	// a worker serves one snapshot and refuses a request for another.
	Snapshot string `json:"snapshot"`
	// GVR names the entry (its set) by schema.GroupVersionResource.String.
	GVR string `json:"gvr"`
	// Parent is the view of the custom resource; Spec and Status are
	// encoded apart (encodeValue) so that numbers keep their type.
	Parent parentView `json:"parent"`
	// Live says the controller has live children to answer about.
	Live bool `json:"live,omitempty"`
	// CPUSeconds and MemoryMiB are the kernel's bounds for this render.
	CPUSeconds int64 `json:"cpuSeconds"`
	MemoryMiB  int64 `json:"memoryMiB"`
}

// parentView is view.Object on the wire.
type parentView struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace"`
	UID         string            `json:"uid"`
	Generation  int64             `json:"generation"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	Resource    view.ResourceInfo `json:"resource"`
	// Spec and Status follow the request's JSON in its frame, each on a
	// line of its own (encodeValue writes no newline): a frame built
	// around them, so that encoding/json never copies a tenant's spec
	// into the buffers it keeps for reuse.
	Spec   []byte `json:"-"`
	Status []byte `json:"-"`
	// Reads are view.Object.Reads, on a third line.
	Reads []byte `json:"-"`
}

// question asks about a live child: "child" (the object, and whether it
// is ready) or "current" (whether the live child already is Want).
type question struct {
	Op   string          `json:"op"`
	Kind string          `json:"kind"`
	Name string          `json:"name"`
	Want json.RawMessage `json:"want,omitempty"`
}

// answer answers a question.
type answer struct {
	Found  bool            `json:"found,omitempty"`
	Object json.RawMessage `json:"object,omitempty"`
	Ready  bool            `json:"ready,omitempty"`
	Yes    bool            `json:"yes,omitempty"`
}

// result is a render's outcome: what templates.Result holds, or the
// render's errors.
type result struct {
	Children    []json.RawMessage `json:"children,omitempty"`
	Status      json.RawMessage   `json:"status,omitempty"`
	StatusWaits bool              `json:"statusWaits,omitempty"`
	Waits       []templates.Wait  `json:"waits,omitempty"`
	Release     string            `json:"release,omitempty"`
	Hooks       []string          `json:"hooks,omitempty"`
	Dropped     []string          `json:"dropped,omitempty"`
	Notes       string            `json:"notes,omitempty"`
	Errors      []wireError       `json:"errors,omitempty"`
	// Retire says the worker exits after this result: its address space
	// grew, and the next render would start with less than its bound.
	Retire bool `json:"retire,omitempty"`
}

// wireError is one render error: engine.RenderError's parts, and whether
// the budget stopped it.
type wireError struct {
	Template string `json:"template,omitempty"`
	Line     int    `json:"line,omitempty"`
	Message  string `json:"message"`
	Budget   bool   `json:"budget,omitempty"`
}

// requestFrame is a request's payload: its JSON, then the parent's spec
// and status, a line each.
func requestFrame(req request) ([]byte, error) {
	head, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	p := req.Parent
	out := make([]byte, 0, len(head)+len(p.Spec)+len(p.Status)+len(p.Reads)+3)
	out = append(append(append(append(append(out, head...), '\n'), p.Spec...), '\n'), p.Status...)
	return append(append(out, '\n'), p.Reads...), nil
}

// parseRequest reads what requestFrame wrote.
func parseRequest(body []byte) (request, error) {
	var req request
	head, rest, ok := bytes.Cut(body, []byte{'\n'})
	if !ok {
		return req, errors.New("a request without its spec")
	}
	spec, rest, ok := bytes.Cut(rest, []byte{'\n'})
	if !ok {
		return req, errors.New("a request without its status")
	}
	status, reads, ok := bytes.Cut(rest, []byte{'\n'})
	if !ok {
		return req, errors.New("a request without its reads")
	}
	if err := json.Unmarshal(head, &req); err != nil {
		return req, err
	}
	req.Parent.Spec, req.Parent.Status, req.Parent.Reads = spec, status, reads
	return req, nil
}

// answerFrame is an answer's payload, built around the object it carries
// for the same reason as requestFrame.
func answerFrame(a answer) []byte {
	obj := a.Object
	a.Object = nil
	head, _ := json.Marshal(a) // booleans only: cannot fail
	if obj == nil {
		return head
	}
	out := make([]byte, 0, len(head)+len(obj)+12)
	out = append(out, head[:len(head)-1]...)
	if len(head) > 2 {
		out = append(out, ',')
	}
	out = append(append(append(out, `"object":`...), obj...), '}')
	return out
}

// errTooLarge is a frame over its bound.
type errTooLarge struct{ size, limit int64 }

func (e *errTooLarge) Error() string {
	return fmt.Sprintf("%d bytes, over the bound of %d", e.size, e.limit)
}

// writeFrame writes one frame.
func writeFrame(w io.Writer, kind byte, payload []byte) error {
	if int64(len(payload))+1 > math.MaxUint32 {
		return &errTooLarge{size: int64(len(payload)), limit: math.MaxUint32 - 1}
	}
	// One Write per frame: a writer that serialises writes keeps frames
	// whole.
	frame := make([]byte, 5, 5+len(payload))
	binary.BigEndian.PutUint32(frame[:4], uint32(len(payload)+1))
	frame[4] = kind
	_, err := w.Write(append(frame, payload...))
	return err
}

// writeJSON writes v as a frame of kind.
func writeJSON(w io.Writer, kind byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeFrame(w, kind, b)
}

// readFrame reads one frame; limit returns the bound of a frame of each
// kind, checked before its body is read.
func readFrame(r io.Reader, limit func(kind byte) int64) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := int64(binary.BigEndian.Uint32(hdr[:4])) - 1
	kind := hdr[4]
	if n < 0 {
		return kind, nil, errors.New("a frame without a kind")
	}
	if l := limit(kind); n > l {
		return kind, nil, &errTooLarge{size: n, limit: l}
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return kind, nil, err
	}
	return kind, body, nil
}

// encodeValue encodes an unstructured value (maps, lists, strings,
// int64, float64, bools, nil) as JSON that decodeValue turns back into the
// same types: a float64 with an integral value is written with ".0", which
// JSON alone would make an int64 on the way back.
func encodeValue(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := appendValue(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func appendValue(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		buf.WriteString(strconv.FormatBool(x))
	case int64:
		buf.WriteString(strconv.FormatInt(x, 10))
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("%v is not a JSON number", x)
		}
		if x == math.Trunc(x) && math.Abs(x) < 1e21 {
			buf.WriteString(strconv.FormatFloat(x, 'f', -1, 64))
			buf.WriteString(".0")
			return nil
		}
		buf.WriteString(strconv.FormatFloat(x, 'g', -1, 64))
	case map[string]any:
		// Keys in order, as json.Marshal writes them: the same value is
		// the same bytes on every call, which the memo of renders keys on
		// (memo.go) and a reader of the frames can compare.
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := appendString(buf, k); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := appendValue(buf, x[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := appendValue(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case string:
		return appendString(buf, x)
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return err
		}
		buf.Write(b)
	}
	return nil
}

func appendString(buf *bytes.Buffer, s string) error {
	if plainASCII(s) {
		// Most keys and values of a Kubernetes object: written as they
		// are, as json.Marshal would but for its HTML escapes (the same
		// string once decoded), without its allocation per string.
		buf.WriteByte('"')
		buf.WriteString(s)
		buf.WriteByte('"')
		return nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	buf.Write(b)
	return nil
}

// plainASCII reports whether s is printable ASCII with no quote or
// backslash: a JSON string as it stands.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// parseResult reads a result frame's body; fromResult decodes what it
// holds.
func parseResult(body []byte) (result, error) {
	var res result
	err := json.Unmarshal(body, &res)
	return res, err
}

// encodeResult is json.Marshal(res) without validating again the
// children and status this worker's own encodeValue wrote (json.Marshal
// compacts every RawMessage it is given, about as costly as decoding it).
func encodeResult(res result) ([]byte, error) {
	children, status := res.Children, res.Status
	res.Children, res.Status = nil, nil
	rest, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.WriteByte('{')
	if len(children) > 0 {
		buf.WriteString(`"children":[`)
		for i, c := range children {
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.Write(c)
		}
		buf.WriteString("],")
	}
	if len(status) > 0 {
		buf.WriteString(`"status":`)
		buf.Write(status)
		buf.WriteByte(',')
	}
	// rest is an object: "{}" or "{...}".
	if len(rest) == 2 {
		b := buf.Bytes()
		if b[len(b)-1] == ',' {
			b = b[:len(b)-1]
		}
		return append(b, '}'), nil
	}
	buf.Write(rest[1:])
	return buf.Bytes(), nil
}

// jsonNodes counts the values of the JSON text b (every object, array,
// string, number, true, false and null, nested ones included, keys not),
// without decoding it: what decoding it would cost, counted in a pass
// that allocates nothing. Both ends count with it: the worker before it
// sends a result, the controller before it decodes one. It is exact for
// valid JSON and never reads past b's end for any input.
func jsonNodes(b []byte) int64 {
	var n int64
	prev := byte(0) // the last byte outside strings and whitespace; 0 at the start
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '"':
			// A string, a value until a ':' says it was a key.
			n++
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			n++
		case ':':
			n--
		case ',', ']', '}':
		default:
			// A number or literal starts after a structural byte (or at
			// the start); its other bytes follow one of its own.
			if prev == 0 || prev == ',' || prev == ':' || prev == '[' {
				n++
			}
		}
		prev = c
	}
	return n
}

// decodeValue decodes what encodeValue wrote: integers as int64, other
// numbers as float64. encoding/json bounds the nesting it decodes, so a
// deep value from a worker cannot exhaust the controller's stack.
func decodeValue(b []byte) (any, error) {
	var v any
	if err := utiljson.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// decodeMap decodes a mapping; null is an empty one.
func decodeMap(b []byte) (map[string]any, error) {
	v, err := decodeValue(b)
	if err != nil {
		return nil, err
	}
	switch m := v.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return m, nil
	}
	return nil, fmt.Errorf("want a mapping, got %T", v)
}

// toWire encodes a view for a request.
func toWire(o *view.Object) (parentView, error) {
	spec, err := encodeValue(o.Spec)
	if err != nil {
		return parentView{}, fmt.Errorf("spec: %w", err)
	}
	status, err := encodeValue(o.Status)
	if err != nil {
		return parentView{}, fmt.Errorf("status: %w", err)
	}
	var reads []byte
	if o.Reads != nil {
		if reads, err = encodeValue(o.Reads); err != nil {
			return parentView{}, fmt.Errorf("reads: %w", err)
		}
	}
	return parentView{Name: o.Name, Namespace: o.Namespace, UID: o.UID, Generation: o.Generation,
		Labels: o.Labels, Annotations: o.Annotations, Spec: spec, Status: status, Reads: reads, Resource: o.Resource}, nil
}

// maxDepth is how deep encoding/json decodes, and so how deeply nested a
// resource a render worker reads (the API server stores none deeper).
const maxDepth = 10_000

// fromWire decodes a request's view.
func fromWire(p parentView) (*view.Object, error) {
	spec, err := decodeMap(p.Spec)
	if err != nil {
		if strings.Contains(err.Error(), "max depth") {
			return nil, fmt.Errorf("the spec is nested more than %d levels deep, more than a render worker reads", maxDepth)
		}
		return nil, fmt.Errorf("spec: %w", err)
	}
	status, err := decodeMap(p.Status)
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	o := &view.Object{Name: p.Name, Namespace: p.Namespace, UID: p.UID, Generation: p.Generation,
		Labels: p.Labels, Annotations: p.Annotations, Spec: spec, Status: status, Resource: p.Resource}
	if len(p.Reads) > 0 {
		if o.Reads, err = decodeMap(p.Reads); err != nil {
			return nil, fmt.Errorf("reads: %w", err)
		}
	}
	if o.Labels == nil {
		o.Labels = map[string]string{}
	}
	if o.Annotations == nil {
		o.Annotations = map[string]string{}
	}
	return o, nil
}
