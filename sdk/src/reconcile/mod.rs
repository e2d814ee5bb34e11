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

use std::fmt;
use std::future::Future;
use std::time::Duration;

use kube::Resource;
use serde::de::DeserializeOwned;

mod context;

pub use context::Context;
pub(crate) use context::ControllerShared;

/// The key of the object to reconcile.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct Request {
    /// The namespace; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
}

impl Request {
    /// A request for a namespaced object.
    pub fn namespaced(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: Some(namespace.into()),
            name: name.into(),
        }
    }

    /// A request for a cluster-scoped object.
    pub fn cluster(name: impl Into<String>) -> Self {
        Self {
            namespace: None,
            name: name.into(),
        }
    }

    /// The request for `obj`, or `None` if it has no name.
    pub fn for_object<K: Resource>(obj: &K) -> Option<Self> {
        let meta = obj.meta();
        Some(Self {
            namespace: meta.namespace.clone(),
            name: meta.name.clone()?,
        })
    }
}

impl fmt::Display for Request {
    /// `namespace/name`, or `name` for cluster-scoped objects.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// What to do with a key after a successful reconcile.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[must_use = "an Action does nothing unless returned from reconcile"]
pub struct Action {
    kind: ActionKind,
}

/// The kinds of [`Action`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum ActionKind {
    Done,
    Requeue,
    RequeueAfter(Duration),
}

impl Action {
    /// Nothing more to do until the next change.
    pub fn done() -> Self {
        Self {
            kind: ActionKind::Done,
        }
    }

    /// Reconcile again after `delay` (a periodic check), forgetting the
    /// key's failure history. A zero delay means [`done`](Self::done), as
    /// controller-runtime's `RequeueAfter: 0` does (to come back at once,
    /// ask for a small delay; to back off, use
    /// [`requeue_rate_limited`](Self::requeue_rate_limited)).
    pub fn requeue_after(delay: Duration) -> Self {
        if delay.is_zero() {
            return Self::done();
        }
        Self {
            kind: ActionKind::RequeueAfter(delay),
        }
    }

    /// Reconcile again after the per-key backoff of the controller's rate
    /// limiter (controller-runtime's deprecated `Requeue: true`): e.g. while
    /// waiting for something that is not watched. Prefer
    /// [`requeue_after`](Self::requeue_after) with the delay you mean, or an
    /// error when something failed.
    pub fn requeue_rate_limited() -> Self {
        Self {
            kind: ActionKind::Requeue,
        }
    }

    pub(crate) fn kind(self) -> ActionKind {
        self.kind
    }
}

/// A failed reconcile: retryable (the default) or terminal.
///
/// Any error converts into a retryable one with `?`; wrap one in
/// [`ReconcileError::terminal`] when retrying cannot help (an invalid spec).
pub struct ReconcileError {
    source: Box<dyn std::error::Error + Send + Sync + 'static>,
    terminal: bool,
    retry_after: Option<Duration>,
}

impl ReconcileError {
    /// An error that is retried with per-key backoff.
    pub fn retryable(error: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>) -> Self {
        Self {
            source: error.into(),
            terminal: false,
            retry_after: None,
        }
    }

    /// An error that is not retried: the key is reconciled again only on the
    /// next change of a watched object.
    pub fn terminal(error: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>) -> Self {
        Self {
            source: error.into(),
            terminal: true,
            retry_after: None,
        }
    }

    /// A retryable error retried after `delay` instead of the rate
    /// limiter's backoff: an error *and* a delay (e.g. a dependency that
    /// says when to come back). It is counted, logged and handed to
    /// [`Reconcile::on_error`] like any error; the key's failure history is
    /// kept, not grown. A terminal error stays terminal.
    ///
    /// ```
    /// use std::time::Duration;
    /// use opkit::reconcile::ReconcileError;
    ///
    /// let e = ReconcileError::retryable("quota exhausted").retry_after(Duration::from_secs(60));
    /// # let _ = e;
    /// ```
    #[must_use]
    pub fn retry_after(mut self, delay: Duration) -> Self {
        if !self.terminal {
            self.retry_after = Some(delay);
        }
        self
    }

