//! Errors of the workqueue.

use std::time::Duration;

/// What can go wrong in the workqueue. Adding and getting never fail; only a
/// bounded wait can run out of time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QueueError {
    /// [`WorkQueue::shutdown_with_drain`](super::WorkQueue::shutdown_with_drain)
    /// gave up before every item was done.
    #[error(
        "workqueue {queue:?} not drained after {timeout:?}: {processing} item(s) still processing, \
         {waiting} waiting; are the workers running and calling `done`?"
    )]
    DrainTimeout {
        /// The queue's name.
        queue: String,
        /// How long it waited.
        timeout: Duration,
        /// Items handed out and not yet `done`.
        processing: usize,
        /// Items still waiting to be handed out.
        waiting: usize,
    },
    /// [`WorkQueue::shutdown`](super::WorkQueue::shutdown) was called while
    /// [`WorkQueue::shutdown_with_drain`](super::WorkQueue::shutdown_with_drain)
    /// waited: the drain stopped waiting (client-go's `ShutDown` after
    /// `ShutDownWithDrain`).
    #[error(
        "workqueue {queue:?} drain abandoned: shutdown() was called while it waited, with \
         {processing} item(s) still processing, {waiting} waiting"
    )]
    DrainAbandoned {
        /// The queue's name.
        queue: String,
        /// Items handed out and not yet `done`.
        processing: usize,
        /// Items still waiting to be handed out.
        waiting: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_says_what_to_check() {
        let err = QueueError::DrainTimeout {
            queue: "pods".into(),
            timeout: Duration::from_secs(2),
            processing: 1,
            waiting: 3,
        };
        let msg = err.to_string();
        assert!(msg.contains("\"pods\"") && msg.contains("2s") && msg.contains("calling `done`"));
    }
}
