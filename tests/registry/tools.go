//go:build tools

// Package registry only pins the version of the OCI registry
// (github.com/distribution/distribution/v3, its `registry` command) that
// build.sh compiles for opkit's image tests. It is a module of its own so its
// dependencies never move the Kubernetes or containerd builds.
package registry

import (
	_ "github.com/distribution/distribution/v3/cmd/registry"
)
