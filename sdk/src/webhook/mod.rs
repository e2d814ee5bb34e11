//! Admission and conversion webhooks: validate, default (mutate) and
//! convert custom resources, served over HTTPS by the manager.
//!
//! ```no_run
//! use kube::CustomResource;
//! use opkit::manager::{Manager, ManagerError};
//! use opkit::webhook::{
//!     AdmissionRequest, Defaulter, Denied, Validator, Verdict, WebhookServer, Webhooks,
//! };
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
//! #[kube(group = "cache.example.com", version = "v1", kind = "Memcached", namespaced)]
//! pub struct MemcachedSpec {
//!     pub size: Option<i32>,
//! }
//!
//! struct MemcachedWebhook;
//!
//! impl Validator<Memcached> for MemcachedWebhook {
//!     async fn validate_create(&self, m: &Memcached, _: &AdmissionRequest) -> Verdict {
//!         match m.spec.size {
//!             Some(size) if size > 10 => Err(Denied::invalid("spec.size must be at most 10")),
//!             _ => Ok(vec![]),
//!         }
//!     }
//! }
//!
//! impl Defaulter<Memcached> for MemcachedWebhook {
//!     async fn default(&self, m: &mut Memcached, _: &AdmissionRequest) -> Verdict {
//!         m.spec.size.get_or_insert(3);
//!         Ok(vec![])
//!     }
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), ManagerError> {
//!     let webhooks = Webhooks::new()
//!         .validating::<Memcached, _>(MemcachedWebhook)
//!         .defaulting::<Memcached, _>(MemcachedWebhook);
//!     let manager = Manager::builder()
//!         .webhook_server(WebhookServer::new(webhooks).cert_dir("/certs"))
//!         .health_probe_bind_address(":8081")
//!         .build()
//!         .await?;
//!     manager.run().await
//! }
//! ```
//!
//! # What runs
//!
//! - [`WebhookServer`]: HTTPS (rustls, ring) on `:9443`, HTTP/1.1, one
//!   route per webhook. The certificate and key are read from files
//!   (`tls.crt` / `tls.key` in the [cert dir](WebhookServer::cert_dir)) and
//!   read again when they change, checked every
//!   [reload interval](WebhookServer::reload_interval); a pair caught
//!   half-written keeps the previous certificate until both files match.
//! - [`Validator`]: create / update / delete checks returning warnings or
//!   [`Denied`], whose message the client sees.
//! - [`Defaulter`]: change the typed object; the JSON patch (RFC 6902) is
//!   computed from the difference.
//! - [`Conversion`]: CRD versions converted through a [`Hub`] by
//!   [`Spoke`]s, served on `/convert`.
//! - `ManagedCertificate` (feature `dev-cert`): in a cluster without
//!   cert-manager, the manager issues the serving certificate itself, keeps
//!   it in a Secret and injects its CA into the configurations and CRDs
//!   ([`WebhookServer::managed_certificate`]).
//! - `LocalWebhooks` (feature `dev-cert`): a manager running outside the
//!   cluster (`make run`) serves the webhooks itself, registered by URL
//!   with an apiserver on the same machine while it runs
//!   ([`WebhookServer::local`]).
//!
//! # Manifests
//!
//! The same [`Webhooks`] renders the `ValidatingWebhookConfiguration`,
//! the `MutatingWebhookConfiguration` and a CRD's conversion stanza
//! ([`validating_configuration`](Webhooks::validating_configuration),
//! [`mutating_configuration`](Webhooks::mutating_configuration),
//! [`crd_with_conversion`](Webhooks::crd_with_conversion)), pointing at a
//! Service in the cluster or, for tests, at the server on loopback
//! ([`WebhookClient`]). `ControlPlane::install_webhooks` of the
//! `opkit-envtest` crate installs them on a test control plane, trusting a
//! [`DevCertificate`] (feature `dev-cert`, which `opkit-envtest` turns on).

#[cfg(feature = "webhook")]
mod admission;
#[cfg(feature = "webhook")]
mod conversion;
#[cfg(feature = "webhook")]
mod defaulting;
#[cfg(feature = "dev-cert")]
mod dev_cert;
mod error;
pub(crate) mod https;
#[cfg(feature = "dev-cert")]
mod local;
#[cfg(feature = "dev-cert")]
mod managed_cert;
#[cfg(feature = "webhook")]
mod manifests;
#[cfg(feature = "webhook")]
mod server;
pub(crate) mod tls;
#[cfg(feature = "webhook")]
mod validating;
#[cfg(feature = "webhook")]
mod webhooks;

#[cfg(feature = "webhook")]
pub use admission::{AdmissionRequest, Denied, Operation, Verdict, Warnings};
#[cfg(feature = "webhook")]
pub use conversion::{Conversion, ConversionError, Hub, Spoke};
#[cfg(feature = "webhook")]
pub use defaulting::Defaulter;
#[cfg(feature = "dev-cert")]
#[cfg_attr(docsrs, doc(cfg(feature = "dev-cert")))]
pub use dev_cert::{CA_FILE, CERT_FILE, DevCertificate, KEY_FILE};
pub use error::WebhookError;
#[cfg(feature = "dev-cert")]
#[cfg_attr(docsrs, doc(cfg(feature = "dev-cert")))]
pub use local::LocalWebhooks;
#[cfg(feature = "dev-cert")]
#[cfg_attr(docsrs, doc(cfg(feature = "dev-cert")))]
pub use managed_cert::{HOSTS_ANNOTATION, ManagedCertificate};
#[cfg(feature = "webhook")]
pub use manifests::WebhookClient;
#[cfg(feature = "webhook")]
pub use server::{BoundWebhookServer, DEFAULT_CERT_DIR, DEFAULT_PORT, WebhookServer};
pub use tls::DEFAULT_RELOAD_INTERVAL;
#[cfg(feature = "webhook")]
pub use validating::Validator;
#[cfg(feature = "webhook")]
pub use webhooks::{CONVERSION_PATH, FailurePolicy, WebhookOptions, Webhooks};
