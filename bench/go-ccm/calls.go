// What the benchmark reads from the cloud: calls per method, the most in flight at once per
// method, and each updateLoadBalancer with its node names and when it returned (Unix ms). Served
// as JSON on GET /calls?updatesFrom=N (at most limit=M of them, and their count in all, updatesTotal; N may be Infinity), in the shape bench/compare/provider.ts serves for cirrus; and
// POST /forget?name=N (repeatable) says those nodes' machines are gone (the scale scenario).
// GET /debug/pprof/ serves Go's profiles of the process (net/http/pprof).
package main

import (
	"encoding/json"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"sync"
	"time"
)

type lbUpdate struct {
	Service string   `json:"service"`
	Nodes   []string `json:"nodes"`
	At      float64  `json:"at"`
}

type callLog struct {
	mu          sync.Mutex
	calls       map[string]int
	inFlight    map[string]int
	maxInFlight map[string]int
	updates     []lbUpdate
	// Each node set an update named, once: the updates share it (at thousands of Nodes and
	// Services, a copy per update would be most of the process's memory).
	nodeSets map[string][]string
	// Machines the benchmark said are gone (POST /forget?name=…): InstanceExists answers false.
	gone map[string]bool
}

func newCallLog() *callLog {
	return &callLog{
		calls:       map[string]int{},
		inFlight:    map[string]int{},
		maxInFlight: map[string]int{},
		updates:     []lbUpdate{}, // JSON [] rather than null
		nodeSets:    map[string][]string{},
		gone:        map[string]bool{},
	}
}

// begin counts a call of method; the function it returns marks the call finished.
func (l *callLog) begin(method string) func() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls[method]++
	l.inFlight[method]++
	l.maxInFlight[method] = max(l.maxInFlight[method], l.inFlight[method])
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.inFlight[method]--
	}
}

func (l *callLog) update(service string, nodes []string) {
	at := float64(time.Now().UnixMicro()) / 1000
	l.mu.Lock()
	defer l.mu.Unlock()
	key := strings.Join(nodes, "\n")
	shared, found := l.nodeSets[key]
	if !found {
		shared = nodes
		l.nodeSets[key] = shared
	}
	l.updates = append(l.updates, lbUpdate{Service: service, Nodes: shared, At: at})
}

// forgotten says whether the machine of node name is gone.
func (l *callLog) forgotten(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gone[name]
}

// serve answers GET /calls and POST /forget on address until the process ends.
func (l *callLog) serve(address string) error {
	listener, err := net.Listen("tcp", address)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /calls", func(w http.ResponseWriter, r *http.Request) {
		from, err := strconv.Atoi(r.URL.Query().Get("updatesFrom"))
		if err != nil {
			from = 0
			if r.URL.Query().Get("updatesFrom") == "Infinity" {
				from = math.MaxInt
			}
		}
		limit, err := strconv.Atoi(r.URL.Query().Get("limit"))
		if err != nil || limit <= 0 {
			limit = math.MaxInt
		}
		l.mu.Lock()
		start := min(max(from, 0), len(l.updates))
		end := start + min(limit, len(l.updates)-start)
		body, err := json.Marshal(map[string]any{
			"calls":        l.calls,
			"maxInFlight":  l.maxInFlight,
			"updates":      l.updates[start:end],
			"updatesTotal": len(l.updates),
		})
		l.mu.Unlock()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	mux.HandleFunc("POST /forget", func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		for _, name := range r.URL.Query()["name"] {
			l.gone[name] = true
		}
		l.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	// Go's profiles of this process (net/http/pprof, as its init registers them on the default mux),
	// for finding what holds the CCM's memory: go tool pprof http://addr/debug/pprof/heap.
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	go func() { _ = http.Serve(listener, mux) }()
	return nil
}
