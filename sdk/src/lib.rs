//! opkit: build Kubernetes operators in Rust, controller-runtime style.
//!
//! # Cargo features
//!
//! An operator compiles what it uses. With no feature, opkit is what a
//! plain reconciler with metrics needs: the shared informer cache (JSON,
//! read-your-own-writes, projections), controllers and the workqueue, the
//! manager with `/metrics` over plain HTTP, `/healthz` and `/readyz`,
//! leader election, the client helpers (server-side apply, finalizers,
//! owner references, Events), RBAC and CRD manifests, and
//! `#[derive(Controller)]`. Each capability beyond that is a feature:
//!
//! | feature | adds | builds in |
//! |---|---|---|
//! | `webhook` | `opkit::webhook`: validating, defaulting and conversion webhooks served over HTTPS, and their manifests; `ManagerBuilder::webhook_server` | rustls, tokio-rustls, hyper, json-patch; kube's `admission` |
//! | `dev-cert` (with `webhook`) | `webhook::DevCertificate` (a CA and serving certificate for tests and a laptop) and `webhook::ManagedCertificate` (the manager issues its serving certificate in a cluster without cert-manager) | rcgen, base64; kube's `jsonpatch` |
//! | `secure-metrics` | `manager::SecureMetrics`: `/metrics` over HTTPS to scrapers whose token may `get /metrics` (TokenReview, SubjectAccessReview); `rbac::Rules::metrics_auth`, `rbac::metrics_reader_role` | rustls, tokio-rustls, hyper, rcgen |
//! | `shard` | `opkit::shard`: the replicas of one Deployment split the objects; `ManagerBuilder::sharding`, `Controller::sharded`, `rbac::Rules::sharding` | no other crate |
//! | `multicluster` | `opkit::multicluster`: one operator reconciling across a fleet of clusters that join, rotate credentials and leave at run time; `Controller::multicluster` (`#[controller(.., multicluster)]`), `Manager::set_cluster_provider`, `Fleet`, the static, kubeconfig-Secret and `ClusterSet` providers, `Context::cluster` | no other crate |
//! | `protobuf` | ConfigMaps and Secrets listed and watched as protobuf rather than JSON: less CPU for the API server and the operator, less memory while decoding | k8s-pb, prost |
//!
//! **None is on by default**, each for its reason:
//!
//! - `webhook`, `secure-metrics`: a TLS server. Most operators serve no
//!   webhook, and plain-HTTP metrics are controller-runtime's default; a
//!   project that scrapes over HTTPS says so.
//! - `shard`: for the few operators whose objects outgrow one replica; it
//!   adds no crate, but its code and API only matter to them.
//! - `multicluster`: for hub operators acting on a fleet; most operators
//!   reconcile the cluster they run in. It adds no crate.
//! - `protobuf`: opkit reads only ConfigMaps and Secrets as protobuf
//!   (every other kind, custom resources included, is JSON either way), and
//!   k8s-pb, the protobuf bindings of every built-in kind, is one of the
//!   larger crates of the build. An operator that caches many ConfigMaps or
//!   Secrets turns it on (the `configmap-watcher` example does); one that
//!   watches its own CRDs and Deployments would build it for nothing.
//!
//! `cargo opkit new` turns on what the project it writes uses:
//! `features = ["secure-metrics"]` (its `main` serves `/metrics` over HTTPS
//! by default, `--metrics-secure`), plus `shard` with `--sharding`; `cargo
//! opkit create webhook` adds `webhook` and `dev-cert` (and the `webhook`
//! feature of `opkit-envtest`, which installs webhooks in tests).
//!
//! OpenTelemetry is not an opkit feature: opkit emits `tracing` spans (one
//! per reconcile, with the controller, namespace and name), and a generated
//! project's own `otel` feature exports them over OTLP (its
//! `src/telemetry.rs`); opkit needs nothing for it.
#![deny(missing_docs)]
// docs.rs: items behind a feature say so (`--cfg docsrs`, nightly).
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(clippy::unwrap_used)]

// What a reconcile is asked and answers: leaf values, re-exported by
// `reconcile` (the client's `finalizer` helper, below it, returns them).
mod action;
#[cfg(feature = "multicluster")]
mod cluster_request;
mod request;

pub mod cache;
pub mod client;
pub mod conditions;

pub mod config;
pub mod controller;
pub mod derive;
mod handler;
mod host;
pub mod leader;
pub mod manager;
pub mod manifest;
pub mod metrics;
#[cfg(feature = "multicluster")]
#[cfg_attr(docsrs, doc(cfg(feature = "multicluster")))]
pub mod multicluster;
pub mod predicate;
pub mod rbac;
pub mod reconcile;
#[cfg(feature = "shard")]
#[cfg_attr(docsrs, doc(cfg(feature = "shard")))]
pub mod shard;
#[cfg(feature = "webhook")]
#[cfg_attr(docsrs, doc(cfg(feature = "webhook")))]
pub mod webhook;
// Secure metrics serve HTTPS with the webhook server's TLS parts (the
// certificate reloader, the accept loop and their error): without the
// `webhook` feature only those are built, and `opkit::webhook` is not public.
#[cfg(all(feature = "secure-metrics", not(feature = "webhook")))]
mod webhook;
pub mod workqueue;

#[cfg(test)]
mod test_log;

pub use derive::ControllerWiring;
/// `#[derive(Controller)]`: see [`derive`](mod@derive) for the `#[controller(...)]` options.
pub use opkit_macros::Controller;