    /// The delay chosen with [`retry_after`](Self::retry_after), if any.
    pub(crate) fn retry_delay(&self) -> Option<Duration> {
        self.retry_after
    }

    /// Whether this error is terminal.
    pub fn is_terminal(&self) -> bool {
        self.terminal
    }

    /// The underlying error.
    pub fn source(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.source
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for ReconcileError {
    fn from(error: E) -> Self {
        Self::retryable(error)
    }
}

impl fmt::Display for ReconcileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.terminal {
            write!(f, "terminal error: {}", self.source)
        } else {
            fmt::Display::fmt(&self.source, f)
        }
    }
}

impl fmt::Debug for ReconcileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReconcileError")
            .field("source", &self.source)
            .field("terminal", &self.terminal)
            .field("retry_after", &self.retry_after)
            .finish()
    }
}

/// The one trait an operator implements: drive the object named by `req`
/// towards its desired state.
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
///
/// struct Settings;
///
/// impl Reconcile for Settings {
///     type Object = ConfigMap;
///
///     async fn reconcile(&self, _req: Request, ctx: &Context<ConfigMap>) -> Result<Action, ReconcileError> {
///         let _cm = ctx.object().await?;
///         Ok(Action::done())
///     }
///
///     // Every failed reconcile lands here before it is retried (or not).
///     async fn on_error(&self, req: &Request, error: &ReconcileError, ctx: &Context<ConfigMap>) {
///         if let Ok(Some(cm)) = ctx.object().await {
///             ctx.recorder().warning(&*cm, "ReconcileFailed", "Reconcile", &error.to_string());
///         }
///         tracing::debug!(%req, terminal = error.is_terminal(), "recorded the failure");
///     }
/// }
/// ```
pub trait Reconcile: Send + Sync + 'static {
    /// The kind this reconciler drives: the controller's primary kind, the
    /// one [`Context::object`] reads and every `Request` names.
    type Object: Resource<DynamicType = (), Scope: 'static>
        + DeserializeOwned
        + Send
        + Sync
        + 'static;

    /// Reconcile one object. Called by at most one worker at a time per key.
    fn reconcile(
        &self,
        req: Request,
        ctx: &Context<Self::Object>,
    ) -> impl Future<Output = Result<Action, ReconcileError>> + Send;

    /// Called after a failed reconcile (an error, a timeout or a panic), in
    /// the same worker and before the key is requeued (with backoff) or,
    /// for a terminal error, dropped: the place to record the failure on
    /// the object, e.g. a `Degraded` condition. The default does nothing;
    /// the failure is logged and counted either way. Bounded by the
    /// controller's reconcile timeout, if one is set.
    fn on_error(
        &self,
        req: &Request,
        error: &ReconcileError,
        ctx: &Context<Self::Object>,
    ) -> impl Future<Output = ()> + Send {
        let _ = (req, error, ctx);
        std::future::ready(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_display_and_for_object() {
        assert_eq!(Request::namespaced("prod", "web").to_string(), "prod/web");
        assert_eq!(Request::cluster("node-1").to_string(), "node-1");
        let mut cm = k8s_openapi::api::core::v1::ConfigMap::default();
        assert_eq!(Request::for_object(&cm), None);
        cm.metadata.name = Some("a".into());
        cm.metadata.namespace = Some("ns".into());
        assert_eq!(
            Request::for_object(&cm),
            Some(Request::namespaced("ns", "a"))
        );
    }

    #[test]
    fn errors_are_retryable_unless_terminal() {
        fn fails() -> Result<(), ReconcileError> {
            Err(std::io::Error::other("disk"))?;
            Ok(())
        }
        let e = fails().unwrap_err();
        assert!(!e.is_terminal());
        assert_eq!(e.to_string(), "disk");
        let t = ReconcileError::terminal("bad spec");
        assert!(t.is_terminal());
        assert_eq!(t.to_string(), "terminal error: bad spec");
    }
}
