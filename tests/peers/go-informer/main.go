// go-informer: the client-go peer of `make bench-informer`.
//
// Starts a client-go SharedInformerFactory informer on ConfigMaps in one
// namespace, waits for the cache to sync, and prints one JSON line with the
// sync time, the number of cached objects and the process RSS after sync.
//
//	go-informer -kubeconfig K -namespace NS [-settle 1s] [-strip-managed-fields]
//	            [-resource configmaps|pods] [-heap] [-bare] [-transform]
//
// -strip-managed-fields sets the transform controller-runtime's
// cache.TransformStripManagedFields is (drop metadata.managedFields before
// storing), as opkit's cache does by default.
//
// -transform sets a cache.TransformFunc that trims each object to exactly
// what opkit's projected peer keeps (issue 39, "like for like"): the
// metadata essentials of opkit's Projected (name, namespace, uid,
// resourceVersion, generation, deletionTimestamp, labels,
// ownerReferences) and, for a ConfigMap, its `shard` data key
// (tests/peers/rust-informers' CmView); for a Pod, spec.nodeName and
// status.phase (its PodView). The trimmed object is a new one, so the
// decoded one is garbage.
//
// For the memory model (BENCHMARKS.md, tests/peers/memory-model):
// -resource picks the kind (ConfigMaps by default, or Pods); -heap adds
// the Go heap in use the cached objects take (runtime.MemStats.HeapAlloc
// after a forced GC, once before the informer starts and once after sync:
// "heap_bytes", "heap_bytes_per_object", "heap_objects" and
// "heap_objects_per_object"); -bare measures the same with no informer:
// the objects LISTed (500 a page, the informer's decoder: protobuf) and
// kept in slices, managedFields dropped when -strip-managed-fields is set.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
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

// essentials is the metadata opkit's Projected keeps beside a projection.
func essentials(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:              m.Name,
		Namespace:         m.Namespace,
		UID:               m.UID,
		ResourceVersion:   m.ResourceVersion,
		Generation:        m.Generation,
		DeletionTimestamp: m.DeletionTimestamp,
		Labels:            m.Labels,
		OwnerReferences:   m.OwnerReferences,
	}
}

// trimToProjection keeps exactly the fields of opkit's projected peer
// (see -transform); other objects (tombstones) pass through.
func trimToProjection(obj interface{}) (interface{}, error) {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		out := &corev1.ConfigMap{ObjectMeta: essentials(&o.ObjectMeta)}
		if shard, ok := o.Data["shard"]; ok {
			out.Data = map[string]string{"shard": shard}
		}
		return out, nil
	case *corev1.Pod:
		return &corev1.Pod{
			ObjectMeta: essentials(&o.ObjectMeta),
			Spec:       corev1.PodSpec{NodeName: o.Spec.NodeName},
			Status:     corev1.PodStatus{Phase: o.Status.Phase},
		}, nil
	}
	return obj, nil
}

// heapInUse forces a GC and returns the live heap bytes and objects.
func heapInUse() (uint64, uint64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, m.HeapObjects
}

// bare LISTs every object of the namespace, 500 a page, and keeps them
// (one slice per page, as the decoder made it); managedFields dropped when
// strip is set. Returns what is kept, so it stays live, and the count.
func bare(client *kubernetes.Clientset, ns, resource string, strip bool) (any, int) {
	ctx := context.Background()
	switch resource {
	case "pods":
		pods := client.CoreV1().Pods(ns)
		return listPages(func(opts metav1.ListOptions) ([]corev1.Pod, string, error) {
			list, err := pods.List(ctx, opts)
			if err != nil {
				return nil, "", err
			}
			return list.Items, list.Continue, nil
		}, func(p *corev1.Pod) { p.ManagedFields = nil }, strip)
	default:
		configMaps := client.CoreV1().ConfigMaps(ns)
		return listPages(func(opts metav1.ListOptions) ([]corev1.ConfigMap, string, error) {
			list, err := configMaps.List(ctx, opts)
			if err != nil {
				return nil, "", err
			}
			return list.Items, list.Continue, nil
		}, func(c *corev1.ConfigMap) { c.ManagedFields = nil }, strip)
	}
}

