//! The [`Reconcile`] trait: what an operator implements.
//!
//! A reconciler receives a [`Request`] (the key of an object) and drives the
//! cluster towards that object's desired state. It is level-triggered: it
//! reads the current state through the [`Context`],
//! never the event that woke it, so missed or merged events do no harm.
//!
//! ```
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
//!
//! struct Expiry;
//!
//! impl Reconcile for Expiry {
//!     type Object = ConfigMap; // the kind this reconciler drives
//!
//!     async fn reconcile(&self, req: Request, ctx: &Context<ConfigMap>) -> Result<Action, ReconcileError> {
//!         let Some(cm) = ctx.object().await? else {
//!             return Ok(Action::done()); // deleted: nothing to do
//!         };
//!         if cm.data.as_ref().is_some_and(|d| d.contains_key("invalid")) {
//!             // Retrying cannot help: report it and stop.
//!             return Err(ReconcileError::terminal(format!("{req} has an invalid key")));
//!         }
//!         // Look again in five minutes.
//!         Ok(Action::requeue_after(Duration::from_secs(300)))
//!     }
//! }
//! ```
//!
//! What the controller does with each result:
//!
//! | `reconcile` returns | the controller |
//! |---|---|
//! | `Ok(Action::done())` | forgets the key's failure history |
//! | `Ok(Action::requeue_after(d))` | forgets failures, adds the key again after `d` (`d` = 0: as `done`) |
//! | `Ok(Action::requeue_rate_limited())` | adds the key again, rate-limited (per-key backoff) |
//! | `Err(e)` | adds the key again, rate-limited (per-key exponential backoff) |
//! | `Err(e.retry_after(d))` | counts the error, adds the key again after `d` (history kept) |
//! | `Err(ReconcileError::terminal(..))` | does not requeue; counts it; keeps the key's failure history |
//! | a panic | recovers, counts it, treats it as a retryable error |
//!
//! Every requeue keeps the priority the key was queued with: a retry of an
//! object from an initial list or a resync stays behind fresh events (as
//! controller-runtime's priority queue does).
//!
//! Every failure (error, timeout, panic) is also handed to
//! [`Reconcile::on_error`], where an operator records it on the object (a
//! `Degraded` condition, an Event) without cluttering `reconcile`.
//!
//! A throttle configured on the controller applies to every reconcile, the
//! `requeue_after` ones included.
//!
//! # Why the object is read, not handed in
//!
//! The reconciler's kind is part of its type ([`Reconcile::Object`]), so
//! [`Context::object`] reads "my object" without naming the type again and
//! a `#[controller(for = ..)]` that disagrees with it is a compile error.
//! kube-runtime hands the object to `reconcile`; controller-runtime hands a
//! key and the reconciler calls `Get`. opkit hands the key and reads the
//! object on request, from the cache, because:
//!
//! - a deleted object still gets its reconcile (`object()` is `None`), so
//!   cleanup of things not owned through owner references has a place;
//! - the read happens when the reconcile runs, after every earlier write of
//!   this controller is visible ([read-your-writes](Context)), not when the
//!   key was queued;
//! - a reconciler that only needs the key (a periodic check, a cleanup)
//!   pays for no read.

mod context;
mod reconciler;

pub(crate) use crate::action::ActionKind;
pub use crate::action::{Action, ReconcileError};
pub use crate::request::Request;
pub use context::Context;
pub(crate) use context::ControllerShared;
pub use reconciler::Reconcile;
