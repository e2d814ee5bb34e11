// e2e-controller-runtime: the controller-runtime peer of `make bench-e2e`
// (tests/peers/bench-e2e.sh). The same small operator as the opkit and
// kube-runtime peers: for every ConfigMap labelled bench=src, keep an owned
// ConfigMap `<name>-derived` whose data["source-hash"] is the hash of the
// source's payload, and write that hash back on the source as the
// annotation bench/observed — each write only when it differs, so it
// converges.
//
// controller-runtime's defaults (priority queue, protobuf for built-in
// kinds, cache-backed client reads), except: 4 workers, no client-side rate
// limit (QPS -1, as kube-rs and opkit have none), metrics server off, the
// cache restricted to one namespace, logs discarded.
//
// Output, one line per event (read by the driver):
//
//	S <name> <resourceVersion|-> <unix ns> <requests so far>   reconcile start
//	W <name> <hash> <unix ns> <requests so far>               source converged
//
//	e2e-controller-runtime -kubeconfig K -namespace NS -salt S [-workers 4]
package main

import (
	"context"
	"flag"
	"fmt"
	"hash/fnv"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

var requests atomic.Int64

// countingTransport counts every HTTP request the client sends.
type countingTransport struct{ next http.RoundTripper }

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	requests.Add(1)
	return c.next.RoundTrip(r)
}

// sourceHash is FNV-1a 64 over salt, a newline and the payload, as hex.
func sourceHash(salt, payload string) string {
	h := fnv.New64a()
	h.Write([]byte(salt))
	h.Write([]byte{'\n'})
	h.Write([]byte(payload))
	return fmt.Sprintf("%016x", h.Sum64())
}

type reconciler struct {
	client client.Client
	salt   string
}

func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var src corev1.ConfigMap
	err := r.client.Get(ctx, req.NamespacedName, &src)
	if apierrors.IsNotFound(err) {
		fmt.Fprintf(os.Stdout, "S %s - %d %d\n", req.Name, time.Now().UnixNano(), requests.Load())
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	fmt.Fprintf(os.Stdout, "S %s %s %d %d\n", req.Name, src.ResourceVersion, time.Now().UnixNano(), requests.Load())
	if src.Labels["bench"] != "src" {
		return reconcile.Result{}, nil
	}
	hash := sourceHash(r.salt, src.Data["payload"])

	var derived corev1.ConfigMap
	key := types.NamespacedName{Namespace: req.Namespace, Name: req.Name + "-derived"}
	err = r.client.Get(ctx, key, &derived)
	switch {
	case apierrors.IsNotFound(err):
		derived = corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name:      key.Name,
				Namespace: key.Namespace,
				Labels:    map[string]string{"bench": "derived"},
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1",
					Kind:       "ConfigMap",
					Name:       src.Name,
					UID:        src.UID,
					Controller: ptr(true),
				}},
			},
			Data: map[string]string{"source-hash": hash},
		}
		if err := r.client.Create(ctx, &derived); err != nil {
			return reconcile.Result{}, err
		}
	case err != nil:
		return reconcile.Result{}, err
	case derived.Data["source-hash"] != hash:
		patch := fmt.Sprintf(`{"data":{"source-hash":%q}}`, hash)
		if err := r.client.Patch(ctx, &derived, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			return reconcile.Result{}, err
		}
	}

	if src.Annotations["bench/observed"] != hash {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"bench/observed":%q}}}`, hash)
		if err := r.client.Patch(ctx, &src, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			return reconcile.Result{}, err
		}
	}
	fmt.Fprintf(os.Stdout, "W %s %s %d %d\n", req.Name, hash, time.Now().UnixNano(), requests.Load())
	return reconcile.Result{}, nil
}

func ptr[T any](v T) *T { return &v }

func main() {
	// -kubeconfig is controller-runtime's own flag (pkg/client/config).
	namespace := flag.String("namespace", "", "namespace of the ConfigMaps")
	salt := flag.String("salt", "", "mixed into the hash, so that every run has work to do")
	workers := flag.Int("workers", 4, "concurrent reconciles")
	flag.Parse()

	ctrl.SetLogger(logr.Discard())
	cfg, err := clientcmd.BuildConfigFromFlags("", flag.Lookup("kubeconfig").Value.String())
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeconfig:", err)
		os.Exit(1)
	}
	cfg.QPS = -1 // no client-side rate limit (kube-rs and opkit have none)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt} })

	mgr, err := ctrl.NewManager(cfg, manager.Options{
		Cache:   cache.Options{DefaultNamespaces: map[string]cache.Config{*namespace: {}}},
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
	isSource := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()["bench"] == "src" })
	err = ctrl.NewControllerManagedBy(mgr).
		For(&corev1.ConfigMap{}, builder.WithPredicates(isSource)).
		Owns(&corev1.ConfigMap{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: *workers}).
		Complete(&reconciler{client: mgr.GetClient(), salt: *salt})
	if err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		os.Exit(1)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintln(os.Stderr, "manager stopped:", err)
		os.Exit(1)
	}
}
