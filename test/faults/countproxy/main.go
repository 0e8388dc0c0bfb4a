// Command countproxy counts the API requests a controller makes, from outside
// it: a reverse proxy on loopback that forwards plain HTTP to the API server
// with the credentials of a kubeconfig, and records every request by verb,
// resource and response code. The fault suite (test/faults) points stencil
// at it, so the figures it prints do not depend on stencil's own metrics,
// and they survive stencil being killed.
//
//	countproxy --kubeconfig ADMIN --listen a=127.0.0.1:PORT [--listen b=127.0.0.1:PORT2]
//
// Each listener is named (a tag): with two stencil replicas, each gets its
// own listener, so every request is attributed to the replica that made it.
// The proxy only forwards, so it keeps working across API server restarts
// (requests made while the server is down get 502). Watches stream
// (FlushInterval -1).
//
// It serves, on every listener, under /countproxy/ (a path the API server
// never serves):
//
//	/countproxy/summary?since=MS&until=MS&tag=T   one line of key=value figures
//	/countproxy/writes?since=MS&until=MS&tag=T    one line per mutating request
//
// MS are Unix milliseconds; each bound is optional, tag too.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// record is one request as the proxy saw it.
type record struct {
	at       time.Time
	tag      string
	verb     string // get list watch create update patch apply delete deletecollection
	resource string // plural, with /subresource when there is one
	ns, name string
	code     int
	dryRun   bool
}

func (r record) write() bool {
	switch r.verb {
	case "create", "update", "patch", "apply", "delete", "deletecollection":
		return true
	}
	return false
}

// childResources are the kinds the example config renders.
var childResources = map[string]bool{
	"deployments": true, "services": true, "configmaps": true,
	"poddisruptionbudgets": true, "horizontalpodautoscalers": true,
}

// category sorts a successful write by what it touched.
func (r record) category() string {
	switch {
	case strings.HasSuffix(r.resource, "/status"):
		return "status"
	case childResources[r.resource]:
		return "child"
	case r.resource == "events":
		return "event"
	case r.resource == "leases":
		return "lease"
	}
	return "other"
}

type requestLog struct {
	mu      sync.Mutex
	records []record
}

// add appends r and returns its index, for lost.
func (l *requestLog) add(r record) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r)
	return len(l.records) - 1
}

// lost marks record i as an answer the client never got whole (code 0).
func (l *requestLog) lost(i int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records[i].code = 0
}

// selectRecords returns the records within the query's since/until/tag.
func (l *requestLog) selectRecords(q url.Values) ([]record, error) {
	var since, until int64 = 0, 1 << 62
	for _, b := range []struct {
		name string
		dst  *int64
	}{{"since", &since}, {"until", &until}} {
		if v := q.Get(b.name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s=%q: want Unix milliseconds", b.name, v)
			}
			*b.dst = n
		}
	}
	tag := q.Get("tag")
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []record
	for _, r := range l.records {
		ms := r.at.UnixMilli()
		if ms < since || ms >= until || (tag != "" && r.tag != tag) {
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

// classify derives verb, resource, namespace and name from a request, the
// way the API server's RequestInfo does for the paths a controller uses.
func classify(r *http.Request) record {
	rec := record{verb: strings.ToLower(r.Method)}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		rec.resource = "nonresource:" + r.URL.Path
		parts = nil
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) != 2 {
		rec.ns, parts = parts[1], parts[2:]
	}
	if len(parts) >= 1 {
		rec.resource = parts[0]
	}
	if len(parts) >= 2 {
		rec.name = parts[1]
	}
	if len(parts) >= 3 {
		rec.resource += "/" + parts[2]
	}
	q := r.URL.Query()
	if strings.HasPrefix(rec.resource, "nonresource:") {
		// Discovery and health paths.
		rec.verb = "nonresource"
		return rec
	}
	rec.dryRun = q.Get("dryRun") != ""
	switch r.Method {
	case http.MethodGet:
		switch {
		case (q.Get("watch") == "true" || q.Get("watch") == "1") && q.Get("sendInitialEvents") == "true":
			// A list streamed over a watch (client-go's WatchListClient):
			// an informer's initial list or relist.
			rec.verb = "watchlist"
		case q.Get("watch") == "true" || q.Get("watch") == "1":
			rec.verb = "watch"
		case rec.name == "":
			rec.verb = "list"
		default:
			rec.verb = "get"
		}
	case http.MethodPost:
		rec.verb = "create"
	case http.MethodPut:
		rec.verb = "update"
	case http.MethodPatch:
		rec.verb = "patch"
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/apply-patch") {
			rec.verb = "apply"
		}
	case http.MethodDelete:
		if rec.name == "" {
			rec.verb = "deletecollection"
		}
	}
	return rec
}

// recorder records a proxied request when its answer's status goes out
// (a watch is counted when it starts, not when it ends). Code 0 means the
// API server could not be reached, or went away after the header and before
// the end of the body (the client saw an error, not the code); 499 that the
// client went away first.
type recorder struct {
	http.ResponseWriter
	done func(code int)
	// header: the upstream answer's header went out to the client.
	header bool
}

