//! The workqueue: deduplicating, delaying, prioritised and rate-limited.
//!
//! Event handlers add object keys; controller workers [`get`](WorkQueue::get)
//! them, reconcile, and call [`done`](WorkQueue::done). The queue guarantees
//! that one key is never reconciled by two workers at once, and that a key
//! added while it is being reconciled is reconciled again afterwards.
//!
//! ```
//! use std::time::Duration;
//! use opkit::workqueue::{ExponentialFailureRateLimiter, Quota, WorkQueue};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let queue: WorkQueue<String> = WorkQueue::builder()
//!     .name("memcached")
//!     .rate_limiter(ExponentialFailureRateLimiter::new(
//!         Duration::from_millis(5),
//!         Duration::from_secs(1000),
//!     ))
//!     .throttle(Quota::per_second(100).burst(100)) // at most 100 reconciles/s, whatever path the key came by
//!     .build();
//!
//! queue.add("default/just-created".to_string());
//! queue.add("default/from-initial-list".to_string());
//!
//! // A worker: first in, first out.
//! let key = queue.get().await.expect("queue is running");
//! assert_eq!(key, "default/just-created");
//! // ... reconcile fails: retry with per-item backoff (5 ms, 10 ms, 20 ms, ...)
//! queue.add_rate_limited(key.clone());
//! queue.done(&key);
//!
//! let key = queue.get().await.expect("queue is running");
//! assert_eq!(key, "default/from-initial-list");
//! queue.forget(&key); // success: clear its failure history
//! queue.done(&key);
//!
//! // The retry comes back once its backoff has passed.
//! let key = queue.get().await.expect("queue is running");
//! assert_eq!((key.as_str(), queue.num_requeues(&key)), ("default/just-created", 1));
//! queue.done(&key);
//!
//! queue.shutdown_with_drain(Duration::from_secs(5)).await.expect("drained");
//! assert_eq!(queue.get().await, None);
//! # }
//! ```
//!
//! # Rules
//!
//! **Dedup** (as client-go): the queue keeps a FIFO of ready items, a *dirty*
//! set (items that need processing) and a *processing* set (items handed out).
//! * [`add`](WorkQueue::add) of an item already waiting is a no-op.
//! * `add` of an item being processed marks it dirty; it is queued again only
//!   after [`done`](WorkQueue::done), so it is never held by two workers.
//! * [`get`](WorkQueue::get) hands an item to one worker and marks it processing.
//!
//! **Delays**: [`add_after`](WorkQueue::add_after) adds the item when its time
//! comes, through `add` (so it dedups against a waiting copy). A zero delay is a
//! plain `add`. Two delayed adds of one item keep the earliest time. Delayed
//! items sit in a timer heap; one idle getter sleeps until the earliest deadline
//! (no polling, no background task, and `add_after` never blocks).
//!
//! **Priorities** (the controller's, crate-internal): ready items of a higher
//! priority are handed out first, FIFO within a priority; adding an item that
//! is already waiting keeps the higher priority. A controller enqueues the
//! objects of an initial list or a resync at low priority, so fresh events
//! are not starved; [`add`](WorkQueue::add) and the rest use the normal one.
//!
//! **Per-item rate limiting** ([`RateLimiter`]): [`add_rate_limited`](WorkQueue::add_rate_limited)
//! is `add_after(item, limiter.when(&item))`; [`forget`](WorkQueue::forget)
//! clears the item's history. Limiters: [`ExponentialFailureRateLimiter`]
//! (the default, 5 ms doubling to 1000 s), [`FastSlowRateLimiter`],
//! [`MaxOfRateLimiter`], [`MaxWaitRateLimiter`].
//!
//! **Throttle** ([`WorkQueueBuilder::throttle`]): an optional limit on how many
//! items per second the queue hands to workers, built on `governor`. It is
//! applied when an item is handed out, so it holds for every item whatever path
//! it entered by (unlike controller-runtime, where a `RequeueAfter` bypasses the
//! rate limiter). [`WorkQueueBuilder::per_key_min_interval`] additionally hands
//! one item out at most once per interval (a hot-loop guard).
//!
//! **Shutdown**: after [`shutdown`](WorkQueue::shutdown) adds are ignored,
//! pending delayed adds are dropped, and `get` returns the items still waiting,
//! then `None`. [`shutdown_with_drain`](WorkQueue::shutdown_with_drain) also
//! waits, up to a timeout, until every item is done; a plain `shutdown`
//! meanwhile ends that wait ([`QueueError::DrainAbandoned`]), as client-go's
//! `ShutDown` ends a pending `ShutDownWithDrain`.
//!
//! **Metrics** ([`WorkQueueBuilder::metrics`]): controller-runtime's metric
//! names in opkit's Prometheus registry; without them the hot path does no
//! metrics work.
//!
//! Time is `tokio::time`, so everything above is testable on tokio's paused clock.

mod builder;
mod delay;
mod error;
pub(crate) mod metrics;
mod priority;
mod queue;
mod quota;
mod rate_limiter;
mod state;
mod throttle;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

pub use builder::WorkQueueBuilder;
pub use error::QueueError;
pub(crate) use priority::Priority;
pub use queue::WorkQueue;
pub use quota::Quota;
pub use rate_limiter::{
    ExponentialFailureRateLimiter, FastSlowRateLimiter, MaxOfRateLimiter, MaxWaitRateLimiter,
    RateLimiter,
};
