//! Counters of what a controller's reconciles did.

use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters of one controller, readable at any time (the metrics
/// endpoint exports them under controller-runtime's names).
#[derive(Debug, Default)]
pub struct ReconcileStats {
    pub(crate) success: AtomicU64,
    pub(crate) requeue: AtomicU64,
    pub(crate) requeue_after: AtomicU64,
    pub(crate) error: AtomicU64,
    pub(crate) terminal_error: AtomicU64,
    pub(crate) panic: AtomicU64,
    pub(crate) timeout: AtomicU64,
    pub(crate) active: AtomicU64,
}

/// A snapshot of [`ReconcileStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReconcileCounts {
    /// `Ok(Action::done())`.
    pub success: u64,
    /// `Ok(Action::requeue_rate_limited())`.
    pub requeue: u64,
    /// `Ok(Action::requeue_after(..))`.
    pub requeue_after: u64,
    /// Every `Err` (retryable and terminal), panics and timeouts included.
    pub error: u64,
    /// `Err(Error::terminal(..))`.
    pub terminal_error: u64,
    /// Reconciles that panicked.
    pub panic: u64,
    /// Reconciles cancelled by the reconcile timeout.
    pub timeout: u64,
    /// Reconciles running now.
    pub active: u64,
}

impl ReconcileCounts {
    /// Every finished reconcile.
    pub fn total(&self) -> u64 {
        self.success + self.requeue + self.requeue_after + self.error
    }
}

impl ReconcileStats {
    /// The current counts.
    pub fn snapshot(&self) -> ReconcileCounts {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ReconcileCounts {
            success: get(&self.success),
            requeue: get(&self.requeue),
            requeue_after: get(&self.requeue_after),
            error: get(&self.error),
            terminal_error: get(&self.terminal_error),
            panic: get(&self.panic),
            timeout: get(&self.timeout),
            active: get(&self.active),
        }
    }

    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}
