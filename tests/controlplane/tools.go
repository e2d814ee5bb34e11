//go:build tools

// Package controlplane only pins the Kubernetes and etcd versions that
// build.sh compiles into kube-apiserver and etcd for opkit's tests, and that
// build-node.sh compiles into the controllers and node components of the
// local cluster.
package controlplane

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
