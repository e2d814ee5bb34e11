//! Read-your-own-writes, on by default: after a reconciler writes through
//! opkit, its reads of that object through the reconcile
//! [`Context`](crate::reconcile::Context) never return the state from
//! before the write. The classic bug it removes: create a child, read the
//! cache before the watch delivered it, create it again (409
//! AlreadyExists, or a duplicate with `generateName`).
//!
//! ```no_run
//! use std::collections::BTreeMap;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{ObjectMeta, PostParams};
//! use opkit::reconcile::{Action, Context, ReconcileError, Reconcile, Request};
//!
//! struct Children;
//!
//! impl Reconcile for Children {
//!     type Object = ConfigMap;
//!
//!     async fn reconcile(&self, req: Request, ctx: &Context<ConfigMap>) -> Result<Action, ReconcileError> {
//!         let ns = req.namespace.clone().unwrap_or_default();
//!         let name = format!("{}-child", req.name);
//!         // Waits (bounded) until the cache shows this process's last write
//!         // of the child: a child created a moment ago is never "absent".
//!         if ctx.get::<ConfigMap>(Some(&ns), &name).await?.is_none() {
//!             let child = ConfigMap {
//!                 metadata: ObjectMeta { name: Some(name), ..ObjectMeta::default() },
//!                 data: Some(BTreeMap::from([("owner".into(), req.name.clone())])),
//!                 ..ConfigMap::default()
//!             };
//!             // Writes through ctx.api / ctx.client (and the opkit::client
//!             // helpers on such an Api) are recorded.
//!             ctx.api::<ConfigMap>(Some(&ns)).create(&PostParams::default(), &child).await?;
//!         }
//!         Ok(Action::done())
//!     }
//! }
//!
//! // Opting out (e.g. to measure the cost):
//! # fn wire(cache: opkit::cache::SharedCache) {
//! let controller = opkit::controller::Controller::new(Children)
//!     .read_your_writes(false);
//! # let _ = (controller, cache);
//! # }
//! ```
//!
//! # How it works
//!
//! The cache's [`client`](super::SharedCache::client) (what
//! [`Context::client`](crate::reconcile::Context::client) and
//! [`Context::api`](crate::reconcile::Context::api) hand out) carries a layer that
//! looks at the answer of every successful create, update, patch, apply
//! and delete (status included) of a kind the cache watches, and records,
//! per object (API group/version, resource, namespace, name), the
//! `resourceVersion` and `uid` the apiserver answered, or that the object
//! is gone. The informer drops a record once it applies a change at least
//! that new. A read of a recorded object (or a list of its kind) waits
//! until the informer's copy is at least as new (no polling); reads of
//! objects nobody wrote wait for nothing (one atomic load when no write is
//! pending).
//!
//! The wake-up is a sequence number in the tracker, bumped each time a
//! record leaves it (the informer applied a change that shows it, a newer
//! write of the object replaced it, or a read gave up on it); a waiting
//! read re-checks its record on each bump. The informer does no work for
//! this when no write is pending (one atomic load per applied change), and
//! wakes no one for changes that resolve no record.
//!
//! *At least as new*: resourceVersions are compared as integers when both
//! parse as `u64` (they are etcd revisions on every apiserver backed by
//! etcd, which increase across one resource); otherwise (an apiserver with
//! opaque versions) only the very version written, or a relist of the
//! object, counts as caught up. A delete is caught up once the object is
//! absent from the cache, or the cached object of that name has another
//! uid (a newer one).
//!
//! The wait is bounded ([`DEFAULT_WAIT`], or
//! [`Controller::read_your_writes_timeout`](crate::controller::Controller::read_your_writes_timeout))
//! and ends when the read is dropped (a reconcile timeout, shutdown). On timeout
//! the read fails with [`CacheError::WriteNotObserved`](crate::cache::CacheError::WriteNotObserved)
//! (controller-runtime's cached reads have no such wait) rather than
//! returning a state older than the
//! reconciler's own write, and the record is forgotten, so the retry reads
//! what the cache has. At most [`MAX_RECORDS`] writes are pending; past
//! that the oldest is forgotten (its reads may then be stale).
//!
//! # Scope and limits
//!
//! - Only writes through the cache's client are recorded: a client built
//!   elsewhere is not seen. Only kinds the cache watches in its own scope
//!   are recorded (writes of other kinds, e.g. Events, cost nothing beyond
//!   one lookup).
//! - Reads through [`Context`](crate::reconcile::Context) and the
//!   shared cache's own reads ([`SharedCache::get`](super::SharedCache::get),
//!   [`list`](super::SharedCache::list),
//!   [`by_index`](super::SharedCache::by_index)) wait: there is one read
//!   path. [`Store`](crate::cache::Store) handles read without waiting
//!   ([`Context::store`](crate::reconcile::Context::store) waits once, when
//!   it hands the handle out).
//! - Dry runs, collection deletes and subresources other than `status` are
//!   not recorded.
//! - If someone else deletes the object in the instant between the
//!   apiserver's answer to this process's write and the recording of it,
//!   the informer has removed the object already: it remembers the last
//!   [`RECENT_DELETES`] deletions it applied, and a write that such a
//!   deletion is newer than counts as observed at once (the object is gone,
//!   which is the truth), instead of stalling reads for the bound.
//! - Turn it off per controller with
//!   [`Controller::read_your_writes`](crate::controller::Controller::read_your_writes)
//!   or for the whole cache with
//!   [`SharedCacheBuilder::read_your_writes`](super::SharedCacheBuilder::read_your_writes)
//!   (then no client layer at all).

mod informer_writes;
mod recorder;
mod tracker;
mod wait;

pub(crate) use informer_writes::InformerWrites;
pub(crate) use recorder::recording_client;
pub(crate) use tracker::WriteTracker;
pub use tracker::{DEFAULT_WAIT, MAX_RECORDS, RECENT_DELETES};
pub(crate) use wait::{Observed, wait_observed};

#[cfg(test)]
mod tests;
