//! The shared informer cache: client-go's informer machinery (Reflector,
//! DeltaFIFO, Indexer, shared processor) in async Rust, and the
//! [`SharedCache`] that hands out exactly one informer per watched scope.
//!
//! ```no_run
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use opkit::cache::{InformerEvent, Scope, SharedCache, handler_fn};
//!
//! # async fn doc(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let cache = SharedCache::new(client);
//! // Every caller asking for the same (kind, namespace, selectors) gets the same informer.
//! let informer = cache.informer::<ConfigMap>()?;
//! informer.add_event_handler(handler_fn(|e: InformerEvent<ConfigMap>| match e {
//!     InformerEvent::Add { obj, is_in_initial_list } => println!("add {:?} {is_in_initial_list}", obj.metadata.name),
//!     InformerEvent::Update { new, is_resync, .. } => println!("update {:?} resync={is_resync}", new.metadata.name),
//!     InformerEvent::Delete { obj } => println!("delete {:?} tombstone={}", obj.object().metadata.name, obj.is_tombstone()),
//! }))?;
//! // A read-only handle, usable before the cache syncs (it fills as it does).
//! let config_maps = cache.store::<ConfigMap>()?;
//! let _prod = cache.informer_for(Scope::<ConfigMap>::all().namespace("prod").labels("app=shop"))?;
//! cache.start()?;
//! cache.wait_for_sync(Duration::from_secs(30)).await?; // names the kind that did not sync
//! let cm = config_maps.get(Some("default"), "kube-root-ca.crt");
//! // Reads through the cache wait (bounded) for this process's own writes.
//! let all = cache.list::<ConfigMap>(Some("default")).await?;
//! # let _ = (cm, all);
//! # Ok(()) }
//! ```
//!
//! # Scope and reads
//!
//! A cache watches all namespaces, or one ([`SharedCacheBuilder::namespace`],
//! what [`Manager`](crate::manager::ManagerBuilder::namespace) sets).
//! [`informer`](SharedCache::informer), [`store`](SharedCache::store) and
//! the reads [`get`](SharedCache::get), [`list`](SharedCache::list) and
//! [`by_index`](SharedCache::by_index) use that default scope; asking a
//! namespaced cache for another namespace is an error that says so.
//! Informers of other scopes ([`informer_for`](SharedCache::informer_for))
//! are read through their own [`store`](SharedIndexInformer::store).
//!
//! Users read; only the informer writes. [`Store`] has no write methods.
//!
//! # The pieces
//!
//! [`SharedIndexInformer`] (the list and watch requests, reflector,
//! DeltaFIFO and store tied together, with event handlers and indexes; one
//! per scope, made and started by the [`SharedCache`]), [`Store`] (read-only), [`EventHandler`] and [`InformerEvent`]. The
//! reflector relists on 410, pages or streams the initial list, and backs
//! off with jitter ([`ReflectorConfig`], [`BackoffConfig`]).
//!
//! Memory: objects are stored once, as `Arc<K>`, shared by the store, the
//! queue and every notification; `metadata.managedFields` is stripped before
//! storing unless [`SharedCacheBuilder::keep_managed_fields`] is set (or
//! kept as raw bytes for one kind by [`WithManagedFields`]). Stripped, they
//! are never decoded: protobuf skips the field and JSON bytes have it cut
//! out before they are deserialized. JSON is decoded with every `Vec` at
//! its length ([`from_slice_exact`]), not with the room serde's pushes
//! leave (a Pod's one container status in room for four). A
//! per-kind transform ([`SharedCacheBuilder::transform`], client-go's
//! `SetTransform`) can slim objects further before they are stored, and a
//! [`Projection`] caches a type of the user's own made from each object
//! (`Projected<K, P>`: one informer per `(K, P)`, mapped once per event).
//! Whatever the cache holds is [`Cacheable`]: a whole kind, or a
//! projection that says through its type what it keeps.
//!
//! Wire format: with the `protobuf` feature, every built-in kind is listed
//! and watched as protobuf, as client-go does (a third of the API server's
//! CPU of JSON for the same list, and less decoding here); custom
//! resources, dynamic and metadata-only types as JSON. A server answering
//! JSON is read as JSON. [`ReflectorConfig::protobuf`] turns protobuf off,
//! [`ReflectorConfig::json_kinds`] keeps named kinds on JSON.
//!
//! # Layout
//!
//! Three jobs, each behind its own front door: `informer` (client-go's
//! machinery: list-watch, reflector, DeltaFIFO, indexed store, handlers),
//! the decoders (`decode`: JSON and protobuf, from bytes to objects), and
//! [`read_your_writes`] (the write record and the reads that wait on it).
//! This module shares informers per scope ([`SharedCache`]) and reads them.

mod any_informer;
mod builder;
mod cacheable;
mod decode;
mod error;
mod informer;
mod key;
mod managed_fields;
mod projection;
pub mod read_your_writes;
mod reads;
mod scope;
mod shared_cache;
mod start;
pub mod undecodable;

pub use builder::SharedCacheBuilder;
#[doc(hidden)]
#[cfg(feature = "protobuf")]
pub use cacheable::decode_protobuf_list;
pub(crate) use cacheable::drops_owner_references as projection_drops_owner_references;
pub use cacheable::{Cacheable, ProjectionInfo};
pub use decode::from_slice_exact;
pub use error::{ApiStatus, CacheError, IndexError, ReflectorError, UnobservedWrite};
pub use informer::{
    BackoffConfig, DeletedFinalStateUnknown, DeletedObject, EventHandler, HandlerFn,
    HandlerRegistration, InformerEvent, MINIMUM_RESYNC_PERIOD, NAMESPACE_INDEX, ReflectorConfig,
    ReflectorStats, SharedIndexInformer, Store, StreamingList, Transform, WatchErrorHandler,
    handler_fn,
};
#[cfg(feature = "shard")]
pub(crate) use informer::{ListFilter, metadata_informer, server_filters_by_shard_selector};
pub use managed_fields::WithManagedFields;
pub use projection::{Projected, Projection};
pub(crate) use reads::list_in;
pub use scope::Scope;
#[cfg(feature = "shard")]
pub(crate) use scope::is_namespaced;
pub use shared_cache::SharedCache;
pub use start::START_LIST_ATTEMPTS;
#[cfg(feature = "multicluster")]
pub(crate) use start::SyncState;
pub use undecodable::UndecodableObject;

#[cfg(test)]
#[cfg(feature = "shard")]
pub(crate) use informer::list_watch_tests::test_client;
#[cfg(test)]
mod tests;
