// Command go-workqueue runs the workqueue workloads of tests/peers/bench-workqueue.sh
// on client-go's typed workqueue (k8s.io/client-go/util/workqueue), the queue that
// controller-runtime's controllers use. The opkit side is sdk/examples/bench_workqueue.rs.
//
//	go run . <workload> [items]
//
// Workloads (items are string keys like "ns-7/obj-123", made before timing starts):
//  1. one producer, one worker: items distinct keys, Add -> Get -> Done (default 1M);
//  2. four producers, four workers: 100k keys, each added 10 times;
//  3. one producer, four workers: 100k AddAfter with delays of 0-100 ms drawn
//     from splitmix64(42), the same sequence as the Rust program: time to drain.
//
// Prints one line: RESULT impl=client-go workload=N ops=.. secs=.. cpu=.. gets=..
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/client-go/util/workqueue"
)

func keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("ns-%d/obj-%d", i%100, i)
	}
	return out
}

type splitMix uint64

func (s *splitMix) next() uint64 {
	*s += 0x9E3779B97F4A7C15
	z := uint64(*s)
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

func delays(n int) []time.Duration {
	rng := splitMix(42)
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(rng.next()%100_001) * time.Microsecond
	}
	return out
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// newQueue is what a controller-runtime controller uses: a rate-limiting
// (delaying) typed queue with the default controller rate limiter.
func newQueue() workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{},
	)
}

func workload1(keys []string) (ops, gets int) {
	q := newQueue()
	defer q.ShutDown()
	go func() {
		for _, k := range keys {
			q.Add(k)
		}
	}()
	for range keys {
		k, _ := q.Get()
		q.Done(k)
	}
	return len(keys), len(keys)
}

func workload2(keys []string) (ops, gets int) {
	const producers, workers, rounds, yieldEvery = 4, 4, 10, 16
	q := newQueue()
	var n atomic.Int64
	var wg, pwg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				k, shutdown := q.Get()
				if shutdown {
					return
				}
				n.Add(1)
				q.Done(k)
			}
		})
	}
	for p := range producers {
		pwg.Go(func() {
			for range rounds {
				for j, i := 0, p; i < len(keys); j, i = j+1, i+producers {
					q.Add(keys[i])
					// like an event handler between events (the Rust
					// program yields at the same points)
					if j%yieldEvery == yieldEvery-1 {
						runtime.Gosched()
					}
				}
			}
		})
	}
	pwg.Wait()
	q.ShutDown()
	wg.Wait()
	return len(keys) * rounds, int(n.Load())
}

func workload3(keys []string, delays []time.Duration) (ops, gets int) {
	const workers = 4
	q := newQueue()
	var n atomic.Int64
	allDone := make(chan struct{})
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				k, shutdown := q.Get()
				if shutdown {
					return
				}
				q.Done(k)
				if n.Add(1) == int64(len(keys)) {
					close(allDone)
				}
			}
		})
	}
	go func() {
		for i, k := range keys {
			q.AddAfter(k, delays[i])
		}
	}()
	<-allDone
	q.ShutDown()
	wg.Wait()
	return len(keys), int(n.Load())
}

func main() {
	workload := 1
	if len(os.Args) > 1 {
		workload, _ = strconv.Atoi(os.Args[1])
	}
	items := 100_000
	if workload == 1 {
		items = 1_000_000
	}
	if len(os.Args) > 2 {
		items, _ = strconv.Atoi(os.Args[2])
	}
	ks := keys(items)
	var ds []time.Duration
	if workload == 3 {
		ds = delays(items)
	}

	cpu0, start := cpuSeconds(), time.Now()
	var ops, gets int
	switch workload {
	case 1:
		ops, gets = workload1(ks)
	case 2:
		ops, gets = workload2(ks)
	case 3:
		ops, gets = workload3(ks, ds)
	default:
		fmt.Fprintf(os.Stderr, "unknown workload %d (1, 2 or 3)\n", workload)
		os.Exit(2)
	}
	secs, cpu := time.Since(start).Seconds(), cpuSeconds()-cpu0
	fmt.Printf("RESULT impl=client-go workload=%d ops=%d secs=%.4f cpu=%.3f gets=%d\n", workload, ops, secs, cpu, gets)
}
