// Command pause is the sandbox ("infra") container of opkit's local cluster:
// it holds a pod's namespaces open, reaps orphaned children, and exits when
// it is told to stop (SIGINT or SIGTERM). build-node.sh packs it into the
// pause image; the cluster also runs it as the init of its node namespaces.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		// Reap every child that has exited; pause may be PID 1 of a namespace.
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