// listPages lists every page of 500 with list, stripping each item's
// managedFields with stripItem when strip is set; returns the pages (kept
// live) and the item count.
func listPages[T any](list func(metav1.ListOptions) ([]T, string, error), stripItem func(*T), strip bool) (any, int) {
	opts := metav1.ListOptions{Limit: 500}
	var kept [][]T
	n := 0
	for {
		items, next, err := list(opts)
		if err != nil {
			fmt.Fprintln(os.Stderr, "list:", err)
			os.Exit(1)
		}
		if strip {
			for i := range items {
				stripItem(&items[i])
			}
		}
		kept = append(kept, items)
		n += len(items)
		if next == "" {
			return kept, n
		}
		opts.Continue = next
	}
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig path")
	namespace := flag.String("namespace", "", "namespace to watch")
	settle := flag.Duration("settle", time.Second, "wait after sync before reading RSS")
	strip := flag.Bool("strip-managed-fields", false, "drop managedFields before storing")
	resource := flag.String("resource", "configmaps", "configmaps or pods")
	heap := flag.Bool("heap", false, "report the heap the cached objects take")
	bareList := flag.Bool("bare", false, "no informer: LIST the objects and keep them (with -heap)")
	transform := flag.Bool("transform", false, "trim each object to the fields of opkit's projected peer")
	sizes := flag.Bool("sizes", false, "print the inline sizes of the API types and exit")
	flag.Parse()
	if *sizes {
		// the types tests/peers/memory-model compares with k8s-openapi's
		_ = json.NewEncoder(os.Stdout).Encode(map[string]uintptr{
			"ConfigMap":            unsafe.Sizeof(corev1.ConfigMap{}),
			"ObjectMeta":           unsafe.Sizeof(metav1.ObjectMeta{}),
			"Pod":                  unsafe.Sizeof(corev1.Pod{}),
			"PodSpec":              unsafe.Sizeof(corev1.PodSpec{}),
			"PodStatus":            unsafe.Sizeof(corev1.PodStatus{}),
			"Container":            unsafe.Sizeof(corev1.Container{}),
			"ContainerStatus":      unsafe.Sizeof(corev1.ContainerStatus{}),
			"Probe":                unsafe.Sizeof(corev1.Probe{}),
			"Lifecycle":            unsafe.Sizeof(corev1.Lifecycle{}),
			"SecurityContext":      unsafe.Sizeof(corev1.SecurityContext{}),
			"ResourceRequirements": unsafe.Sizeof(corev1.ResourceRequirements{}),
		})
		return
	}

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
	var heap0, heapObjs0 uint64
	if *heap {
		heap0, heapObjs0 = heapInUse()
	}
	if *bareList {
		start := time.Now()
		kept, n := bare(client, *namespace, *resource, *strip)
		out := map[string]any{
			"peer":    "go-bare",
			"sync_ms": float64(time.Since(start).Microseconds()) / 1000.0,
			"objects": n,
		}
		if *heap {
			addHeap(out, heap0, heapObjs0, n)
		}
		runtime.KeepAlive(kept)
		out["rss_kib"] = rssKiB()
		_ = json.NewEncoder(os.Stdout).Encode(out)
		return
	}
	opts := []informers.SharedInformerOption{informers.WithNamespace(*namespace)}
	peer := "client-go"
	switch {
	case *transform:
		opts = append(opts, informers.WithTransform(trimToProjection))
		peer = "client-go-transform"
	case *strip:
		opts = append(opts, informers.WithTransform(stripManagedFields))
		peer = "client-go-strip-mf"
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, opts...)
	var informer cache.SharedIndexInformer
	switch *resource {
	case "configmaps":
		informer = factory.Core().V1().ConfigMaps().Informer()
	case "pods":
		informer = factory.Core().V1().Pods().Informer()
	default:
		fmt.Fprintln(os.Stderr, "-resource: configmaps or pods, not", *resource)
		os.Exit(2)
	}
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
	}
	if *heap {
		addHeap(out, heap0, heapObjs0, objects)
	}
	out["rss_kib"] = rssKiB()
	_ = json.NewEncoder(os.Stdout).Encode(out)
	close(stop)
}

// addHeap adds the heap the objects take since heap0/objs0 (after a GC).
func addHeap(out map[string]any, heap0, objs0 uint64, n int) {
	heap1, objs1 := heapInUse()
	d := int64(heap1) - int64(heap0)
	o := int64(objs1) - int64(objs0)
	out["heap_bytes"] = d
	out["heap_objects"] = o
	if n > 0 {
		out["heap_bytes_per_object"] = float64(d) / float64(n)
		out["heap_objects_per_object"] = float64(o) / float64(n)
	}
}
