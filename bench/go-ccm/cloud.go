// The benchmark cloud, answering exactly as test/harness/cloud.ts (the recording fake,
// providers/fake, set up as the benchmark's cloud) does for cirrus:
// InstancesV2, LoadBalancer and Routes; providerID fake://<node>, an InternalIP from the FNV-1a
// hash of the node name, fake.medium, fake-zone-a, fake-region-1; the n-th new load balancer
// (keyed by the name derived from the Service UID) gets 198.18.0.0+n; routes in a table.
// Every call waits the call latency, ensure/update/delete load balancer the LB latency; no wait
// holds the lock.
package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/utils/ptr"
)

type benchCloud struct {
	latency   time.Duration
	lbLatency time.Duration
	calls     *callLog

	mu        sync.Mutex
	balancers map[string]*v1.LoadBalancerStatus
	routes    []cloudprovider.Route
}

func newBenchCloud(latency, lbLatency time.Duration) *benchCloud {
	return &benchCloud{
		latency:   latency,
		lbLatency: lbLatency,
		calls:     newCallLog(),
		balancers: map[string]*v1.LoadBalancerStatus{},
	}
}

// call counts the call and waits; the count of calls in flight is kept per method.
func (c *benchCloud) call(ctx context.Context, method string, wait time.Duration) {
	done := c.calls.begin(method)
	defer done()
	if wait <= 0 {
		return
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}

func (c *benchCloud) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {}

func (c *benchCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c, true }

func (c *benchCloud) Instances() (cloudprovider.Instances, bool) { return nil, false }

func (c *benchCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return c, true }

func (c *benchCloud) Zones() (cloudprovider.Zones, bool) { return nil, false }

func (c *benchCloud) Clusters() (cloudprovider.Clusters, bool) { return nil, false }

func (c *benchCloud) Routes() (cloudprovider.Routes, bool) { return c, true }

func (c *benchCloud) ProviderName() string { return "fake" }

func (c *benchCloud) HasClusterID() bool { return true }

// InstancesV2

func (c *benchCloud) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	c.call(ctx, "instanceExists", c.latency)
	return !c.calls.forgotten(node.Name), nil
}

func (c *benchCloud) InstanceShutdown(ctx context.Context, _ *v1.Node) (bool, error) {
	c.call(ctx, "instanceShutdown", c.latency)
	return false, nil
}

func (c *benchCloud) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	c.call(ctx, "instanceMetadata", c.latency)
	h := fnv.New32a()
	_, _ = h.Write([]byte(node.Name))
	sum := h.Sum32()
	return &cloudprovider.InstanceMetadata{
		ProviderID:   "fake://" + node.Name,
		InstanceType: "fake.medium",
		NodeAddresses: []v1.NodeAddress{{
			Type:    v1.NodeInternalIP,
			Address: fmt.Sprintf("10.%d.%d.%d", sum>>16&255, sum>>8&255, sum&255),
		}},
		Zone:   "fake-zone-a",
		Region: "fake-region-1",
	}, nil
}

// LoadBalancer

func (c *benchCloud) GetLoadBalancer(ctx context.Context, _ string, service *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	c.call(ctx, "getLoadBalancer", c.latency)
	c.mu.Lock()
	defer c.mu.Unlock()
	status, ok := c.balancers[cloudprovider.DefaultLoadBalancerName(service)]
	if !ok {
		return nil, false, nil
	}
	return status.DeepCopy(), true, nil
}

func (c *benchCloud) GetLoadBalancerName(_ context.Context, _ string, service *v1.Service) string {
	return cloudprovider.DefaultLoadBalancerName(service)
}

func (c *benchCloud) EnsureLoadBalancer(ctx context.Context, _ string, service *v1.Service, _ []*v1.Node) (*v1.LoadBalancerStatus, error) {
	c.call(ctx, "ensureLoadBalancer", c.lbLatency)
	name := cloudprovider.DefaultLoadBalancerName(service)
	c.mu.Lock()
	defer c.mu.Unlock()
	status, ok := c.balancers[name]
	if !ok {
		n := uint32(len(c.balancers) + 1)
		ip := 0xc6120000 + n // 198.18.0.0 + n
		status = &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{
			IP:     fmt.Sprintf("%d.%d.%d.%d", ip>>24, ip>>16&255, ip>>8&255, ip&255),
			IPMode: ptr.To(v1.LoadBalancerIPModeVIP),
		}}}
		c.balancers[name] = status
	}
	return status.DeepCopy(), nil
}

func (c *benchCloud) UpdateLoadBalancer(ctx context.Context, _ string, service *v1.Service, nodes []*v1.Node) error {
	c.call(ctx, "updateLoadBalancer", c.lbLatency)
	c.calls.update(service.Namespace+"/"+service.Name, nodes)
	return nil
}

func (c *benchCloud) EnsureLoadBalancerDeleted(ctx context.Context, _ string, service *v1.Service) error {
	c.call(ctx, "ensureLoadBalancerDeleted", c.lbLatency)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.balancers, cloudprovider.DefaultLoadBalancerName(service))
	return nil
}

// Routes

func (c *benchCloud) ListRoutes(ctx context.Context, _ string) ([]*cloudprovider.Route, error) {
	c.call(ctx, "listRoutes", c.latency)
	c.mu.Lock()
	defer c.mu.Unlock()
	routes := make([]*cloudprovider.Route, len(c.routes))
	for i := range c.routes {
		route := c.routes[i]
		routes[i] = &route
	}
	return routes, nil
}

func (c *benchCloud) CreateRoute(ctx context.Context, clusterName string, nameHint string, route *cloudprovider.Route) error {
	c.call(ctx, "createRoute", c.latency)
	created := *route
	created.Name = clusterName + "-" + nameHint
	c.mu.Lock()
	defer c.mu.Unlock()
	c.routes = append(c.routes, created)
	return nil
}

func (c *benchCloud) DeleteRoute(ctx context.Context, _ string, route *cloudprovider.Route) error {
	c.call(ctx, "deleteRoute", c.latency)
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, r := range c.routes {
		if r.Name == route.Name && r.DestinationCIDR == route.DestinationCIDR {
			c.routes = append(c.routes[:i], c.routes[i+1:]...)
			break
		}
	}
	return nil
}
