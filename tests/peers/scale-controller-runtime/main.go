// scale-controller-runtime: the controller-runtime peer of `make
// bench-scale` (tests/peers/bench-scale.sh). The same controller as the
// opkit peer (tests/peers/scale/src/bin/scale_opkit.rs): it watches every
// Pod in the cluster and, for each Pod it is woken for, reads the Pod from
// the cache and tallies whether it is Running with condition Ready=True. No
// writes.
//
// Every watch event delivered to the controller passes through a predicate
// that counts it and lets it through; every reconcile is counted.
//
// controller-runtime's defaults (cache cluster-wide, protobuf for built-in
// kinds, managed fields kept, priority queue), except: -workers concurrent
// reconciles (default 4), no client-side rate limit (QPS -1, as opkit has
// none), metrics server off, logs discarded. -strip-managed-fields sets the
// cache's DefaultTransform to cache.TransformStripManagedFields() (opkit's
// default). -trim-to-projection sets it to a transform that keeps exactly
// what the opkit peer's projection (`--projected`, PodView) keeps: the
// metadata essentials (name, namespace, uid, resourceVersion, generation,
// deletionTimestamp, labels, ownerReferences), status.phase and the Ready
// condition; issue 39's like-for-like peer for projections.
//
// Output on stdout, read by the driver:
//
//	Y <unix ns>                                        the Pod cache has synced
//	T <unix ns> <events> <reconciles> <ready> <gone>   every 100 ms
//
//	scale-controller-runtime -kubeconfig K [-workers 4] [-strip-managed-fields | -trim-to-projection]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

var (
	// Watch events the controller was handed (creates, updates, deletes).
	events atomic.Int64
	// Reconciles run.
	reconciles atomic.Int64
	// Reconciles that found their Pod Running and Ready.
	ready atomic.Int64
	// Reconciles whose Pod was no longer in the cache.
	gone atomic.Int64
)

// runningAndReady: phase Running, with condition Ready=True.
func runningAndReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

type tallyReadiness struct {
	client client.Client
}

func (r *tallyReadiness) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	reconciles.Add(1)
	var pod corev1.Pod
	err := r.client.Get(ctx, req.NamespacedName, &pod)
	switch {
	case apierrors.IsNotFound(err):
		gone.Add(1)
	case err != nil:
		return reconcile.Result{}, err
	case runningAndReady(&pod):
		ready.Add(1)
	}
	return reconcile.Result{}, nil
}

// trimToProjection replaces a Pod by a new one holding only what the opkit
// peer's PodView projection keeps (the Ready condition alone of its
// conditions); anything else is left as it is.
func trimToProjection(obj interface{}) (interface{}, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	var conditions []corev1.PodCondition
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              pod.Name,
			Namespace:         pod.Namespace,
			UID:               pod.UID,
			ResourceVersion:   pod.ResourceVersion,
			Generation:        pod.Generation,
			DeletionTimestamp: pod.DeletionTimestamp,
			Labels:            pod.Labels,
			OwnerReferences:   pod.OwnerReferences,
		},
		Status: corev1.PodStatus{Phase: pod.Status.Phase, Conditions: conditions},
	}, nil
}

func main() {
	// -kubeconfig is controller-runtime's own flag (pkg/client/config).
	workers := flag.Int("workers", 4, "concurrent reconciles")
	strip := flag.Bool("strip-managed-fields", false, "cache without metadata.managedFields")
	trim := flag.Bool("trim-to-projection", false, "cache each Pod trimmed to what the opkit peer's projection keeps")
	flag.Parse()

	ctrl.SetLogger(logr.Discard())
	cfg, err := clientcmd.BuildConfigFromFlags("", flag.Lookup("kubeconfig").Value.String())
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeconfig:", err)
		os.Exit(1)
	}
	cfg.QPS = -1 // no client-side rate limit (opkit has none)

	cacheOptions := cache.Options{}
	switch {
	case *strip && *trim:
		fmt.Fprintln(os.Stderr, "-strip-managed-fields and -trim-to-projection exclude each other")
		os.Exit(2)
	case *strip:
		cacheOptions.DefaultTransform = cache.TransformStripManagedFields()
	case *trim:
		cacheOptions.DefaultTransform = trimToProjection
	}
	mgr, err := ctrl.NewManager(cfg, manager.Options{
		Cache:   cacheOptions,
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
	countEvents := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { events.Add(1); return true },
		UpdateFunc:  func(event.UpdateEvent) bool { events.Add(1); return true },
		DeleteFunc:  func(event.DeleteEvent) bool { events.Add(1); return true },
		GenericFunc: func(event.GenericEvent) bool { events.Add(1); return true },
	}
	err = ctrl.NewControllerManagedBy(mgr).
		For(&corev1.Pod{}, builder.WithPredicates(countEvents)).
		WithOptions(controller.Options{MaxConcurrentReconciles: *workers}).
		Complete(&tallyReadiness{client: mgr.GetClient()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		os.Exit(1)
	}
	ctx := ctrl.SetupSignalHandler()
	informer, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{}, cache.BlockUntilSynced(false))
	if err != nil {
		fmt.Fprintln(os.Stderr, "pod informer:", err)
		os.Exit(1)
	}
	go func() {
		for !informer.HasSynced() {
			time.Sleep(10 * time.Millisecond)
		}
		fmt.Fprintf(os.Stdout, "Y %d\n", time.Now().UnixNano())
	}()
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		for range tick.C {
			fmt.Fprintf(os.Stdout, "T %d %d %d %d %d\n", time.Now().UnixNano(),
				events.Load(), reconciles.Load(), ready.Load(), gone.Load())
		}
	}()
	if err := mgr.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "manager stopped:", err)
		os.Exit(1)
	}
}
