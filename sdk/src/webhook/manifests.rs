//! The manifests of [`Webhooks`]: `ValidatingWebhookConfiguration`,
//! `MutatingWebhookConfiguration`, and the conversion stanza of a CRD,
//! pointing at a Service in the cluster or at a URL (envtest).

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1 as admission;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::api::ObjectMeta;

use super::admission::Operation;
use super::webhooks::{AdmissionEntry, AdmissionType, CONVERSION_PATH, Webhooks};

/// Where the apiserver reaches the webhook server, and the CA it trusts
/// for it.
///
/// ```
/// use opkit::webhook::WebhookClient;
///
/// // In a cluster: through the operator's Service (cert-manager can fill the caBundle).
/// let in_cluster = WebhookClient::service("memcached-operator-webhook", "memcached-system");
/// // In envtest: the server on loopback, trusted through its development CA.
/// let local = WebhookClient::url("https://127.0.0.1:9443").ca_bundle("-----BEGIN CERTIFICATE-----...");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookClient {
    target: Target,
    ca_bundle: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Service {
        name: String,
        namespace: String,
        port: Option<i32>,
    },
    Url(String),
}

impl WebhookClient {
    /// Through the Service `name` in `namespace`, on port 443.
    pub fn service(name: impl Into<String>, namespace: impl Into<String>) -> Self {
        Self {
            target: Target::Service {
                name: name.into(),
                namespace: namespace.into(),
                port: None,
            },
            ca_bundle: None,
        }
    }

    /// Through the Service on `port` (only with [`service`](Self::service)).
    pub fn port(mut self, port: i32) -> Self {
        if let Target::Service { port: p, .. } = &mut self.target {
            *p = Some(port);
        }
        self
    }

    /// At `base` (`https://host:port`, no path): each webhook's path is
    /// appended.
    pub fn url(base: impl Into<String>) -> Self {
        Self {
            target: Target::Url(base.into().trim_end_matches('/').to_owned()),
            ca_bundle: None,
        }
    }

    /// Trust the webhook server's certificate through this CA (PEM).
    pub fn ca_bundle(mut self, ca_pem: impl Into<String>) -> Self {
        self.ca_bundle = Some(ca_pem.into());
        self
    }

    fn admission(&self, path: &str) -> admission::WebhookClientConfig {
        let ca_bundle = self
            .ca_bundle
            .as_ref()
            .map(|ca| ByteString(ca.as_bytes().to_vec()));
        match &self.target {
            Target::Service {
                name,
                namespace,
                port,
            } => admission::WebhookClientConfig {
                ca_bundle,
                service: Some(admission::ServiceReference {
                    name: name.clone(),
                    namespace: namespace.clone(),
                    path: Some(path.to_owned()),
                    port: *port,
                }),
                url: None,
            },
            Target::Url(base) => admission::WebhookClientConfig {
                ca_bundle,
                service: None,
                url: Some(format!("{base}{path}")),
            },
        }
    }

    fn conversion(&self, path: &str) -> apiextensions::WebhookClientConfig {
        let config = self.admission(path);
        apiextensions::WebhookClientConfig {
            ca_bundle: config.ca_bundle,
            service: config.service.map(|s| apiextensions::ServiceReference {
                name: s.name,
                namespace: s.namespace,
                path: s.path,
                port: s.port,
            }),
            url: config.url,
        }
    }
}

fn operation_name(operation: &Operation) -> &'static str {
    match operation {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
        Operation::Connect => "CONNECT",
    }
}

fn rule(entry: &AdmissionEntry) -> admission::RuleWithOperations {
    admission::RuleWithOperations {
        api_groups: Some(vec![entry.group.clone()]),
        api_versions: Some(vec![entry.version.clone()]),
        operations: Some(
            entry
                .operations()
                .iter()
                .map(|o| operation_name(o).to_owned())
                .collect(),
        ),
        resources: Some(vec![entry.plural.clone()]),
        scope: None,
    }
}

