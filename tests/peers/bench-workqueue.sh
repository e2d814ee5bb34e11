#!/usr/bin/env bash
# Side-by-side workqueue benchmark: opkit vs client-go (and kube-runtime's
# scheduler where it fits), same machine, one run.
#
#   tests/peers/bench-workqueue.sh            # what `make bench-workqueue` runs
#   REPS=9 tests/peers/bench-workqueue.sh     # more repetitions (median is reported; default 5)
#   KUBE_RUNTIME=0 tests/peers/bench-workqueue.sh   # skip the kube-runtime peer
#
# Workloads (see tests/peers/opkit-workqueue and tests/peers/go-workqueue):
#   1. one producer, one worker: 1M distinct keys, add -> get -> done
#   2. four producers, four workers: 100k keys, each added 10 times
#   3. one producer, four workers: 100k add_after with 0-100 ms delays; time to drain
#
# Each program times itself (inputs are made before its clock starts) and
# reports wall seconds and process CPU seconds. Runs are interleaved
# (client-go, opkit, kube-runtime, client-go, ...) and the median of REPS is
# reported, so that background load hits every implementation alike.
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
reps="${REPS:-5}"
kube_runtime="${KUBE_RUNTIME:-1}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The opkit peer is a crate of its own, built as a user's operator is (see
# its Cargo.toml), in the target directory the other peers share.
peers_target="${CARGO_TARGET_DIR:-$root/target}/peers"
echo "building the opkit peer (release, the generated profile: fat LTO)..." >&2
CARGO_TARGET_DIR="$peers_target" cargo build --release --quiet \
  --manifest-path "$root/tests/peers/opkit-workqueue/Cargo.toml"
opkit_bin="$peers_target/release/opkit-workqueue"

echo "building client-go peer..." >&2
(cd "$root/tests/peers/go-workqueue" && go build -o "$work/go-workqueue" .)
go_bin="$work/go-workqueue"

kr_bin=""
if [ "$kube_runtime" != "0" ]; then
  echo "building kube-runtime peer (release; first build takes a few minutes)..." >&2
  kr_dir="$root/tests/peers/kube-runtime-scheduler"
  (cd "$kr_dir" && cargo build --release --quiet)
  kr_bin="$kr_dir/target/release/kube-runtime-scheduler-peer"
fi

results="$work/results.txt"
: >"$results"
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
for workload in 1 2 3; do
  for rep in $(seq 1 "$reps"); do
    echo "workload $workload, run $rep/$reps" >&2
    "$go_bin" "$workload" >>"$results"
    "$opkit_bin" "$workload" >>"$results"
    if [ -n "$kr_bin" ] && [ "$workload" != 2 ]; then
      "$kr_bin" "$workload" >>"$results"
    fi
  done
done

cpu_model="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  commit: $(cd "$root" && git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "machine: $(nproc) cores, ${cpu_model:-unknown CPU}, $(uname -sr); go $(go env GOVERSION), $(rustc --version | cut -d' ' -f1-2)"
echo "median of $reps interleaved runs per cell; load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

awk '
function median(list,    n, a, i, j, t) {
  n = split(list, a, " ")
  for (i = 2; i <= n; i++) { t = a[i]; j = i - 1; while (j > 0 && a[j] + 0 > t + 0) { a[j + 1] = a[j]; j-- } a[j + 1] = t }
  return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
/^RESULT/ {
  for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
  key = f["workload"] SUBSEP f["impl"]
  secs[key] = secs[key] " " f["secs"]; cpu[key] = cpu[key] " " f["cpu"]
  gets[key] = gets[key] " " f["gets"]; ops[key] = f["ops"]
}
END {
  name[1] = "1: 1 producer, 1 worker, 1M distinct"
  name[2] = "2: 4 producers, 4 workers, 100k keys x10"
  name[3] = "3: 100k add_after 0-100 ms, 4 workers"
  split("client-go opkit kube-runtime", impls, " ")
  printf "| workload | impl | ops/s | wall s | CPU s | processed | opkit/client-go ops/s | opkit/client-go CPU |\n"
  printf "|---|---|---:|---:|---:|---:|---:|---:|\n"
  for (w = 1; w <= 3; w++) {
    gk = w SUBSEP "client-go"; ok = w SUBSEP "opkit"
    for (i = 1; i <= 3; i++) {
      key = w SUBSEP impls[i]
      if (!(key in secs)) continue
      s = median(secs[key]); c = median(cpu[key]); g = median(gets[key])
      rate = (s > 0) ? ops[key] / s : 0
      ratio = ""; cratio = ""
      if (impls[i] == "opkit" && (gk in secs)) {
        ratio = sprintf("**%.2fx**", median(secs[gk]) / s)
        cratio = sprintf("**%.2fx**", c / median(cpu[gk]))
      }
      printf "| %s | %s | %.0f | %.3f | %.3f | %d | %s | %s |\n", name[w], impls[i], rate, s, c, g, ratio, cratio
    }
  }
}' "$results"
echo
echo "ops = add calls (workload 3: add_after calls); ops/s = ops / wall time until every item is done."
echo "opkit/client-go ops/s > 1 means opkit is faster; CPU < 1 means opkit used less CPU."
echo "kube-runtime: its scheduler has no processing set or done; workload 1 is a partial fit, 2 does not fit."
echo "On a shared machine other processes take CPU from every program alike; wall times stretch, CPU seconds much less."
