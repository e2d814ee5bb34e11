// multicluster-runtime: the Go peer of `make bench-multicluster-peers`
// (tests/peers/bench-multicluster-peers.sh), doing what the opkit peer
// (tests/peers/multicluster, `opkit_fleet_peer`) does with
// sigs.k8s.io/multicluster-runtime.
//
//	multicluster-runtime --kubeconfig K --namespace NS [--objects 1000]
//	                     [--rounds 1,10,50,50] [--strip-managed-fields]
//	                     [--trim-engaged]
//
// One control plane stands for N clusters: per round, N clusters `c<i>` are
// added to multicluster-runtime's programmatic provider (providers/clusters),
// each a controller-runtime cluster.Cluster of its own (its own cache and
// connections), and one multicluster controller (mcbuilder, For ConfigMap)
// counts the (cluster, key) pairs of NS it reconciled. Once all N*objects
// were reconciled every cluster is removed again. Per round one JSON line on
// stdout: {"n", "engage_s", "rss_baseline_mib", "rss_engaged_mib", "cpu_s",
// "events", "rss_after_mib", "rss_after_trim_mib", "tasks" (goroutines),
// "tasks_after", "threads", "sockets", "sockets_after", their baselines and
// "caches_stopped_s" (from the first Remove until every cluster's cache
// stopped)}; "rss_after_trim_mib" is read after runtime.GC() and
// debug.FreeOSMemory(), the Go counterpart of the opkit peer's
// malloc_trim(0). --trim-engaged adds "rss_engaged_trim_mib", the engaged
// RSS read the same way (after "rss_engaged_mib" and "cpu_s"), to tell
// what the engaged clusters hold live from what the runtime kept.
//
// --strip-managed-fields sets controller-runtime's
// cache.TransformStripManagedFields on every cluster's cache (opkit's cache
// drops managedFields by default); without it the caches are
// controller-runtime's defaults.
//
// # What removal does in multicluster-runtime v0.23.1
//
// providers/clusters' Provider embeds pkg/clusters.Clusters; Remove is
// Clusters.Remove: it cancels the context the cluster was added with and
// forgets the cluster. That context is the one Clusters.Add ran
// cluster.Start(ctx) under (controller-runtime's cluster.Start returns only
// once cache.Start returned, i.e. every informer stopped) and the one the
// manager's Engage got, so the controller's engagement (mcController.Engage:
// context.WithCancel(ctx)) ends too: the kind source's event handler is
// removed from the (stopping) informer. So removal does stop the cluster's
// cache, asynchronously: Remove returns at once, without waiting for it.
// This peer wraps each cluster to learn when its Start returned, and waits
// (with a deadline) for every one before measuring after disengaging.
//
// Two things that remain after a removal, by multicluster-runtime's code
// (not this peer's): the controller's startWithinContext (pkg/controller)
// starts, per engagement, a goroutine that waits for the controller's own
// context, not the cluster's, so one goroutine per cluster ever engaged
// stays until the manager stops ("tasks_after" grows by N every round); and
// the workqueue is the controller's, shared by every cluster.
//
// Adding is serial: the provider adds clusters one at a time from a channel,
// and the controller's Engage holds its lock while the kind source waits for
// the new cluster's cache to sync (controller-runtime's Watch on a started
// controller starts the source synchronously), so cluster i+1 starts
// syncing only once cluster i's cache synced.
//
// # Connections
//
// client-go shares transports: rest.HTTPClientFor (what cluster.New uses
// for its cache, client and REST mapper) takes its transport from a
// process-wide cache keyed by the TLS options, so N clusters made from the
// same rest.Config would share one *http.Transport, i.e. one HTTP/2
// connection for every cluster's watches. The opkit peer gives each cluster
// a kube::Client of its own (its own connection pool), so here every
// cluster gets a copy of the rest.Config with Proxy set
// (http.ProxyFromEnvironment, what the default transport does anyway): a
// config with a Proxy function is not cacheable (client-go's tlsConfigKey),
// so each cluster gets a transport of its own, and it is not kept in the
// process-wide cache after the cluster is gone (a distinct Dial function
// would also give a transport of its own, but the cache would keep every
// one of them forever). After removing a cluster the peer closes its
// transport's idle connections (utilnet.CloseIdleConnectionsFor on the
// cluster's HTTP client's transport, again until the sockets are gone), as
// dropping the opkit peer's kube::Client does; without that an HTTP/2
// connection stays open until the transport's idle timeout (90 s).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/providers/clusters"
)

