//! [`ManagedCertificate`]: the manager issues the webhook server's
//! certificate itself, keeps it in a Secret shared by its replicas, and
//! writes its CA into the `caBundle` of the webhook configurations and of
//! the CRDs it converts — a cluster without cert-manager needs nothing
//! else (feature `dev-cert`).
//!
//! ```no_run
//! use opkit::manager::{Manager, ManagerError};
//! use opkit::webhook::{ManagedCertificate, WebhookServer, Webhooks};
//!
//! # async fn example(webhooks: Webhooks) -> Result<(), ManagerError> {
//! let certificate = ManagedCertificate::new("memcached-operator-webhook-service", "memcached-system")
//!     .validating_configuration("memcached-operator-validating")
//!     .mutating_configuration("memcached-operator-mutating")
//!     .crd("memcacheds.cache.example.com");
//! let manager = Manager::builder()
//!     .webhook_server(WebhookServer::new(webhooks).managed_certificate(certificate))
//!     .build()
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! At [`ManagerBuilder::build`](crate::manager::ManagerBuilder::build),
//! before the server reads its certificate files:
//!
//! 1. the Secret (`kubernetes.io/tls`: `tls.crt`, `tls.key`, `ca.crt`) is
//!    read; if it is missing, or was issued for other host names, a new CA
//!    and serving certificate for `<service>.<namespace>.svc` are made and
//!    stored (two replicas starting at once agree: the loser of the create
//!    reads the winner's);
//! 2. the pair is written to the server's certificate files (an `emptyDir`
//!    in a Deployment with a read-only root file system);
//! 3. the CA is patched into every webhook of the named configurations and
//!    the conversion webhook of the named CRDs that points at the Service;
//!    while the server runs this is checked again every 10 s, so a
//!    configuration or CRD applied after the manager started gets it too.
//!
//! The certificate does not expire for practical purposes (it is pinned by
//! the `caBundle`, not trusted through a public CA); delete the Secret and
//! restart the manager to rotate it. In production with cert-manager,
//! leave this out: mount the issued Secret at the cert dir and annotate the
//! configurations and CRDs with `cert-manager.io/inject-ca-from`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, TestOperation};
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::PolicyRule;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use tokio_util::sync::CancellationToken;

use super::dev_cert::DevCertificate;
use super::error::WebhookError;

/// The annotation on the Secret recording the host names the certificate
/// was issued for.
pub const HOSTS_ANNOTATION: &str = "opkit.dev/webhook-serving-hosts";

/// Where the webhook server's certificate comes from when the manager
/// manages it: see the [webhook module docs](crate::webhook).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedCertificate {
    service: String,
    namespace: String,
    secret: String,
    validating: Vec<String>,
    mutating: Vec<String>,
    crds: Vec<String>,
}

impl ManagedCertificate {
    /// A certificate for the Service `service` in `namespace`, kept in the
    /// Secret `<service>-cert` of that namespace.
    pub fn new(service: impl Into<String>, namespace: impl Into<String>) -> Self {
        let service = service.into();
        Self {
            secret: format!("{service}-cert"),
            service,
            namespace: namespace.into(),
            validating: Vec::new(),
            mutating: Vec::new(),
            crds: Vec::new(),
        }
    }

    /// Keep it in the Secret `name` (in the Service's namespace) instead.
    pub fn secret(mut self, name: impl Into<String>) -> Self {
        self.secret = name.into();
        self
    }

    /// Inject the CA into this `ValidatingWebhookConfiguration`.
    pub fn validating_configuration(mut self, name: impl Into<String>) -> Self {
        self.validating.push(name.into());
        self
    }

    /// Inject the CA into this `MutatingWebhookConfiguration`.
    pub fn mutating_configuration(mut self, name: impl Into<String>) -> Self {
        self.mutating.push(name.into());
        self
    }

    /// Inject the CA into the conversion webhook of this CRD
    /// (`<plural>.<group>`).
    pub fn crd(mut self, name: impl Into<String>) -> Self {
        self.crds.push(name.into());
        self
    }

    /// The Secret's name.
    pub fn secret_name(&self) -> &str {
        &self.secret
    }

    /// The host names the certificate is issued for.
    pub(crate) fn hosts(&self) -> [String; 2] {
        let short = format!("{}.{}.svc", self.service, self.namespace);
        let long = format!("{short}.cluster.local");
        [short, long]
    }

