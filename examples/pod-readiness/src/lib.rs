//! A typed projection ("cache what you read"): Pods are cached as a small
//! [`PodView`] — whether each is ready, and its phase — instead of whole
//! Pods, and the controller keeps a ConfigMap `pod-readiness` per namespace
//! reporting each Pod's readiness (`<pod>: ready` or `<pod>: not ready
//! (<phase>)`).
//!
//! The view is made once per Pod event as the watch decodes it; the cache,
//! the reconciler's reads and the event path all see
//! `Projected<Pod, PodView>`: the view, plus the metadata essentials (name,
//! namespace, uid, resourceVersion, labels, ownerReferences) keys and
//! owners need.
//!
//! ```
//! use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
//! use opkit::cache::Projected;
//! use pod_readiness::{PodView, readiness};
//!
//! let mut pod = Pod::default();
//! pod.metadata.name = Some("web-0".into());
//! pod.status = Some(PodStatus {
//!     phase: Some("Running".into()),
//!     conditions: Some(vec![PodCondition {
//!         type_: "Ready".into(),
//!         status: "True".into(),
//!         ..Default::default()
//!     }]),
//!     ..Default::default()
//! });
//! let view = Projected::<Pod, PodView>::project(pod);
//! assert!(view.ready);
//! assert_eq!(readiness(&view), "ready");
//! ```

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use opkit::cache::{Projected, Projection};
use opkit::controller::Controller;
use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};

/// The ConfigMap (one per namespace) the report is written to.
pub const REPORT: &str = "pod-readiness";

/// What this operator reads of a Pod: its phase and its `Ready` condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodView {
    /// `status.phase` (`Pending`, `Running`, ...).
    pub phase: Option<String>,
    /// The `Ready` condition is `True`.
    pub ready: bool,
}

impl Projection<Pod> for PodView {
    fn project(pod: Pod) -> Self {
        let status = pod.status.unwrap_or_default();
        let ready = status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        PodView {
            phase: status.phase,
            ready,
        }
    }
}

/// A Pod's line in the report.
pub fn readiness(pod: &Projected<Pod, PodView>) -> String {
    if pod.ready {
        "ready".to_owned()
    } else {
        format!(
            "not ready ({})",
            pod.phase.as_deref().unwrap_or("no phase yet")
        )
    }
}

/// Writes each namespace's readiness report from the cached Pod views.
pub struct PodReadiness;

impl Reconcile for PodReadiness {
    // The primary kind is a projection: every Pod event wakes its namespace's
    // report, and the reconciler reads views, never whole Pods.
    type Object = Projected<Pod, PodView>;

    async fn reconcile(
        &self,
        req: Request,
        ctx: &Context<Projected<Pod, PodView>>,
    ) -> Result<Action, ReconcileError> {
        let Some(namespace) = req.namespace.as_deref() else {
            return Ok(Action::done());
        };
        let pods = ctx.list::<Projected<Pod, PodView>>(Some(namespace)).await?;
        let data: BTreeMap<String, String> = pods
            .iter()
            .filter_map(|p| Some((p.metadata().name.clone()?, readiness(p))))
            .collect();
        let report = ConfigMap {
            metadata: ObjectMeta {
                name: Some(REPORT.to_owned()),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            data: Some(data),
            ..ConfigMap::default()
        };
        // Server-side apply: a Pod gone from the list is gone from the report.
        let api: Api<ConfigMap> = Api::namespaced(ctx.client(), namespace);
        api.patch(
            REPORT,
            &PatchParams::apply("pod-readiness").force(),
            &Patch::Apply(&report),
        )
        .await?;
        tracing::debug!(%req, pods = pods.len(), "readiness reported");
        Ok(Action::done())
    }
}

/// The controller: Pods watched through [`PodView`].
pub fn controller() -> Controller<PodReadiness> {
    Controller::new(PodReadiness).name("pod-readiness")
}