// round is one line of output.
type round struct {
	N              int     `json:"n"`
	EngageS        float64 `json:"engage_s"`
	RSSBaselineMiB float64 `json:"rss_baseline_mib"`
	RSSEngagedMiB  float64 `json:"rss_engaged_mib"`
	// with --trim-engaged: the engaged RSS after runtime.GC and
	// debug.FreeOSMemory, what the clusters hold live
	RSSEngagedTrimMiB *float64 `json:"rss_engaged_trim_mib,omitempty"`
	CPUS              float64  `json:"cpu_s"`
	Events            int      `json:"events"`
	RSSAfterMiB       float64  `json:"rss_after_mib"`
	RSSAfterTrimMiB   float64  `json:"rss_after_trim_mib"`
	Tasks             int      `json:"tasks"`
	TasksAfter        int      `json:"tasks_after"`
	Threads           int      `json:"threads"`
	Sockets           int      `json:"sockets"`
	SocketsAfter      int      `json:"sockets_after"`
	TasksBaseline     int      `json:"tasks_baseline"`
	SocketsBaseline   int      `json:"sockets_baseline"`
	StoppedInSeconds  float64  `json:"caches_stopped_s"`
}

// seen is the set of (cluster, key) pairs reconciled in the namespace.
type seen struct {
	mu    sync.Mutex
	pairs map[[2]string]struct{}
}

func (s *seen) add(cluster, key string) {
	s.mu.Lock()
	s.pairs[[2]string{cluster, key}] = struct{}{}
	s.mu.Unlock()
}

func (s *seen) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pairs)
}

func (s *seen) clear() {
	s.mu.Lock()
	s.pairs = map[[2]string]struct{}{}
	s.mu.Unlock()
}

// stoppable is a cluster that tells when its Start returned: when its cache
// (every informer) stopped.
type stoppable struct {
	cluster.Cluster
	stopped chan struct{}
}

func (s *stoppable) Start(ctx context.Context) error {
	defer close(s.stopped)
	return s.Cluster.Start(ctx)
}

