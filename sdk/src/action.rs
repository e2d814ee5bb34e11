//! What a reconcile returns: an [`Action`] for the key, or a
//! [`ReconcileError`] (public as `opkit::reconcile::{Action,
//! ReconcileError}`).

use std::fmt;
use std::time::Duration;

use crate::owner_error::OwnerError;

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
/// Any error converts into one with `?`: retryable, except an error that
/// another attempt cannot fix, which is terminal. Today that is an
/// [`OwnerError`](crate::client::OwnerError) (an object already controlled
/// by another owner, an owner in another namespace, ...), found also as the
/// source of the error `?` was applied to. Wrap an error in
/// [`ReconcileError::terminal`] when retrying cannot help (an invalid spec),
/// or in [`ReconcileError::retryable`] to retry one that would be terminal.
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
    /// [`Reconcile::on_error`](crate::reconcile::Reconcile::on_error) like any error; the key's failure history is
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
        let terminal = cannot_be_fixed_by_retrying(&error);
        Self {
            source: Box::new(error),
            terminal,
            retry_after: None,
        }
    }
}

/// Whether `error`, or an error in its chain of sources, is one that another
/// attempt cannot fix.
fn cannot_be_fixed_by_retrying(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(error) = next {
        if error.is::<OwnerError>() {
            return true;
        }
        next = error.source();
    }
    false
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

#[cfg(test)]
mod tests {
    use super::*;

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

    fn already_owned() -> OwnerError {
        OwnerError::AlreadyOwned {
            owned: "ConfigMap shop/web".into(),
            existing_kind: "Deployment".into(),
            existing: "other".into(),
        }
    }

    #[test]
    fn an_owner_error_is_terminal_through_question_mark_and_as_a_source() {
        fn owns() -> Result<(), ReconcileError> {
            Err(already_owned())?;
            Ok(())
        }
        assert!(owns().unwrap_err().is_terminal());

        #[derive(Debug, thiserror::Error)]
        #[error("setting up the child")]
        struct Wrapped(#[source] OwnerError);
        let wrapped: ReconcileError = Wrapped(already_owned()).into();
        assert!(wrapped.is_terminal());
    }

    #[test]
    fn an_owner_error_wrapped_as_retryable_is_retried() {
        let e = ReconcileError::retryable(already_owned());
        assert!(!e.is_terminal());
    }
}
