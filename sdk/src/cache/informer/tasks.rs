//! The live-task count of an informer: every task it spawns (reflector,
//! delta processing, resync timer, one listener per handler) is counted from
//! spawn until it ends, so "the informer stopped and left nothing behind"
//! is something to wait for, not to assume
//! ([`SharedIndexInformer::wait_stopped`](super::SharedIndexInformer::wait_stopped)).

use std::{future::Future, sync::Arc};

use tokio::{runtime::Handle, sync::watch};

/// Counts the live tasks of one informer (cloning shares the count).
#[derive(Clone)]
pub(crate) struct Tasks(Arc<watch::Sender<usize>>);

/// Held by a counted task; dropping it (the task ended, was aborted, or its
/// runtime shut down) takes the task off the count.
struct Counted(Arc<watch::Sender<usize>>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl Tasks {
    pub(crate) fn new() -> Self {
        Self(Arc::new(watch::channel(0).0))
    }

    /// Spawns `task` on `rt`, counted until it ends.
    pub(crate) fn spawn<F>(&self, rt: &Handle, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.0.send_modify(|n| *n += 1);
        let counted = Counted(Arc::clone(&self.0));
        rt.spawn(async move {
            let _counted = counted;
            task.await;
        });
    }

    /// The number of counted tasks that have not ended.
    pub(crate) fn live(&self) -> usize {
        *self.0.borrow()
    }

    /// Resolves once no counted task is alive.
    pub(crate) async fn wait_idle(&self) {
        let mut rx = self.0.subscribe();
        // the sender lives in `self`: the channel cannot close while we wait
        let _ = rx.wait_for(|n| *n == 0).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn counts_until_each_task_ends() {
        let tasks = Tasks::new();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tasks.spawn(&Handle::current(), async move {
            let _ = rx.await;
        });
        tasks.spawn(&Handle::current(), async {});
        assert_eq!(tasks.live(), 2);
        drop(tx);
        tasks.wait_idle().await;
        assert_eq!(tasks.live(), 0);
    }
}
