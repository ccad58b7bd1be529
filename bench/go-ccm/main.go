// The stock cloud-controller-manager of k8s.io/cloud-provider, with the benchmark cloud
// (cloud.go) registered as "bench": what `npm run bench -- --compare go` runs beside cirrus.
// Everything but the cloud is upstream: the command, its flags and defaults, and the default
// controllers (cloud-node, cloud-node-lifecycle, service, route).
//
// The cloud's own flags (section "benchmark cloud" of --help):
//
//	--bench-latency 50ms         every cloud call waits this long
//	--bench-lb-latency 1s        ensure, update and delete load balancer wait this long (default: --bench-latency)
//	--bench-stats-address addr   serve the call counts and the updateLoadBalancer log on http://addr/calls
package main

import (
	"io"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/klog/v2"
)

// providerName is what --cloud-provider names.
const providerName = "bench"

// cloudFlags are the benchmark cloud's settings, read when the command initializes the cloud.
type cloudFlags struct {
	latency      time.Duration
	lbLatency    time.Duration
	statsAddress string
}

func main() {
	ccmOptions, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		klog.Fatalf("cloud-controller-manager options: %v", err)
	}
	settings := &cloudFlags{lbLatency: -1}
	extra := cliflag.NamedFlagSets{}
	fs := extra.FlagSet("benchmark cloud")
	fs.DurationVar(&settings.latency, "bench-latency", 0, "How long every cloud call waits.")
	fs.DurationVar(&settings.lbLatency, "bench-lb-latency", -1,
		"How long ensure, update and delete load balancer wait (negative: --bench-latency).")
	fs.StringVar(&settings.statsAddress, "bench-stats-address", "",
		"host:port to serve call counts and the updateLoadBalancer log on (GET /calls); empty: none.")

	cloudprovider.RegisterCloudProvider(providerName, func(io.Reader) (cloudprovider.Interface, error) {
		lbLatency := settings.lbLatency
		if lbLatency < 0 {
			lbLatency = settings.latency
		}
		cloud := newBenchCloud(settings.latency, lbLatency)
		if settings.statsAddress != "" {
			if err := cloud.calls.serve(settings.statsAddress); err != nil {
				return nil, err
			}
		}
		return cloud, nil
	})

	command := app.NewCloudControllerManagerCommand(ccmOptions, initCloud, app.DefaultInitFuncConstructors,
		names.CCMControllerAliases(), extra, wait.NeverStop)
	os.Exit(cli.Run(command))
}

// initCloud builds the provider that --cloud-provider names, as every out-of-tree CCM's main does.
func initCloud(c *config.CompletedConfig) cloudprovider.Interface {
	settings := c.ComponentConfig.KubeCloudShared.CloudProvider
	cloud, err := cloudprovider.InitCloudProvider(settings.Name, settings.CloudConfigFile)
	if err != nil {
		klog.Fatalf("cloud provider %q: %v", settings.Name, err)
	}
	if cloud == nil {
		klog.Fatalf("unknown cloud provider %q (this binary has %q)", settings.Name, providerName)
	}
	return cloud
}