func (w *recorder) WriteHeader(code int) {
	if w.done != nil {
		w.done(code)
		w.done = nil
		w.header = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(b []byte) (int, error) {
	if w.done != nil {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController flush watch events through.
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *recorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func summary(records []record) string {
	counts := map[string]int{}
	for _, k := range []string{"writes", "child", "status", "event", "lease", "other", "failed", "dryrun", "get", "list", "watch", "watchlist", "requests"} {
		counts[k] = 0
	}
	for _, r := range records {
		counts["requests"]++
		switch {
		case !r.write():
			counts[r.verb]++
			if r.verb == "list" || r.verb == "watch" || r.verb == "watchlist" {
				counts[r.verb+":"+r.resource]++
			}
			if r.code < 200 || r.code > 299 {
				// A watch refused with 410 Gone: its resourceVersion is too old.
				counts[r.verb+":"+strconv.Itoa(r.code)]++
			}
		case r.dryRun:
			counts["dryrun"]++
		case r.code < 200 || r.code > 299:
			counts["failed"]++
			counts["failed:"+r.category()]++
		default:
			counts["writes"]++
			counts[r.category()]++
			counts[r.category()+":"+r.verb]++
			if r.code == http.StatusCreated {
				// A server-side apply that created the object answers 201.
				counts[r.category()+":created"]++
			}
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", k, counts[k])
	}
	return b.String()
}

type listeners []string

func (l *listeners) String() string     { return strings.Join(*l, ",") }
func (l *listeners) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server to forward to (its credentials are used)")
	var listen listeners
	flag.Var(&listen, "listen", "TAG=ADDR: a named listener on a loopback address (repeatable)")
	flag.Parse()
	if *kubeconfig == "" || len(listen) == 0 {
		flag.Usage()
		os.Exit(2)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatalf("countproxy: %v", err)
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		log.Fatalf("countproxy: %v", err)
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		log.Fatalf("countproxy: server %q: %v", cfg.Host, err)
	}
	requests := &requestLog{}
	var wg sync.WaitGroup
	for _, l := range listen {
		tag, addr, ok := strings.Cut(l, "=")
		if !ok || tag == "" {
			log.Fatalf("countproxy: --listen %q: want TAG=ADDR", l)
		}
		proxy := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(target)
				pr.Out.Host = target.Host
			},
			Transport:     transport,
			FlushInterval: -1,
			ErrorLog:      log.New(os.Stderr, "countproxy "+tag+": ", log.LstdFlags),
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				// The API server cannot be reached (or went away mid-request):
				// drop the client's connection without an answer, as a dead
				// server would, rather than answer 502. A client tells a
				// transport error from an answer, and treats them differently
				// (client-go's event recorder retries the first, drops the
				// second).
				if rw, ok := w.(*recorder); ok && rw.done != nil {
					code := 0
					if r.Context().Err() != nil {
						// The client went away first (killed, or it gave up).
						code = 499
					}
					rw.done(code)
					rw.done = nil
				}
				panic(http.ErrAbortHandler)
			},
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/countproxy/summary", func(w http.ResponseWriter, r *http.Request) {
			recs, err := requests.selectRecords(r.URL.Query())
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			fmt.Fprintln(w, summary(recs))
		})
		mux.HandleFunc("/countproxy/writes", func(w http.ResponseWriter, r *http.Request) {
			recs, err := requests.selectRecords(r.URL.Query())
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			for _, rec := range recs {
				if rec.write() {
					fmt.Fprintf(w, "%d %s %s %s %s %s %d %t\n", rec.at.UnixMilli(), rec.tag, rec.verb, rec.resource,
						orDash(rec.ns), orDash(rec.name), rec.code, rec.dryRun)
				}
			}
		})
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			rec := classify(r)
			rec.tag = tag
			index := -1
			rw := &recorder{ResponseWriter: w, done: func(code int) {
				rec.at, rec.code = time.Now(), code
				index = requests.add(rec)
			}}
			defer func() {
				aborted := recover()
				switch {
				case rw.done != nil:
					// No response at all (the client went away first): 499, as nginx says.
					rw.done(499)
				case aborted != nil && rw.header && rec.verb != "watch" && rec.verb != "watchlist":
					// The header went out, the body was cut short: the
					// client got an error, whatever the server did.
					requests.lost(index)
				}
				if aborted != nil {
					panic(aborted)
				}
			}()
			proxy.ServeHTTP(rw, r)
		})
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			log.Fatalf("countproxy: %v", err)
		}
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		wg.Go(func() { log.Printf("countproxy: %s: %v", tag, srv.Serve(ln)) })
		log.Printf("countproxy: %s listening on http://%s, forwarding to %s", tag, ln.Addr(), cfg.Host)
	}
	wg.Wait()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
