// What the benchmark reads from the cloud: calls per method, the most in flight at once per
// method, and each updateLoadBalancer with its node set and when it returned (Unix ms). Served
// as JSON on GET /calls?updatesFrom=N&namesFrom=K (at most limit=M updates, and their count in
// all, updatesTotal; N may be Infinity), in the shape bench/compare/provider.ts serves for cirrus;
// and POST /forget?name=N (repeatable) says those nodes' machines are gone (the scale scenario).
// GET /debug/pprof/ serves Go's profiles of the process (net/http/pprof).
//
// An update's node set is kept and served as test/harness/node-sets.ts keeps it for cirrus: each
// node name gets a number the first time it is seen, the set is the bitset of its names' numbers
// (bit i is bit i%8 of byte i/8, up to the last byte with a bit set) in base64, and each distinct
// set is kept once. The same set is the same string whatever the order of its nodes, which
// upstream's service controller lists from its informer's store in map order
// (k8s.io/cloud-provider, controllers/service/controller.go, listWithPredicates). The answer
// carries the names from the K-th on, with which the harness turns sets back into names.
package main

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
)

type lbUpdate struct {
	Service string  `json:"service"`
	Nodes   string  `json:"nodes"`
	At      float64 `json:"at"`
}

type callLog struct {
	mu          sync.Mutex
	calls       map[string]int
	inFlight    map[string]int
	maxInFlight map[string]int
	updates     []lbUpdate
	// Each node name seen, in the order first seen (a name's number is its index), and its number.
	names   []string
	nameIDs map[string]int
	// Each distinct node set, once: the updates share it.
	nodeSets map[string]string
	// Scratch for building a set: its bits and their base64.
	bits, encoded []byte
	// Machines the benchmark said are gone (POST /forget?name=…): InstanceExists answers false.
	gone map[string]bool
}

func newCallLog() *callLog {
	return &callLog{
		calls:       map[string]int{},
		inFlight:    map[string]int{},
		maxInFlight: map[string]int{},
		updates:     []lbUpdate{}, // JSON [] rather than null
		names:       []string{},
		nameIDs:     map[string]int{},
		nodeSets:    map[string]string{},
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

func (l *callLog) update(service string, nodes []*v1.Node) {
	at := float64(time.Now().UnixMicro()) / 1000
	l.mu.Lock()
	defer l.mu.Unlock()
	top := -1
	for _, node := range nodes {
		id, found := l.nameIDs[node.Name]
		if !found {
			id = len(l.names)
			l.nameIDs[node.Name] = id
			l.names = append(l.names, node.Name)
		}
		b := id >> 3
		if b >= len(l.bits) {
			l.bits = append(l.bits, make([]byte, max(b+1, 2*len(l.bits))-len(l.bits))...)
		}
		l.bits[b] |= 1 << (id & 7)
		top = max(top, b)
	}
	used := l.bits[:top+1]
	l.encoded = base64.StdEncoding.AppendEncode(l.encoded[:0], used)
	clear(used)
	set, found := l.nodeSets[string(l.encoded)]
	if !found {
		set = string(l.encoded)
		l.nodeSets[set] = set
	}
	l.updates = append(l.updates, lbUpdate{Service: service, Nodes: set, At: at})
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
		namesFrom, err := strconv.Atoi(r.URL.Query().Get("namesFrom"))
		if err != nil {
			namesFrom = 0
		}
		l.mu.Lock()
		start := min(max(from, 0), len(l.updates))
		end := start + min(limit, len(l.updates)-start)
		body, err := json.Marshal(map[string]any{
			"calls":        l.calls,
			"maxInFlight":  l.maxInFlight,
			"updates":      l.updates[start:end],
			"updatesTotal": len(l.updates),
			"names":        l.names[min(max(namesFrom, 0), len(l.names)):],
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
