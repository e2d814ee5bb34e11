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

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::core::crd::MergeError;
use opkit::webhook::{ManagedCertificate, WebhookClient, Webhooks};

pub use reconciler::WebsiteReconciler;
pub use webhooks::{WebsiteWebhook, webhooks};

/// The field manager of the operator's writes.
pub const NAME: &str = "website-webhooks";
/// The namespace it is deployed to.
pub const NAMESPACE: &str = "website-system";
/// The Service the apiserver reaches the webhook server through.
pub const WEBHOOK_SERVICE: &str = "website-webhook-service";

// ANCHOR: crd
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

// ANCHOR_END: crd

/// The name of the Website CRD.
pub const CRD_NAME: &str = "websites.example.opkit.dev";

// ANCHOR: certificate
/// The certificate the manager issues itself (`--manage-webhook-certificate`):
/// kept in the Secret `website-webhook-service-cert`, its CA injected into
/// both webhook configurations and the CRD's conversion webhook.
pub fn managed_certificate() -> ManagedCertificate {
    ManagedCertificate::new(WEBHOOK_SERVICE, NAMESPACE)
        .validating_configuration(NAME)
        .mutating_configuration(NAME)
        .crd(CRD_NAME)
}

// ANCHOR_END: certificate

/// The objects generated from the code: the CRD (with its conversion
/// stanza) and the webhook configurations, all reaching the webhook server
/// through [`WEBHOOK_SERVICE`], without a `caBundle` (the manager injects
/// it, see [`managed_certificate`]; with cert-manager, its CA injector).
pub struct Manifests {
    /// The two-version CRD, converted by the webhook.
    pub crd: CustomResourceDefinition,
    /// The validating webhook configuration.
    pub validating: Option<ValidatingWebhookConfiguration>,
    /// The mutating (defaulting) webhook configuration.
    pub mutating: Option<MutatingWebhookConfiguration>,
}

impl Manifests {
    /// Renders them from [`webhooks`].
    pub fn generate() -> Result<Self, MergeError> {
        let webhooks = webhooks();
        let client = WebhookClient::service(WEBHOOK_SERVICE, NAMESPACE);
        Ok(Self {
            crd: crd(&webhooks, &client)?,
            validating: webhooks.validating_configuration(NAME, &client),
            mutating: webhooks.mutating_configuration(NAME, &client),
        })
    }
}

/// [`Manifests`] as YAML.
pub fn manifests() -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let generated = Manifests::generate()?;
    let mut documents = opkit::manifest::Documents::new().push(&generated.crd)?;
    if let Some(config) = &generated.validating {
        documents = documents.push(config)?;
    }
    if let Some(config) = &generated.mutating {
        documents = documents.push(config)?;
    }
    Ok(documents.to_yaml()?)
}
