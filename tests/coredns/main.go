// Command coredns is the cluster DNS of opkit's local cluster: CoreDNS
// (github.com/coredns/coredns, the version of go.mod) with only the plugins
// a single-node cluster needs, as CoreDNS documents for custom builds
// (https://coredns.io/2017/07/25/compile-time-enabling-or-disabling-plugins/).
//
// There is deliberately no `forward` (nor any other plugin that asks a
// server outside the cluster): a name outside cluster.local fails inside
// the node, and no DNS query leaves the machine.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// directives is the plugin chain's order: a subset of CoreDNS's plugin.cfg,
// in its order.
var directives = []string{
	"reload",
	"ready",
	"health",
	"errors",
	"log",
	"cache",
	"kubernetes",
}

func init() {
	dnsserver.Directives = directives
}

func main() {
	coremain.Run()
}
