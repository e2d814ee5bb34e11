//! Retrying a read-modify-write when the object changed underneath it
//! (client-go's `retry.RetryOnConflict`).

use std::future::Future;
use std::time::Duration;

use super::error::ClientError;

/// How often and how long to retry after a 409 Conflict.
///
/// Attempt `n` (from 0) waits a random time between half and all of
/// `min(initial * 2^n, max)` before trying again, so writers that collided
/// spread out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in total, including the first (at least 1).
    pub attempts: u32,
    /// Backoff before the second attempt.
    pub initial: Duration,
    /// Longest backoff between two attempts.
    pub max: Duration,
}

impl Default for RetryPolicy {
    /// 10 attempts, 10 ms doubling up to 1 s: about 4 s in the worst case.
    fn default() -> Self {
        Self {
            attempts: 10,
            initial: Duration::from_millis(10),
            max: Duration::from_secs(1),
        }
    }
}

impl RetryPolicy {
    /// The backoff after failed attempt `attempt` (0-based).
    pub(crate) fn backoff(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.min(30));
        let ceiling = self.initial.saturating_mul(factor).min(self.max);
        ceiling.mul_f64(0.5 + fastrand::f64() * 0.5)
    }
}

/// Runs `attempt` until it succeeds, fails with something other than a
/// conflict, or `policy.attempts` are used up (then the last conflict is
/// returned). Each attempt must re-read the object it modifies.
///
/// ```no_run
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::api::{Api, PostParams};
/// use opkit::client::{retry_on_conflict, ClientError, RetryPolicy};
///
/// # async fn example(api: Api<ConfigMap>) -> Result<(), ClientError> {
/// let updated = retry_on_conflict(&RetryPolicy::default(), || async {
///     let mut cm = api.get("settings").await?;
///     cm.data.get_or_insert_with(Default::default).insert("colour".into(), "blue".into());
///     Ok(api.replace("settings", &PostParams::default(), &cm).await?)
/// })
/// .await?;
/// # Ok(()) }
/// ```
pub async fn retry_on_conflict<T, F, Fut>(
    policy: &RetryPolicy,
    mut attempt: F,
) -> Result<T, ClientError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ClientError>>,
{
    let attempts = policy.attempts.max(1);
    let mut n = 0;
    loop {
        match attempt().await {
            Err(e) if e.is_conflict() && n + 1 < attempts => {
                let wait = policy.backoff(n);
                tracing::debug!(attempt = n + 1, ?wait, error = %e, "conflict; retrying");
                tokio::time::sleep(wait).await;
                n += 1;
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn conflict() -> ClientError {
        ClientError::Conflict {
            resource: "configmaps".into(),
            name: "c".into(),
            message: "changed".into(),
        }
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let p = RetryPolicy::default();
        for n in 0..40 {
            let b = p.backoff(n);
            let ceiling = (p.initial * 2u32.saturating_pow(n.min(30))).min(p.max);
            assert!(b >= ceiling / 2 && b <= ceiling, "attempt {n}: {b:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn retries_conflicts_only_and_gives_up_after_the_attempts() {
        let calls = AtomicU32::new(0);
        let result = retry_on_conflict(&RetryPolicy::default(), || async {
            if calls.fetch_add(1, Ordering::SeqCst) < 3 {
                Err(conflict())
            } else {
                Ok(7)
            }
        })
        .await;
        assert_eq!(result.unwrap(), 7);
        assert_eq!(calls.load(Ordering::SeqCst), 4);

        let calls = AtomicU32::new(0);
        let policy = RetryPolicy {
            attempts: 3,
            ..RetryPolicy::default()
        };
        let result: Result<(), _> = retry_on_conflict(&policy, || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(conflict())
        })
        .await;
        assert!(result.unwrap_err().is_conflict());
        assert_eq!(calls.load(Ordering::SeqCst), 3);

        let calls = AtomicU32::new(0);
        let result: Result<(), _> = retry_on_conflict(&policy, || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(ClientError::MissingName {
                kind: "ConfigMap".into(),
            })
        })
        .await;
        assert!(matches!(result, Err(ClientError::MissingName { .. })));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }
}
