// go-informer: the client-go peer of `make bench-informer`.
//
// Starts a client-go SharedInformerFactory informer on ConfigMaps in one
// namespace, waits for the cache to sync, and prints one JSON line with the
// sync time, the number of cached objects and the process RSS after sync.
//
//	go-informer -kubeconfig K -namespace NS [-settle 1s] [-strip-managed-fields]
//
// -strip-managed-fields sets the transform controller-runtime's
// cache.TransformStripManagedFields is (drop metadata.managedFields before
// storing), as opkit's cache does by default.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func rssKiB() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := s.Text()
		if strings.HasPrefix(line, "VmRSS:") {
			fields := strings.Fields(line)
			if len(fields) >= 2 {
				v, _ := strconv.ParseInt(fields[1], 10, 64)
				return v
			}
		}
	}
	return -1
}

// cpuMs is the CPU time (user + system) of this process so far.
func cpuMs() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e6
}

// stripManagedFields is controller-runtime's TransformStripManagedFields.
func stripManagedFields(obj interface{}) (interface{}, error) {
	if accessor, err := meta.Accessor(obj); err == nil && accessor.GetManagedFields() != nil {
		accessor.SetManagedFields(nil)
	}
	return obj, nil
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig path")
	namespace := flag.String("namespace", "", "namespace to watch")
	settle := flag.Duration("settle", time.Second, "wait after sync before reading RSS")
	strip := flag.Bool("strip-managed-fields", false, "drop managedFields before storing")
	flag.Parse()

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeconfig:", err)
		os.Exit(1)
	}
	// The same client-side throttling as a default controller would not
	// matter for one LIST/WATCH; raise it so it never does.
	cfg.QPS = 1000
	cfg.Burst = 1000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
	opts := []informers.SharedInformerOption{informers.WithNamespace(*namespace)}
	peer := "client-go"
	if *strip {
		opts = append(opts, informers.WithTransform(stripManagedFields))
		peer = "client-go-strip-mf"
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, opts...)
	informer := factory.Core().V1().ConfigMaps().Informer()
	stop := make(chan struct{})
	start := time.Now()
	factory.Start(stop)
	for typ, ok := range factory.WaitForCacheSync(stop) {
		if !ok {
			fmt.Fprintln(os.Stderr, "cache did not sync:", typ)
			os.Exit(1)
		}
	}
	syncMs := float64(time.Since(start).Microseconds()) / 1000.0
	cpu := cpuMs()
	objects := len(informer.GetStore().ListKeys())
	time.Sleep(*settle)
	out := map[string]any{
		"peer":    peer,
		"sync_ms": syncMs,
		"cpu_ms":  cpu,
		"objects": objects,
		"rss_kib": rssKiB(),
	}
	_ = json.NewEncoder(os.Stdout).Encode(out)
	close(stop)
}