    /// The RBAC rules the manager needs for this: `create` Secrets (a
    /// create cannot be limited to a name), `get` and `update` the Secret,
    /// and `get` and `patch` the named configurations and CRDs. Bind them
    /// with a Role in the Service's namespace for the Secret and a
    /// ClusterRole for the rest, or together in a ClusterRole.
    pub fn rbac_rules(&self) -> Vec<PolicyRule> {
        let rule = |group: &str, resource: &str, verbs: &[&str], names: &[String]| PolicyRule {
            api_groups: Some(vec![group.to_owned()]),
            resources: Some(vec![resource.to_owned()]),
            verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
            resource_names: (!names.is_empty()).then(|| names.to_vec()),
            ..PolicyRule::default()
        };
        let mut rules = vec![
            rule("", "secrets", &["create"], &[]),
            rule(
                "",
                "secrets",
                &["get", "update"],
                std::slice::from_ref(&self.secret),
            ),
        ];
        let named = [
            (
                "admissionregistration.k8s.io",
                "validatingwebhookconfigurations",
                &self.validating,
            ),
            (
                "admissionregistration.k8s.io",
                "mutatingwebhookconfigurations",
                &self.mutating,
            ),
            (
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                &self.crds,
            ),
        ];
        for (group, resource, names) in named {
            if !names.is_empty() {
                rules.push(rule(group, resource, &["get", "patch"], names));
            }
        }
        rules
    }

    /// Reads or issues the certificate, writes it to `cert_file` and
    /// `key_file` (and `ca.crt` beside them), and injects its CA. Returns
    /// the CA (PEM).
    pub(crate) async fn provision(
        &self,
        client: &kube::Client,
        cert_file: &Path,
        key_file: &Path,
    ) -> Result<String, WebhookError> {
        let certificate = self.certificate(client).await?;
        certificate.write_pair(cert_file, key_file)?;
        self.inject(client, certificate.ca_pem(), false).await?;
        tracing::info!(
            secret = %self.secret,
            namespace = %self.namespace,
            service = %self.service,
            "webhook serving certificate provisioned"
        );
        Ok(certificate.ca_pem().to_owned())
    }

    fn api_error(&self, action: &'static str, object: String, source: kube::Error) -> WebhookError {
        WebhookError::ManagedCertificate {
            action,
            object,
            source: Box::new(source),
        }
    }

