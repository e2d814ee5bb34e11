//go:build tools

// Package controlplane only pins the Kubernetes and etcd versions that
// build.sh compiles into kube-apiserver and etcd for opkit's tests.
package controlplane

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
