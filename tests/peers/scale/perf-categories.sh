#!/usr/bin/env bash
# Shares of a peer's per-event profile by category (BENCHMARKS.md, "Where
# opkit's CPU per event goes now"): each sample of a `perf record -g` file
# (as the bench-scale driver writes with SCALE_PERF_DIR) counts once, for
# the first category in the list below whose pattern one of its frames
# matches (" ring::" with its space: `String::` is not the ring crate);
# samples matching none are "other" (malloc and free, copies).
#
#   tests/peers/scale/perf-categories.sh /tmp/perf/opkit-<pid>.data
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 PERF_DATA" >&2; exit 2; }
perf script -i "$1" 2>/dev/null | awk '
BEGIN {
  RS = ""
  n = split("json_strip|Lengths::scan|decode_watch_line|decode::protobuf|drop_in_place<|hyper::|rustls| ring::|ring_core|park_internal|park_timeout|watch_loop|opkit::cache::informer|processor|opkit::controller|workqueue|tokio::runtime", pat, "|")
  # pattern index -> category (several patterns share one)
  split("cut,scan,decode,pb,drop,http,http,http,http,park,park,reflector,informer,informer,controller,controller,tokio", cat_of, ",")
  names["cut"] = "managedFields cut (json_strip)"
  names["scan"] = "array-length scan (exact capacity)"
  names["decode"] = "JSON decode into k8s-openapi"
  names["pb"] = "protobuf decode into k8s-openapi (generated decoders, wire)"
  names["drop"] = "dropping objects (drop_in_place: replaced and deleted ones)"
  names["http"] = "HTTP/1 and TLS (hyper, rustls, ring)"
  names["park"] = "parked and woken (runtime park)"
  names["reflector"] = "reflector: body chunks, FIFO push"
  names["informer"] = "informer: pop, store, distribution"
  names["controller"] = "controller: workqueue and reconcile"
  names["tokio"] = "tokio scheduling"
  names["other"] = "other (malloc and free, copies)"
  order = "decode pb drop park other tokio http reflector controller cut scan informer"
}
{
  sub(/^[^\n]*\n/, "")  # the sample header line; the rest are its frames
  samples++
  split($0, frame, "\n")
  if (frame[1] ~ /\[kernel\.kallsyms\]\)$/) kernel++
  c = "other"
  for (i = 1; i <= n; i++) if (index($0, pat[i])) { c = cat_of[i]; break }
  count[c]++
}
END {
  if (!samples) { print "no samples" > "/dev/stderr"; exit 1 }
  m = split(order, keys, " ")
  for (i = 1; i <= m; i++) printf "| %s | %.1f %% |\n", names[keys[i]], 100 * count[keys[i]] / samples
  printf "%d samples, %.1f %% in the kernel (leaf frame)\n", samples, 100 * kernel / samples
}'
