//! Keeps a ConfigMap `<name>-site` with each Website's URL.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};

use crate::api::v2;

// ANCHOR: reconciler
/// Reconciles Websites (read as v2, whatever version they were written in).
#[derive(Debug, Clone, Copy, Default)]
pub struct WebsiteReconciler;

impl Reconcile for WebsiteReconciler {
    type Object = v2::Website;

    async fn reconcile(
        &self,
        req: Request,
        ctx: &Context<v2::Website>,
    ) -> Result<Action, ReconcileError> {
        let Some(site) = ctx.object().await? else {
            return Ok(Action::done()); // deleted: the ConfigMap goes with its owner
        };
        let namespace = site.namespace().unwrap_or_default();
        let config_map = ConfigMap {
            metadata: ObjectMeta {
                name: Some(format!("{}-site", site.name_any())),
                namespace: Some(namespace.clone()),
                owner_references: site.controller_owner_ref(&()).map(|o| vec![o]),
                ..ObjectMeta::default()
            },
            data: Some(
                [
                    ("url".to_owned(), site.url()),
                    (
                        "replicas".to_owned(),
                        site.spec.replicas.unwrap_or(1).to_string(),
                    ),
                ]
                .into(),
            ),
            ..ConfigMap::default()
        };
        let api: Api<ConfigMap> = Api::namespaced(ctx.client(), &namespace);
        api.patch(
            config_map.metadata.name.as_deref().unwrap_or_default(),
            &PatchParams::apply(crate::NAME).force(),
            &Patch::Apply(&config_map),
        )
        .await
        .map_err(|e| ReconcileError::retryable(format!("applying the ConfigMap of {req}: {e}")))?;
        Ok(Action::done())
    }
}
// ANCHOR_END: reconciler
