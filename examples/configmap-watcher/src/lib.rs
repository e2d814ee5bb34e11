//! A watch mapped through an index, the smallest useful way: a `Website`
//! names a ConfigMap holding its settings (`spec.configMap`); its status
//! reports which version of that ConfigMap it last saw. The Website cache
//! is indexed by the ConfigMap each names ([`config_map_of`]); when a
//! ConfigMap changes, the index gives every Website that references it and
//! they are re-reconciled — no polling, no list scan, no annotation on the
//! ConfigMap (controller-runtime's `IndexField` plus a map function).
//!
//! ```
//! use configmap_watcher::WebsiteReconciler;
//! use opkit::ControllerWiring;
//! use opkit::rbac::Verb;
//!
//! let rules = WebsiteReconciler::rbac_rules();
//! assert!(rules.permits("", "configmaps", Verb::Watch)); // the mapped watch
//! assert!(!rules.permits("", "configmaps", Verb::Patch)); // read-only
//! ```

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, Resource, ResourceExt};
use opkit::Controller;
use opkit::client;
use opkit::conditions::{self, ConditionStatus};
use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `ConfigFound`: whether the referenced ConfigMap exists.
pub const CONFIG_FOUND: &str = "ConfigFound";

/// A website configured by a ConfigMap in its namespace.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "web.example.com",
    version = "v1",
    kind = "Website",
    namespaced,
    status = "WebsiteStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct WebsiteSpec {
    /// The ConfigMap (same namespace) holding the site's settings.
    pub config_map: String,
}

/// What the reconciler last saw of the ConfigMap.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebsiteStatus {
    /// The ConfigMap's resourceVersion when last reconciled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_version: Option<String>,
    /// The ConfigMap's keys, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_keys: Vec<String>,
    /// `ConfigFound`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "opkit::conditions::schema")]
    pub conditions: Vec<Condition>,
}

/// The name of the index of Websites by the ConfigMap they name.
pub const BY_CONFIG_MAP: &str = "spec.configMap";

/// A Website's values in the [`BY_CONFIG_MAP`] index: the ConfigMap it names.
pub fn config_map_of(site: &Website) -> Vec<String> {
    vec![site.spec.config_map.clone()]
}

/// Keeps each Website's status in step with its ConfigMap.
#[derive(Controller)]
#[controller(
    for = Website,
    index(Website, "spec.configMap", config_map_of),
    watches(ConfigMap, by_index = "spec.configMap"),
    status
)]
pub struct WebsiteReconciler;

impl Reconcile for WebsiteReconciler {
    type Object = Website;

    async fn reconcile(
        &self,
        req: Request,
        ctx: &Context<Website>,
    ) -> Result<Action, ReconcileError> {
        let Some(site) = ctx.object().await? else {
            return Ok(Action::done());
        };
        let namespace = site.namespace().unwrap_or_default();
        let config = ctx
            .get::<ConfigMap>(Some(&namespace), &site.spec.config_map)
            .await?;

        let mut status = site.status.clone().unwrap_or_default();
        let generation = site.meta().generation;
        let found = match &config {
            Some(cm) => {
                status.config_version = cm.resource_version();
                status.config_keys = cm.data.iter().flatten().map(|(k, _)| k.clone()).collect();
                conditions::new(
                    CONFIG_FOUND,
                    ConditionStatus::True,
                    "Found",
                    "the ConfigMap exists",
                )
            }
            None => {
                status.config_version = None;
                status.config_keys.clear();
                conditions::new(
                    CONFIG_FOUND,
                    ConditionStatus::False,
                    "NotFound",
                    format!(
                        "ConfigMap {namespace}/{} does not exist",
                        site.spec.config_map
                    ),
                )
            }
        };
        conditions::set(
            &mut status.conditions,
            found.observed_generation(generation),
        );
        if site.status.as_ref() != Some(&status) {
            tracing::info!(%req, config_version = ?status.config_version, "config changed");
            // Server-side apply, not a merge patch: a field this controller
            // set before and leaves out now (the version of a deleted
            // ConfigMap) is removed.
            let api = ctx.object_api();
            let mut desired = Website::new(&req.name, site.spec.clone());
            desired.metadata.namespace = Some(namespace.clone());
            desired.status = Some(status);
            client::apply_status(&api, &desired, "configmap-watcher").await?;
        }
        Ok(Action::done())
    }
}
