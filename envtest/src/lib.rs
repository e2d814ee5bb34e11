//! A real Kubernetes control plane for tests: etcd and kube-apiserver started
//! on loopback, the Rust counterpart of controller-runtime's envtest.
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::Namespace;
//! use kube::api::{Api, PostParams};
//! use opkit_envtest::ControlPlane;
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let plane = ControlPlane::start().await?;
//! let namespaces: Api<Namespace> = Api::all(plane.client()?);
//! let mut ns = Namespace::default();
//! ns.metadata.name = Some("demo".into());
//! namespaces.create(&PostParams::default(), &ns).await?;
//! println!("kubectl --kubeconfig {} get ns", plane.kubeconfig_path().display());
//! # Ok(()) }
//! ```
//!
//! # Using it
//!
//! `opkit-envtest` is a crate of its own, as controller-runtime's envtest is
//! a package of its own: a test-time dependency, kept out of the operator
//! binary, and the only opkit crate with `unsafe` code (process-death
//! signals, signalling the processes of a node's namespaces, the effective
//! user id), so that the runtime crate `opkit` can forbid it. Add it beside
//! `opkit` as a dev-dependency:
//!
//! ```toml
//! [dependencies]
//! opkit = "0.1"
//!
//! [dev-dependencies]
//! opkit-envtest = "0.1"
//! ```
//!
//! and import from `opkit_envtest` (`use opkit_envtest::{ControlPlane,
//! eventually};`). Its feature `webhook` (`opkit-envtest = { version =
//! "0.1", features = ["webhook"] }`, which `cargo opkit create webhook`
//! writes) adds `ControlPlane::install_webhooks`; it depends on `opkit` for
//! that, so `opkit` cannot re-export it: there is no `opkit::envtest`. It
//! turns on opkit's `dev-cert` feature, so tests can serve webhooks with
//! `opkit::webhook::DevCertificate`. Without it opkit-envtest does not
//! depend on opkit at all. It replaces the former `opkit = { features =
//! ["envtest"] }`.
//!
//! # Binaries
//!
//! `etcd` and `kube-apiserver` are looked for in `$KUBEBUILDER_ASSETS` (the
//! layout setup-envtest makes), then `$OPKIT_ASSETS`, then the cache that
//! `scripts/controlplane/build.sh`, shipped in this crate, fills from the Go
//! module proxy (opkit's `make controlplane` runs it):
//! `${OPKIT_CACHE:-$HOME/.cache/opkit}/controlplane/v1.36.3/bin`. When none
//! has them, [`EnvtestError::MissingBinary`] says where it looked and names
//! that script by its path in this crate's source directory.
//!
//! # What runs
//!
//! - etcd on free loopback ports, data in a temporary directory, `--unsafe-no-fsync`.
//! - kube-apiserver on a free loopback port with TLS (a CA and serving
//!   certificate generated in Rust), client-certificate authentication,
//!   `--authorization-mode=RBAC`, and service-account signing keys so the
//!   TokenRequest API issues real tokens.
//! - No controller-manager or scheduler: nothing garbage-collects owned
//!   objects, finalizes namespaces, or runs Pods. Test your operator's
//!   behaviour, not the built-in controllers'. When a test needs them, a
//!   [`Cluster`] runs kube-controller-manager, kube-scheduler and a real
//!   node (containerd, kubelet, kube-proxy) as well.
//!
//! Images: [`Registry`] runs a real OCI registry (distribution) on loopback
//! for tests that push images ([`RegistryBuilder::htpasswd`]: over HTTPS,
//! with a password, as a private registry); [`ClusterBuilder::with_registry`]
//! starts one the cluster's node pulls from ([`ClusterBuilder::with_registry_auth`]:
//! a private one, whose CA the node trusts).
//!
//! Webhooks (feature `webhook`): `ControlPlane::install_webhooks` points
//! the apiserver at a webhook server on loopback (see `opkit::webhook`),
//! trusting a `DevCertificate` (`opkit::webhook::DevCertificate`).
//!
//! Identities: [`ControlPlane::client`] is an admin in `system:masters`;
//! [`ControlPlane::client_as`] acts as any user and groups, subject to RBAC;
//! [`ControlPlane::client_with_token`] uses a bearer token.
//!
//! Both processes are killed, and the temporary directory removed, when the
//! [`ControlPlane`] is stopped or dropped, even while a test panics. On Linux
//! they also die with the test process if it is killed outright.
//!
//! Waiting: [`eventually`] polls until the server (or your operator) has
//! done something, and fails the test naming what never happened.
//!
//! Do not start a control plane on tokio's paused clock: start-up waits on
//! real time.
#![deny(missing_docs)]
#![deny(unsafe_code)]
#![warn(clippy::unwrap_used)]
// docs.rs: items behind a feature say so (`--cfg docsrs`, nightly).
#![cfg_attr(docsrs, feature(doc_cfg))]

mod assets;
mod cluster;
mod control_plane;
mod crds;
mod error;
mod eventually;
mod footprint;
mod kubeconfig;
mod pki;
mod process;
mod registry;
#[cfg(feature = "webhook")]
mod webhooks;

pub use assets::{Binaries, DEFAULT_KUBERNETES_VERSION, find_binaries};
pub use cluster::{
    CLUSTER_DOMAIN, Cluster, ClusterBuilder, DEFAULT_DNS_ASSETS, DEFAULT_NODE_ASSETS, DnsAssets,
    Footprint, ImageArchive, Ipv4Cidr, NODE_NAME, NodeAssets, find_dns_assets, find_node_assets,
};
pub use cluster::{DEFAULT_IMAGES, find_images_dir};
pub use control_plane::{ControlPlane, ControlPlaneBuilder};
pub use error::{EnvtestError, Result};
pub use eventually::{EVENTUALLY_POLL_INTERVAL, eventually};
pub use registry::{DEFAULT_REGISTRY_VERSION, Registry, RegistryBuilder, find_registry_binary};