    /// The Secret's certificate, issued and stored first if it is missing
    /// or was made for other hosts.
    async fn certificate(&self, client: &kube::Client) -> Result<DevCertificate, WebhookError> {
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &self.namespace);
        let object = || format!("Secret {}/{}", self.namespace, self.secret);
        let hosts = self.hosts().join(",");
        let existing = secrets
            .get_opt(&self.secret)
            .await
            .map_err(|e| self.api_error("reading", object(), e))?;
        if let Some(secret) = &existing
            && let Some(certificate) = usable(secret, &hosts)
        {
            return Ok(certificate);
        }
        let names = self.hosts();
        let issued = DevCertificate::generate(&[names[0].as_str(), names[1].as_str()])?;
        let mut secret = Secret {
            metadata: ObjectMeta {
                name: Some(self.secret.clone()),
                namespace: Some(self.namespace.clone()),
                annotations: Some([(HOSTS_ANNOTATION.to_owned(), hosts.clone())].into()),
                ..ObjectMeta::default()
            },
            type_: Some("kubernetes.io/tls".to_owned()),
            data: Some(secret_data(&issued)),
            ..Secret::default()
        };
        match existing {
            Some(old) => {
                // Issued for other hosts: replace it (optimistically; a
                // conflict means another replica did, so use theirs).
                secret.metadata.resource_version = old.metadata.resource_version;
                match secrets
                    .replace(&self.secret, &PostParams::default(), &secret)
                    .await
                {
                    Ok(_) => Ok(issued),
                    Err(kube::Error::Api(status)) if status.code == 409 => {
                        self.stored(&secrets, &hosts).await
                    }
                    Err(e) => Err(self.api_error("updating", object(), e)),
                }
            }
            None => match secrets.create(&PostParams::default(), &secret).await {
                Ok(_) => Ok(issued),
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    self.stored(&secrets, &hosts).await
                }
                Err(e) => Err(self.api_error("creating", object(), e)),
            },
        }
    }

    /// The certificate another replica stored.
    async fn stored(
        &self,
        secrets: &Api<Secret>,
        hosts: &str,
    ) -> Result<DevCertificate, WebhookError> {
        let object = format!("Secret {}/{}", self.namespace, self.secret);
        let secret = secrets
            .get(&self.secret)
            .await
            .map_err(|e| self.api_error("reading", object.clone(), e))?;
        usable(&secret, hosts).ok_or(WebhookError::UnusableSecret { secret: object })
    }

    /// Patches the CA into the named configurations and CRDs (those
    /// missing are reported, at debug level when `quiet`).
    async fn inject(
        &self,
        client: &kube::Client,
        ca_pem: &str,
        quiet: bool,
    ) -> Result<(), WebhookError> {
        // `[]byte` fields travel base64-encoded in JSON.
        let bundle = serde_json::Value::String(BASE64.encode(ca_pem.as_bytes()));
        self.inject_configurations::<ValidatingWebhookConfiguration>(
            client,
            &self.validating,
            ca_pem,
            &bundle,
            quiet,
        )
        .await?;
        self.inject_configurations::<MutatingWebhookConfiguration>(
            client,
            &self.mutating,
            ca_pem,
            &bundle,
            quiet,
        )
        .await?;
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for name in &self.crds {
            let Some(crd) = self
                .get_or_skip(&crds, "CustomResourceDefinition", name, quiet)
                .await?
            else {
                continue;
            };
            let needs = crd
                .spec
                .conversion
                .and_then(|c| c.webhook)
                .and_then(|w| w.client_config)
                .is_some_and(|c| {
                    c.service
                        .is_some_and(|s| s.name == self.service && s.namespace == self.namespace)
                        && c.ca_bundle.map(|b| b.0) != Some(ca_pem.as_bytes().to_vec())
                });
            let paths = needs
                .then(|| {
                    PatchOperation::Add(AddOperation {
                        path: PointerBuf::from_tokens([
                            "spec",
                            "conversion",
                            "webhook",
                            "clientConfig",
                            "caBundle",
                        ]),
                        value: bundle.clone(),
                    })
                })
                .into_iter();
            self.patch(&crds, "CustomResourceDefinition", name, paths)
                .await?;
        }
        Ok(())
    }

    /// Patches the CA into the webhooks of the named configurations of kind
    /// `C` that point at the Service and lack it.
    async fn inject_configurations<C: AdmissionConfiguration>(
        &self,
        client: &kube::Client,
        names: &[String],
        ca_pem: &str,
        bundle: &serde_json::Value,
        quiet: bool,
    ) -> Result<(), WebhookError> {
        let api: Api<C> = Api::all(client.clone());
        for name in names {
            let Some(config) = self.get_or_skip(&api, C::KIND, name, quiet).await? else {
                continue;
            };
            let paths: Vec<PatchOperation> = config
                .client_configs()
                .into_iter()
                .enumerate()
                .filter(|(_, (_, client_config))| self.targets(client_config, ca_pem))
                .flat_map(|(i, (webhook, _))| webhook_ca_bundle(i, webhook, bundle))
                .collect();
            self.patch(&api, C::KIND, name, paths.into_iter()).await?;
        }
        Ok(())
    }

    /// Whether a webhook points at the Service and lacks this CA.
    fn targets(&self, config: &WebhookClientConfig, ca_pem: &str) -> bool {
        config
            .service
            .as_ref()
            .is_some_and(|s| s.name == self.service && s.namespace == self.namespace)
            && config.ca_bundle.as_ref().map(|b| b.0.as_slice()) != Some(ca_pem.as_bytes())
    }

    async fn get_or_skip<K>(
        &self,
        api: &Api<K>,
        kind: &'static str,
        name: &str,
        quiet: bool,
    ) -> Result<Option<K>, WebhookError>
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let found = api
            .get_opt(name)
            .await
            .map_err(|e| self.api_error("reading", format!("{kind} {name}"), e))?;
        if found.is_none() && quiet {
            tracing::debug!(
                kind,
                name,
                "not installed yet: its caBundle will be injected later"
            );
        } else if found.is_none() {
            tracing::warn!(
                kind,
                name,
                "not installed yet: its caBundle will be injected once it is (checked every 10 s)"
            );
        }
        Ok(found)
    }

    async fn patch<K>(
        &self,
        api: &Api<K>,
        kind: &'static str,
        name: &str,
        operations: impl Iterator<Item = PatchOperation>,
    ) -> Result<(), WebhookError>
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let operations: Vec<PatchOperation> = operations.collect();
        if operations.is_empty() {
            return Ok(());
        }
        let patch = json_patch::Patch(operations);
        api.patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
            .await
            .map_err(|e| self.api_error("patching the caBundle of", format!("{kind} {name}"), e))?;
        tracing::info!(kind, name, "webhook caBundle injected");
        Ok(())
    }
}

/// How often the CA is injected again while the server runs: a
/// configuration or CRD applied after the manager started (or re-applied
/// without its `caBundle`) is mended within this.
pub(crate) const REINJECT_INTERVAL: Duration = Duration::from_secs(10);

/// Keeps the CA injected while the webhook server serves.
#[derive(Clone)]
pub(crate) struct CaInjector {
    pub(crate) certificate: ManagedCertificate,
    pub(crate) client: kube::Client,
    pub(crate) ca_pem: String,
}

impl std::fmt::Debug for CaInjector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaInjector")
            .field("certificate", &self.certificate)
            .finish_non_exhaustive()
    }
}

