//! Health checks behind `/healthz` and `/readyz`, with the Kubernetes
//! apiserver's response format.

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::runnable::BoxError;
use crate::cache::SharedCache;

/// One named check: passes (with a detail for the verbose body, or none)
/// or fails with why.
pub(crate) type Check =
    Arc<dyn Fn() -> BoxFuture<'static, Result<Option<String>, BoxError>> + Send + Sync>;

/// Makes a [`Check`] of an async closure.
pub(crate) fn check<F, Fut>(f: F) -> Check
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
{
    Arc::new(move || {
        let checked = f();
        Box::pin(async move { checked.await.map(|()| None) })
    })
}

/// A check that always passes, its detail what `detail` says now: the
/// member clusters' states, which never fail the hub's readiness.
#[cfg(feature = "multicluster")]
pub(crate) fn detail(detail: impl Fn() -> String + Send + Sync + 'static) -> Check {
    Arc::new(move || {
        let now = detail();
        Box::pin(async move { Ok(Some(now)) })
    })
}

/// The built-in liveness check: the process serves HTTP.
pub(crate) fn ping() -> Check {
    check(|| async { Ok(()) })
}

/// The built-in readiness check: every informer of the cache has synced.
/// The error names each informer that has not, with its last list/watch
/// error (a `403` there means missing RBAC), e.g. `1 of 2 informers have
/// not synced: v1/ConfigMap (all namespaces): waiting for the initial list`.
pub(crate) fn informers_synced(cache: SharedCache) -> Check {
    check(move || {
        let ready = cache.readiness();
        async move { ready.map_err(BoxError::from) }
    })
}

/// The named checks of one endpoint.
#[derive(Clone, Default)]
pub(crate) struct Checks(Vec<(String, Check)>);

impl std::fmt::Debug for Checks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|(name, _)| name))
            .finish()
    }
}

/// The outcome of running checks: whether all passed, and the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Report {
    pub(crate) healthy: bool,
    pub(crate) body: String,
}

impl Checks {
    /// Adds (or replaces) the check `name`.
    pub(crate) fn add(&mut self, name: String, check: Check) {
        match self.0.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = check,
            None => self.0.push((name, check)),
        }
    }

    /// Whether a check `name` exists.
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.0.iter().any(|(n, _)| n == name)
    }

    /// Runs every check (or only `only`). The body is `ok` when all pass and
    /// `verbose` is off; otherwise one line per check (`[+]name ok`,
    /// `[+]name ok: detail`, `[-]name failed: why`) and a closing
    /// `<endpoint> check passed|failed`.
    pub(crate) async fn run(&self, endpoint: &str, only: Option<&str>, verbose: bool) -> Report {
        let mut healthy = true;
        let mut lines = String::new();
        for (name, check) in &self.0 {
            if only.is_some_and(|only| only != name) {
                continue;
            }
            match check().await {
                Ok(None) => lines.push_str(&format!("[+]{name} ok\n")),
                Ok(Some(detail)) => lines.push_str(&format!("[+]{name} ok: {detail}\n")),
                Err(error) => {
                    healthy = false;
                    tracing::debug!(endpoint, check = %name, %error, "health check failed");
                    lines.push_str(&format!("[-]{name} failed: {error}\n"));
                }
            }
        }
        let body = if healthy && !verbose {
            "ok".to_owned()
        } else {
            let verdict = if healthy { "passed" } else { "failed" };
            format!("{lines}{endpoint} check {verdict}\n")
        };
        Report { healthy, body }
    }
}
