package main

import (
	"encoding/base64"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The same vectors as test/providers/bench-cloud.test.ts checks of the TypeScript cloud's log: both
// clouds must keep and serve node sets alike (test/harness/node-sets.ts).
func TestUpdateLogKeepsNodeSetsAsBits(t *testing.T) {
	l := newCallLog()
	nodes := func(names ...string) []*v1.Node {
		out := make([]*v1.Node, len(names))
		for i, name := range names {
			out[i] = &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		}
		return out
	}
	l.update("default/s", nodes("n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9"))
	l.update("default/s", nodes("n9", "n8", "n7", "n6", "n5", "n4", "n3", "n2", "n1", "n0"))
	l.update("default/s", nodes("n9", "n0", "n2"))
	l.update("default/s", nodes())
	b64 := base64.StdEncoding.EncodeToString
	want := []string{b64([]byte{0xff, 0x03}), b64([]byte{0xff, 0x03}), b64([]byte{0x05, 0x02}), ""}
	var got []string
	for _, u := range l.updates {
		got = append(got, u.Nodes)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("sets %q, want %q", got, want)
	}
	if want := []string{"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9"}; !reflect.DeepEqual(l.names, want) {
		t.Fatalf("names %q, want %q", l.names, want)
	}
	if len(l.nodeSets) != 3 {
		t.Fatalf("%d distinct sets kept, want 3", len(l.nodeSets))
	}
}