impl CaInjector {
    /// Injects every [`REINJECT_INTERVAL`] until `stop`.
    pub(crate) async fn run(self, stop: CancellationToken) {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(REINJECT_INTERVAL) => {}
            }
            if let Err(error) = self
                .certificate
                .inject(&self.client, &self.ca_pem, true)
                .await
            {
                tracing::warn!(%error, "webhook caBundle injection failed; retrying");
            }
        }
    }
}

/// Sets the `caBundle` of the `index`th webhook of a configuration, if it
/// is still the one named `name` (a test first, so a configuration changed
/// since it was read fails the patch rather than the wrong webhook).
/// A webhook configuration kind: its webhooks' names and client configs,
/// in order (the JSON patch addresses them by index).
trait AdmissionConfiguration:
    kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug
{
    const KIND: &'static str;

    fn client_configs(&self) -> Vec<(&str, &WebhookClientConfig)>;
}

impl AdmissionConfiguration for ValidatingWebhookConfiguration {
    const KIND: &'static str = "ValidatingWebhookConfiguration";

    fn client_configs(&self) -> Vec<(&str, &WebhookClientConfig)> {
        self.webhooks
            .iter()
            .flatten()
            .map(|w| (w.name.as_str(), &w.client_config))
            .collect()
    }
}

impl AdmissionConfiguration for MutatingWebhookConfiguration {
    const KIND: &'static str = "MutatingWebhookConfiguration";

    fn client_configs(&self) -> Vec<(&str, &WebhookClientConfig)> {
        self.webhooks
            .iter()
            .flatten()
            .map(|w| (w.name.as_str(), &w.client_config))
            .collect()
    }
}

fn webhook_ca_bundle(index: usize, name: &str, bundle: &serde_json::Value) -> [PatchOperation; 2] {
    let index = index.to_string();
    [
        PatchOperation::Test(TestOperation {
            path: PointerBuf::from_tokens(["webhooks", index.as_str(), "name"]),
            value: serde_json::Value::String(name.to_owned()),
        }),
        PatchOperation::Add(AddOperation {
            path: PointerBuf::from_tokens(["webhooks", index.as_str(), "clientConfig", "caBundle"]),
            value: bundle.clone(),
        }),
    ]
}

/// The certificate a Secret holds, if it has all three parts and was
/// issued for `hosts`.
fn usable(secret: &Secret, hosts: &str) -> Option<DevCertificate> {
    let issued_for = secret
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(HOSTS_ANNOTATION))?;
    if issued_for != hosts {
        return None;
    }
    let data = secret.data.as_ref()?;
    let text = |key: &str| {
        data.get(key)
            .and_then(|v| String::from_utf8(v.0.clone()).ok())
    };
    Some(DevCertificate::from_pems(
        text("ca.crt")?,
        text("tls.crt")?,
        text("tls.key")?,
    ))
}

fn secret_data(certificate: &DevCertificate) -> BTreeMap<String, ByteString> {
    [
        ("ca.crt", certificate.ca_pem()),
        ("tls.crt", certificate.cert_pem()),
        ("tls.key", certificate.key_pem()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_usable_only_with_every_part_for_the_same_hosts() {
        let managed = ManagedCertificate::new("hook", "ns");
        let hosts = managed.hosts().join(",");
        assert_eq!(hosts, "hook.ns.svc,hook.ns.svc.cluster.local");
        let dev = DevCertificate::generate(&["hook.ns.svc"]).unwrap();
        let mut secret = Secret {
            metadata: ObjectMeta {
                annotations: Some([(HOSTS_ANNOTATION.to_owned(), hosts.clone())].into()),
                ..ObjectMeta::default()
            },
            data: Some(secret_data(&dev)),
            ..Secret::default()
        };
        let found = usable(&secret, &hosts).unwrap();
        assert_eq!(found.cert_pem(), dev.cert_pem());
        assert!(usable(&secret, "other.ns.svc").is_none());
        secret.data.as_mut().unwrap().remove("tls.key");
        assert!(usable(&secret, &hosts).is_none());
    }

    #[test]
    fn rbac_names_the_secret_and_each_object() {
        let managed = ManagedCertificate::new("hook", "ns")
            .validating_configuration("v")
            .crd("things.example.com");
        let rules = managed.rbac_rules();
        let named = |resource: &str| {
            rules
                .iter()
                .find(|r| {
                    r.resources.as_deref() == Some(&[resource.to_owned()][..])
                        && r.resource_names.is_some()
                })
                .and_then(|r| r.resource_names.clone())
        };
        assert_eq!(named("secrets"), Some(vec!["hook-cert".to_owned()]));
        assert_eq!(
            named("customresourcedefinitions"),
            Some(vec!["things.example.com".to_owned()])
        );
        assert_eq!(named("mutatingwebhookconfigurations"), None);
    }
}