func main() {
	// a flag set of its own: controller-runtime registers --kubeconfig on
	// the global one
	flags := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	kubeconfig := flags.String("kubeconfig", "", "kubeconfig of the control plane")
	namespace := flags.String("namespace", "", "namespace of the objects counted")
	objects := flags.Int("objects", 1000, "objects in the namespace")
	rounds := flags.String("rounds", "1,10,50,50", "clusters engaged per round")
	strip := flags.Bool("strip-managed-fields", false, "drop managedFields before caching")
	trimEngaged := flags.Bool("trim-engaged", false, "also read the engaged RSS after runtime.GC and debug.FreeOSMemory")
	_ = flags.Parse(os.Args[1:])
	if *kubeconfig == "" || *namespace == "" {
		fail(errors.New("--kubeconfig and --namespace are required"))
	}
	var ns []int
	for _, s := range strings.Split(*rounds, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fail(fmt.Errorf("--rounds: %q is not a cluster count", s))
		}
		ns = append(ns, n)
	}
	// Silence controller-runtime (and its warning that no logger was set):
	// the opkit peer installs no tracing subscriber either.
	ctrl.SetLogger(logr.Discard())

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail(fmt.Errorf("reading %s: %w", *kubeconfig, err))
	}
	provider := clusters.New()
	mgr, err := mcmanager.New(cfg, provider, mcmanager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		fail(fmt.Errorf("creating the manager: %w", err))
	}
	counted := &seen{pairs: map[[2]string]struct{}{}}
	err = mcbuilder.ControllerManagedBy(mgr).
		Named("counter").
		For(&corev1.ConfigMap{}).
		Complete(mcreconcile.Func(func(_ context.Context, req mcreconcile.Request) (reconcile.Result, error) {
			if req.Namespace == *namespace {
				counted.add(req.ClusterName, req.Name)
			}
			return reconcile.Result{}, nil
		}))
	if err != nil {
		fail(fmt.Errorf("building the controller: %w", err))
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	running := make(chan error, 1)
	go func() { running <- mgr.Start(ctx) }()
	select {
	case <-mgr.Elected():
	case err := <-running:
		fail(fmt.Errorf("the manager stopped: %w", err))
	}
	// the manager's (and the provider's) goroutines are running; nothing
	// is engaged
	time.Sleep(500 * time.Millisecond)
	baseline := trimmedRSSMiB()
	baseTasks, baseSockets := runtime.NumGoroutine(), sockets()

	out := json.NewEncoder(os.Stdout)
	for _, n := range ns {
		cpu0 := cpuSecs()
		started := time.Now()
		engaged := make([]*stoppable, n)
		for i := range n {
			clusterCfg := rest.CopyConfig(cfg)
			// not cacheable: a transport (connection pool) of its own
			clusterCfg.Proxy = http.ProxyFromEnvironment
			cl, err := cluster.New(clusterCfg, func(o *cluster.Options) {
				if *strip {
					o.Cache.DefaultTransform = cache.TransformStripManagedFields()
				}
			})
			if err != nil {
				fail(fmt.Errorf("cluster c%d: %w", i, err))
			}
			engaged[i] = &stoppable{Cluster: cl, stopped: make(chan struct{})}
			if err := provider.Add(ctx, fmt.Sprintf("c%d", i), engaged[i]); err != nil {
				fail(fmt.Errorf("adding cluster c%d: %w", i, err))
			}
		}
		want := n * *objects
		if !eventually(10*time.Minute, func() bool { return counted.len() >= want }) {
			fail(fmt.Errorf("%d clusters: %d of %d (cluster, ConfigMap) pairs reconciled after 10 min", n, counted.len(), want))
		}
		took := time.Since(started).Seconds()
		cpu := cpuSecs() - cpu0
		r := round{
			N:               n,
			EngageS:         took,
			RSSBaselineMiB:  baseline,
			RSSEngagedMiB:   rssMiB(),
			CPUS:            cpu,
			Events:          want,
			Tasks:           runtime.NumGoroutine(),
			Threads:         threads(),
			Sockets:         sockets(),
			TasksBaseline:   baseTasks,
			SocketsBaseline: baseSockets,
		}
		if *trimEngaged {
			trimmed := trimmedRSSMiB()
			r.RSSEngagedTrimMiB = &trimmed
		}
		removing := time.Now()
		for i := range n {
			provider.Remove(fmt.Sprintf("c%d", i))
		}
		// Remove only cancels: wait until every cluster's Start returned
		// (its informers stopped), then close its idle connections.
		deadline := time.After(60 * time.Second)
		for i, cl := range engaged {
			select {
			case <-cl.stopped:
			case <-deadline:
				fail(fmt.Errorf("cluster c%d's cache had not stopped 60 s after removal", i))
			}
		}
		r.StoppedInSeconds = time.Since(removing).Seconds()
		// the benchmark's own record (N × objects pairs) is not the
		// manager's: drop it (a new map; a Go map never shrinks) before
		// reading what disengaging left
		counted.clear()
		if len(provider.ClusterNames()) != 0 {
			fail(fmt.Errorf("clusters still known after removal: %v", provider.ClusterNames()))
		}
		// Close the removed clusters' idle connections until their sockets
		// are gone (a watch's stream may end a moment after its informer
		// stopped, and only an idle connection closes); then wait until the
		// goroutines of the removed clusters ended (the count stays put for
		// a second).
		eventually(30*time.Second, func() bool {
			for _, cl := range engaged {
				// the client's transport is client-go's wrapping of the
				// *http.Transport: unwrap it to reach the connections
				utilnet.CloseIdleConnectionsFor(cl.GetHTTPClient().Transport)
			}
			return sockets() <= baseSockets
		})
		settle(30 * time.Second)
		engaged = nil
		r.RSSAfterMiB = rssMiB()
		r.TasksAfter = runtime.NumGoroutine()
		r.SocketsAfter = sockets()
		r.RSSAfterTrimMiB = trimmedRSSMiB()
		if err := out.Encode(r); err != nil {
			fail(err)
		}
	}
	stop()
	if err := <-running; err != nil && !errors.Is(err, context.Canceled) {
		fail(fmt.Errorf("the manager: %w", err))
	}
}

// eventually polls cond every 10 ms until it holds or timeout passed.
func eventually(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// settle waits (at most timeout) until the goroutine count stayed the same
// for one second.
func settle(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	last, since := runtime.NumGoroutine(), time.Now()
	for time.Now().Before(deadline) && time.Since(since) < time.Second {
		time.Sleep(50 * time.Millisecond)
		if now := runtime.NumGoroutine(); now != last {
			last, since = now, time.Now()
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "multicluster-runtime peer:", err)
	os.Exit(1)
}

// status is a field of /proc/self/status (its number), -1 when unread.
func status(field string) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), field+":"); ok {
			fields := strings.Fields(rest)
			if len(fields) > 0 {
				v, err := strconv.ParseFloat(fields[0], 64)
				if err == nil {
					return v
				}
			}
		}
	}
	return -1
}

// rssMiB is VmRSS in MiB.
func rssMiB() float64 { return status("VmRSS") / 1024 }

// threads is this process's OS threads.
func threads() int { return int(status("Threads")) }

// trimmedRSSMiB is the RSS once the garbage was collected and the heap's
// free memory given back to the system.
func trimmedRSSMiB() float64 {
	runtime.GC()
	debug.FreeOSMemory()
	return rssMiB()
}

// cpuSecs is this process's user + system CPU time so far.
func cpuSecs() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// sockets counts this process's open file descriptors that are sockets.
func sockets() int {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && strings.HasPrefix(target, "socket:") {
			n++
		}
	}
	return n
}
