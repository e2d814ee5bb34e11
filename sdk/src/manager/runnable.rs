//! [`Runnable`]: a task a manager runs beside its controllers.

use std::fmt;
use std::future::Future;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

/// The error a [`Runnable`] or a health check may return.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

type RunFn = Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> + Send>;

/// A task that a [`Manager`](super::Manager) starts once the shared cache
/// has synced and stops at shutdown: a periodic job, a webhook server, a
/// queue consumer.
///
/// The task is handed a [`CancellationToken`]; when it is cancelled (the
/// manager shuts down, or this replica stops leading) the task should
/// finish promptly. By default a runnable runs only on the leader, like a
/// controller; [`needs_leader_election(false)`](Self::needs_leader_election)
/// runs it on every replica.
///
/// A runnable that returns `Err` stops the manager ([`ManagerError::Runnable`](super::ManagerError::Runnable));
/// one that returns `Ok` early simply ends.
///
/// ```
/// use std::time::Duration;
/// use opkit::manager::Runnable;
///
/// let sweeper = Runnable::new("sweeper", |stop| async move {
///     let mut tick = tokio::time::interval(Duration::from_secs(60));
///     loop {
///         tokio::select! {
///             () = stop.cancelled() => return Ok(()),
///             _ = tick.tick() => { /* sweep */ }
///         }
///     }
/// });
/// # let _ = sweeper;
/// ```
pub struct Runnable {
    pub(crate) name: String,
    pub(crate) needs_leader_election: bool,
    pub(crate) run: RunFn,
}

impl fmt::Debug for Runnable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runnable")
            .field("name", &self.name)
            .field("needs_leader_election", &self.needs_leader_election)
            .finish_non_exhaustive()
    }
}

impl Runnable {
    /// A runnable named `name` (in logs and errors) running `run` until the
    /// token it is handed is cancelled.
    pub fn new<F, Fut>(name: impl Into<String>, run: F) -> Self
    where
        F: FnOnce(CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        Self {
            name: name.into(),
            needs_leader_election: true,
            run: Box::new(move |token| Box::pin(run(token))),
        }
    }

    /// Whether the runnable runs only while this replica leads (default
    /// `true`). With `false` it runs on every replica, leader or standby.
    pub fn needs_leader_election(mut self, needs: bool) -> Self {
        self.needs_leader_election = needs;
        self
    }
}
