//! client-go's informer machinery: a [`ListWatch`] says what to list and
//! watch, the reflector lists then watches into a `DeltaFifo`, the
//! informer pops its deltas into the indexed store and hands them to every
//! event handler's own buffer. One [`SharedIndexInformer`] ties them
//! together; the [shared cache](crate::cache) makes and shares them.
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use opkit::cache::{InformerEvent, SharedCache, handler_fn};
//!
//! # async fn doc(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let cache = SharedCache::new(client);
//! let informer = cache.informer::<ConfigMap>()?;
//! informer.add_event_handler(handler_fn(|e: InformerEvent<ConfigMap>| {
//!     if let InformerEvent::Add { obj, .. } = e {
//!         println!("add {:?}", obj.metadata.name);
//!     }
//! }))?;
//! cache.start()?;
//! informer.wait_for_sync().await?;
//! # Ok(()) }
//! ```
//!
//! This folder imports nothing of the cache above it but its error, key
//! and undecodable-object types and the decoders: what a reader waiting
//! for its own writes needs of an informer is handed in
//! ([`WriteObserver`]), and what a sharded informer lists by too
//! ([`ListFilter`]).

mod backoff;
mod delta_fifo;
mod list_watch;
mod processor;
mod reflector;
mod reflector_config;
mod reflector_metrics;
mod reflector_store;
mod shared_index_informer;
#[cfg(feature = "shard")]
mod standalone;
mod store;
mod tasks;
mod wire;
mod write_observer;

pub use backoff::BackoffConfig;
pub use delta_fifo::{DeletedFinalStateUnknown, DeletedObject};
pub(crate) use list_watch::ListWatch;
pub use processor::{
    EventHandler, HandlerFn, HandlerRegistration, InformerEvent, MINIMUM_RESYNC_PERIOD, handler_fn,
};
pub(crate) use reflector_config::{ListFilter, strip_managed_fields};
pub use reflector_config::{ReflectorConfig, StreamingList, Transform, WatchErrorHandler};
pub use reflector_metrics::ReflectorStats;
pub(crate) use shared_index_informer::InformerOptions;
pub use shared_index_informer::SharedIndexInformer;
#[cfg(feature = "shard")]
pub(crate) use standalone::{metadata_informer, server_filters_by_shard_selector};
pub use store::{NAMESPACE_INDEX, Store};
pub(crate) use write_observer::WriteObserver;
#[cfg(test)]
pub(crate) use {list_watch::tests as list_watch_tests, store::Indexer};
