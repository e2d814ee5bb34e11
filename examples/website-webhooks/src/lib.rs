//! An operator for `Website`s whose API has two versions, with all three
//! kinds of webhook opkit serves:
//!
//! - **conversion**: `v1` (a single `url`; the storage version) and `v2`
//!   (`host`, `tls`, `replicas`; the hub) convert through the hub, so
//!   clients of either version read every object; v2's `replicas` rides
//!   on a v1 object as an annotation, so nothing is lost either way;
//! - **defaulting**: `v2.spec.tls` defaults to `true` and `replicas` to 1;
//! - **validating**: hosts must be lower-case DNS names, `replicas` at
//!   most 5, and a Website cannot move to another host; plain HTTP is
//!   allowed with a warning.
//!
//! The reconciler reads `v2` from the cache (listed through the conversion
//! webhook, since `v1` is stored: the manager serves webhooks before the
//! cache syncs) and keeps a
//! ConfigMap `<name>-site` holding the site's URL.

pub mod api;
mod reconciler;
mod webhooks;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::core::crd::MergeError;
use opkit::webhook::{WebhookClient, Webhooks};

pub use reconciler::WebsiteReconciler;
pub use webhooks::{WebsiteWebhook, webhooks};

/// The field manager of the operator's writes.
pub const NAME: &str = "website-webhooks";
/// The namespace it is deployed to.
pub const NAMESPACE: &str = "website-system";
/// The Service the apiserver reaches the webhook server through.
pub const WEBHOOK_SERVICE: &str = "website-webhook-service";

/// The version the apiserver stores: `v1`, the older one (existing data
/// stays as it is). Clients of `v2`, the controller's cache included, read
/// it through the conversion webhook.
pub const STORAGE_VERSION: &str = "v1";

/// The Website CRD with both versions ([`STORAGE_VERSION`] stored) and, when `webhooks`
/// converts Websites, the conversion stanza pointing at `client`.
pub fn crd(
    webhooks: &Webhooks,
    client: &WebhookClient,
) -> Result<CustomResourceDefinition, MergeError> {
    let versions = vec![api::v1::Website::crd(), api::v2::Website::crd()];
    let merged = kube::core::crd::merge_crds(versions, STORAGE_VERSION)?;
    Ok(webhooks.crd_with_conversion(merged, client))
}

/// The manifests generated from the code: the CRD (with its conversion
/// stanza) and the webhook configurations, all reaching the webhook
/// server through [`WEBHOOK_SERVICE`] (cert-manager fills in the CA).
pub fn manifests() -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let webhooks = webhooks();
    let client = WebhookClient::service(WEBHOOK_SERVICE, NAMESPACE);
    let mut documents = opkit::manifest::Documents::new().push(&crd(&webhooks, &client)?)?;
    if let Some(config) = webhooks.validating_configuration(NAME, &client) {
        documents = documents.push(&config)?;
    }
    if let Some(config) = webhooks.mutating_configuration(NAME, &client) {
        documents = documents.push(&config)?;
    }
    Ok(documents.to_yaml()?)
}