fn namespace_selector(entry: &AdmissionEntry) -> Option<LabelSelector> {
    entry
        .options
        .namespaces
        .as_ref()
        .map(|names| LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "kubernetes.io/metadata.name".to_owned(),
                operator: "In".to_owned(),
                values: Some(names.clone()),
            }]),
            match_labels: None,
        })
}

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        ..ObjectMeta::default()
    }
}

impl Webhooks {
    /// The `ValidatingWebhookConfiguration` named `name` holding every
    /// validating webhook, reached through `client`; `None` without any.
    pub fn validating_configuration(
        &self,
        name: &str,
        client: &WebhookClient,
    ) -> Option<admission::ValidatingWebhookConfiguration> {
        let webhooks: Vec<admission::ValidatingWebhook> = self
            .of_type(AdmissionType::Validating)
            .map(|entry| admission::ValidatingWebhook {
                admission_review_versions: vec!["v1".to_owned()],
                client_config: client.admission(&entry.path),
                failure_policy: Some(entry.options.failure_policy.as_str().to_owned()),
                match_policy: Some("Equivalent".to_owned()),
                name: entry.name.clone(),
                namespace_selector: namespace_selector(entry),
                rules: Some(vec![rule(entry)]),
                side_effects: "None".to_owned(),
                timeout_seconds: Some(entry.options.timeout_seconds),
                ..admission::ValidatingWebhook::default()
            })
            .collect();
        (!webhooks.is_empty()).then(|| admission::ValidatingWebhookConfiguration {
            metadata: meta(name),
            webhooks: Some(webhooks),
        })
    }

    /// The `MutatingWebhookConfiguration` named `name` holding every
    /// mutating webhook, reached through `client`; `None` without any.
    pub fn mutating_configuration(
        &self,
        name: &str,
        client: &WebhookClient,
    ) -> Option<admission::MutatingWebhookConfiguration> {
        let webhooks: Vec<admission::MutatingWebhook> = self
            .of_type(AdmissionType::Mutating)
            .map(|entry| admission::MutatingWebhook {
                admission_review_versions: vec!["v1".to_owned()],
                client_config: client.admission(&entry.path),
                failure_policy: Some(entry.options.failure_policy.as_str().to_owned()),
                match_policy: Some("Equivalent".to_owned()),
                name: entry.name.clone(),
                namespace_selector: namespace_selector(entry),
                reinvocation_policy: Some("Never".to_owned()),
                rules: Some(vec![rule(entry)]),
                side_effects: "None".to_owned(),
                timeout_seconds: Some(entry.options.timeout_seconds),
                ..admission::MutatingWebhook::default()
            })
            .collect();
        (!webhooks.is_empty()).then(|| admission::MutatingWebhookConfiguration {
            metadata: meta(name),
            webhooks: Some(webhooks),
        })
    }

    /// `crd` with a webhook conversion stanza pointing at `client`, if a
    /// [`Conversion`](super::Conversion) is registered for its kind;
    /// otherwise `crd` unchanged.
    pub fn crd_with_conversion(
        &self,
        mut crd: apiextensions::CustomResourceDefinition,
        client: &WebhookClient,
    ) -> apiextensions::CustomResourceDefinition {
        if self.converts(&crd.spec.group, &crd.spec.names.kind) {
            crd.spec.conversion = Some(apiextensions::CustomResourceConversion {
                strategy: "Webhook".to_owned(),
                webhook: Some(apiextensions::WebhookConversion {
                    client_config: Some(client.conversion(CONVERSION_PATH)),
                    conversion_review_versions: vec!["v1".to_owned()],
                }),
            });
        }
        crd
    }

    fn of_type(&self, admission_type: AdmissionType) -> impl Iterator<Item = &AdmissionEntry> {
        self.admission
            .iter()
            .filter(move |e| e.admission_type == admission_type)
    }
}
