//! Waiting in tests for what a real server does asynchronously, the
//! counterpart of Gomega's `Eventually` in controller-runtime tests.
//!
//! ```no_run
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::Api;
//! use opkit_envtest::{ControlPlane, eventually};
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let plane = ControlPlane::start().await?;
//! let config_maps: Api<ConfigMap> = Api::namespaced(plane.client()?, "default");
//! // ... start the operator, create its custom resource ...
//! let derived = eventually("the operator to create ConfigMap derived", Duration::from_secs(30), || {
//!     let config_maps = config_maps.clone();
//!     async move { config_maps.get_opt("derived").await.ok().flatten() }
//! })
//! .await;
//! assert_eq!(derived.data.unwrap_or_default().get("key").map(String::as_str), Some("value"));
//! # Ok(()) }
//! ```

use std::future::Future;
use std::time::Duration;

/// How often [`eventually`] asks again.
pub const EVENTUALLY_POLL_INTERVAL: Duration = Duration::from_millis(50);

/// Calls `check` until it returns `Some`, every
/// [`EVENTUALLY_POLL_INTERVAL`], and returns what it found. Return `None`
/// for "not yet" (an object still missing, a condition not yet true, an
/// API error worth retrying); for a plain condition, `cond.then_some(())`.
///
/// Uses tokio's clock, so it also works on a paused clock.
///
/// # Panics
///
/// This is a test assertion, like `assert!`: when `within` has passed and
/// `check` has still not returned `Some`, it panics with
/// `timed out after {within:?} waiting for {what}`. `check` is always
/// called at least once, and once more at the deadline.
pub async fn eventually<T, F, Fut>(what: &str, within: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let asked_at = tokio::time::Instant::now();
        if let Some(value) = check().await {
            return value;
        }
        if asked_at >= deadline {
            panic!("timed out after {within:?} waiting for {what}");
        }
        tokio::time::sleep_until((asked_at + EVENTUALLY_POLL_INTERVAL).min(deadline)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test(start_paused = true)]
    async fn returns_what_check_found_once_it_finds_it() {
        let calls = AtomicU32::new(0);
        let found = eventually("the third call", Duration::from_secs(1), || {
            let n = calls.fetch_add(1, Ordering::Relaxed) + 1;
            async move { (n == 3).then_some(n) }
        })
        .await;
        assert_eq!(found, 3);
    }

    #[tokio::test(start_paused = true)]
    #[should_panic(expected = "timed out after 1s waiting for nothing at all")]
    async fn panics_naming_what_after_within() {
        eventually("nothing at all", Duration::from_secs(1), || async {
            None::<()>
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn asks_once_more_at_the_deadline() {
        let started = tokio::time::Instant::now();
        let within = Duration::from_millis(120);
        eventually("the deadline", within, || async move {
            (started.elapsed() >= within).then_some(())
        })
        .await;
        assert_eq!(started.elapsed(), within);
    }
}
