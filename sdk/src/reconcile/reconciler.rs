//! The [`Reconcile`] trait: what an operator implements.

use std::future::Future;

use super::context::Context;
use crate::action::{Action, ReconcileError};
use crate::cache::Cacheable;
use crate::request::Request;

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
    type Object: Cacheable<DynamicType = (), Scope: 'static>;

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
