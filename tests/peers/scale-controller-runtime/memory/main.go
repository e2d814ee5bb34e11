// memory -copies N CONFIGMAP.json POD.json
//
// Go's side of tests/peers/scale/src/bin/managed_fields.rs: decodes N
// copies of each object (JSON as the apiserver served it) into client-go's
// typed corev1.ConfigMap / corev1.Pod, holds them as an informer's store
// does (one pointer each), and prints the live heap bytes per object
// (runtime.MemStats.HeapAlloc after a GC, less the same before) as rows of
// the Markdown table the Rust side prints: whole (managedFields kept, each
// FieldsV1 as its raw JSON bytes), and with managedFields dropped after
// decoding (cache.TransformStripManagedFields).
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/json"
)

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// perObject decodes n copies with decode and returns the heap bytes per
// held object and the allocations (mallocs - frees) per object.
func perObject(n int, decode func() any) (float64, float64) {
	held := make([]any, 0, n)
	before := heap()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	objects := ms.Mallocs - ms.Frees
	for i := 0; i < n; i++ {
		held = append(held, decode())
	}
	after := heap()
	runtime.ReadMemStats(&ms)
	allocations := float64(ms.Mallocs-ms.Frees) - float64(objects)
	runtime.KeepAlive(held)
	return float64(after-before) / float64(n), allocations / float64(n)
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func rows(object string, raw []byte, n int, decode func(strip bool) any) {
	whole, wholeAllocs := perObject(n, func() any { return decode(false) })
	stripped, strippedAllocs := perObject(n, func() any { return decode(true) })
	fmt.Printf("| %s | Go: whole (managedFields as raw bytes, client-go) | %.0f | %.0f (GC heap) | %.1f |\n", object, whole, whole, wholeAllocs)
	fmt.Printf("| %s | Go: managedFields stripped | %.0f | %.0f (GC heap) | %.1f |\n", object, stripped, stripped, strippedAllocs)
}

func main() {
	copies := flag.Int("copies", 10000, "objects to hold")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: memory [-copies N] CONFIGMAP.json POD.json")
		os.Exit(2)
	}
	cm, err := os.ReadFile(flag.Arg(0))
	must(err)
	pod, err := os.ReadFile(flag.Arg(1))
	must(err)
	strip := func(meta *metav1.ObjectMeta, yes bool) {
		if yes {
			meta.ManagedFields = nil
		}
	}
	rows("ConfigMap", cm, *copies, func(yes bool) any {
		var o corev1.ConfigMap
		must(json.Unmarshal(cm, &o))
		strip(&o.ObjectMeta, yes)
		return &o
	})
	rows("Pod", pod, *copies, func(yes bool) any {
		var o corev1.Pod
		must(json.Unmarshal(pod, &o))
		strip(&o.ObjectMeta, yes)
		return &o
	})
}
