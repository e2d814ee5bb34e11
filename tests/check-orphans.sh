#!/usr/bin/env bash
# Judges what one test run left behind, and only that: every process,
# directory, network link, host route and cgroup opkit's envtest made while
# OPKIT_RUN_DIR was set is listed in $OPKIT_RUN_DIR/footprint (see
# envtest/src/footprint.rs). A control plane or cluster that another
# run, or a `make cluster` in another terminal, started is not looked at.
#
#   OPKIT_RUN_DIR=/tmp/run tests/check-orphans.sh
#
# Processes get a few seconds to finish dying (a shared control plane dies
# with its test process, just after it exits).
set -euo pipefail
: "${OPKIT_RUN_DIR:?set OPKIT_RUN_DIR to the directory the test run recorded into (make test does)}"
footprint="$OPKIT_RUN_DIR/footprint"
if [ ! -s "$footprint" ]; then
  echo "check-orphans: this run recorded nothing to check"
  exit 0
fi

left() {
  local kind name rest pid start now
  while read -r kind name rest; do
    case "$kind" in
      process)
        pid=$name; start=${rest%% *}
        now=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | awk '$1 != "Z" && $1 != "X" {print $20}') || true
        [ -n "$now" ] && [ "$now" = "$start" ] && echo "process $pid (${rest#* }) still runs"
        ;;
      dir) [ -e "$name" ] && echo "directory $name still exists" ;;
      link) [ -e "/sys/class/net/$name" ] && echo "network link $name still exists" ;;
      route) [ -n "$(ip -4 route show exact "$name" 2>/dev/null)" ] && echo "host route $name still exists" ;;
      cgroup)
        for d in /sys/fs/cgroup/*/"$name" /sys/fs/cgroup/"$name"; do
          [ -d "$d" ] && echo "cgroup $d still exists"
        done
        ;;
    esac
  done < "$footprint"
  return 0
}

for _ in $(seq 1 50); do
  report=$(left)
  [ -z "$report" ] && break
  sleep 0.1
done
entries=$(wc -l < "$footprint")
if [ -n "$report" ]; then
  echo "check-orphans: the test run left behind:"
  echo "$report"
  exit 1
fi
echo "check-orphans: all $entries processes, directories, links and cgroups this run made are gone"
