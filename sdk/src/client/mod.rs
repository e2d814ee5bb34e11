//! Helpers over `kube::Api` for what every reconciler does: server-side
//! apply, status patches, finalizers, owner references and Events, with
//! typed errors that say what went wrong.
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, ObjectMeta};
//! use opkit::client::{self, EventRecorder, ClientError};
//!
//! const MANAGER: &str = "memcached-operator";
//! const FINALIZER: &str = "cache.example.com/cleanup";
//!
//! # async fn example(kube: kube::Client, owner: std::sync::Arc<ConfigMap>) -> Result<(), Box<dyn std::error::Error>> {
//! let api: Api<ConfigMap> = Api::namespaced(kube.clone(), "shop");
//!
//! // Finalizers: safe next to other controllers' writes; conflicts retried.
//! let owner = client::add_finalizer(&api, &owner, FINALIZER).await?;
//!
//! // Desired state of a child, owned (controller=true) by `owner`, applied
//! // server-side as this controller's field manager.
//! let mut child = ConfigMap {
//!     metadata: ObjectMeta {
//!         name: Some("web-config".into()),
//!         namespace: Some("shop".into()),
//!         ..ObjectMeta::default()
//!     },
//!     data: Some([("colour".to_owned(), "blue".to_owned())].into()),
//!     ..ConfigMap::default()
//! };
//! client::set_controller_reference(&*owner, &mut child)?;
//! match client::apply(&api, &child, MANAGER).await {
//!     Ok(stored) => println!("applied, resourceVersion {:?}", stored.metadata.resource_version),
//!     // "forbidden: cannot patch resource "configmaps" in API group "" ...: add verb ..."
//!     Err(e @ ClientError::Forbidden { .. }) => eprintln!("{e}"),
//!     Err(e) => return Err(e.into()),
//! }
//!
//! // Events, deduplicated into series.
//! let events = EventRecorder::builder(kube, "cache.example.com/memcached").build()?;
//! events.normal(&*owner, "Applied", "Reconciling", "web-config is up to date");
//!
//! // When the owner is being deleted: clean up, then let it go.
//! client::remove_finalizer(&api, &owner, FINALIZER).await?;
//! # Ok(()) }
//! ```
//!
//! | helper | request | RBAC verb |
//! |---|---|---|
//! | [`apply`] | server-side apply, `force` | `patch` (and `create` for new objects) |
//! | [`apply_status`] | server-side apply on `/status`, `force` | `patch` on `<resource>/status` |
//! | [`patch_status`] | merge patch on `/status` | `patch` on `<resource>/status` |
//! | [`finalizer`] (one call), [`add_finalizer`], [`remove_finalizer`] | merge patch guarded by `resourceVersion`; `get` on conflict | `patch`, `get` |
//! | [`set_controller_reference`], [`set_owner_reference`] | none (local) | — |
//! | [`IgnoreNotFound`] on any request's result | — (a 404 becomes `Ok(None)`) | — |
//! | [`EventRecorder`] | create / merge-patch `events.k8s.io/v1` Events | `create`, `patch` on `events` |
//!
//! Every request error is a [`ClientError`]; a 403 is
//! [`ClientError::Forbidden`] naming the denied verb, resource, API group
//! and namespace.

mod apply;
mod error;
mod events;
mod finalizer;
mod not_found;
mod owner;
mod retry;
mod scope;

pub use crate::owner_error::OwnerError;
pub use apply::{apply, apply_status, patch_status};
pub use error::{ClientError, EventError};
pub use events::{EventRecorder, EventRecorderBuilder};
pub use finalizer::{
    FinalizerEvent, FinalizerInput, add_finalizer, finalizer, remove_finalizer,
    remove_finalizer_by_meta,
};
pub use not_found::IgnoreNotFound;
pub use owner::{set_controller_reference, set_owner_reference};
pub use retry::{RetryPolicy, retry_on_conflict};
pub use scope::ResourceScope;
