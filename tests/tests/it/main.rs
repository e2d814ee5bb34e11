//! opkit's end-to-end tests against a real kube-apiserver and etcd (and the
//! local cluster), in one test binary: one module per area, the fixtures
//! they share (`*_support`) compiled once. Run one area with
//! `cargo test -p opkit-tests --test it cache_watch::`.

mod cache_consistency;
mod cache_handlers;
mod cache_projection;
mod cache_protobuf;
mod cache_protobuf_kinds;
mod cache_reads;
mod cache_undecodable;
mod cache_watch;
mod client_helpers;
mod cluster;
mod controller;
mod deploy;
mod deploy_helm;
mod deploy_in_cluster;
mod envtest;
mod external_kinds;
mod image;
mod leader;
mod macros_derive;
mod macros_ui;
mod manager;
mod metrics_dashboard;
mod metrics_secure;
mod multicluster;
mod read_your_writes;
mod shard;
mod shard_bad_input;
mod shard_bench;
mod shard_cache;
mod shard_in_cluster;
mod shard_label_takeover;
mod shard_pause_bench;
mod shard_processes;
mod user_roles;
mod webhook;
mod webhook_local;

mod cache_support;
mod deploy_support;
mod shard_support;
mod webhook_support;
