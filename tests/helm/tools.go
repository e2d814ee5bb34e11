//go:build tools

// Package helm only pins the version of the Helm CLI (helm.sh/helm/v4, its
// `helm` command) that build.sh compiles for the tests of the Helm chart
// `cargo opkit chart` renders. It is a module of its own so its dependencies
// never move the Kubernetes, registry or CoreDNS builds.
package helm

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
