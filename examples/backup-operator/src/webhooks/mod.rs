//! The operator's admission and conversion webhooks, served by the manager
//! over HTTPS (see `opkit::webhook`), and their manifests: `cargo opkit
//! create webhook` adds a kind at each `opkit:scaffold` marker.
//!
//! # The serving certificate
//!
//! The apiserver calls the webhooks through the Service [`SERVICE`] and
//! trusts them through the `caBundle` of each configuration (and of each
//! converted CRD). Two ways to provide both:
//!
//! - **Managed by the operator** (the default in `deploy/`: the flag
//!   `--manage-webhook-certificate`): at start the manager reads the Secret
//!   `<SERVICE>-cert`, or issues a CA and a certificate for
//!   `<SERVICE>.<NAMESPACE>.svc` and stores them there (replicas share it),
//!   writes them to the cert dir (an `emptyDir`) and injects the CA into the
//!   configurations and CRDs, checking again every 10 s. Nothing else to
//!   install; the RBAC it needs is in `deploy/05-webhooks.yaml`.
//! - **cert-manager** (production with an existing PKI): drop the flag,
//!   mount the Secret of a `Certificate` for the same DNS names at the cert
//!   dir instead of the `emptyDir`, and annotate both configurations and
//!   the CRDs with `cert-manager.io/inject-ca-from: <NAMESPACE>/<certificate>`.

pub mod backup;
// opkit:scaffold:webhook-modules

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::ObjectMeta;
use opkit::manifest::{Documents, ManifestError};
use opkit::webhook::{
    DEFAULT_CERT_DIR, DEFAULT_PORT, LocalWebhooks, ManagedCertificate, WebhookClient,
    WebhookServer, Webhooks,
};

use crate::{NAME, NAMESPACE, SERVICE_ACCOUNT};

/// The Service the apiserver reaches the webhook server through.
pub const SERVICE: &str = "backup-operator-webhook-service";
/// The ValidatingWebhookConfiguration's name.
pub const VALIDATING: &str = "backup-operator-validating";
/// The MutatingWebhookConfiguration's name.
pub const MUTATING: &str = "backup-operator-mutating";
/// Where the serving certificate is read from (`tls.crt`, `tls.key`);
/// `WEBHOOK_CERT_DIR` overrides it.
pub const CERT_DIR_ENV: &str = "WEBHOOK_CERT_DIR";
/// The configurations `make run` registers (see [`local_server`]), named
/// apart from `deploy/`'s so a deployed operator's stay as they are.
pub const LOCAL: &str = "backup-operator-local";
/// Where `make run` serves the webhooks unless `WEBHOOK_BIND_ADDRESS` says.
pub const LOCAL_ADDRESS: &str = "127.0.0.1:9443";

// ANCHOR: webhooks
/// Every webhook of the operator.
pub fn webhooks() -> Webhooks {
    let webhooks = Webhooks::new();
    let webhooks = backup::register(webhooks);
    let webhooks = webhooks.conversion(
        opkit::webhook::Conversion::<crate::api::backup::Backup>::new()
            .spoke::<crate::api::backup_v2::Backup>(),
    );
    // opkit:scaffold:webhooks
    webhooks
}
// ANCHOR_END: webhooks

/// Where the serving certificate is read from: `WEBHOOK_CERT_DIR`, else
/// opkit's default.
pub fn cert_dir() -> String {
    std::env::var(CERT_DIR_ENV).unwrap_or_else(|_| DEFAULT_CERT_DIR.to_owned())
}

/// The webhook server the manager runs; with `manage_certificate`, the
/// manager issues its certificate (see [`certificate`]).
pub fn server(manage_certificate: bool) -> WebhookServer {
    let server = WebhookServer::new(webhooks()).cert_dir(cert_dir());
    if manage_certificate {
        server.managed_certificate(certificate())
    } else {
        server
    }
}

/// `make run`'s webhook server (`--enable-webhooks=local`): served by this
/// process on `bind_address` (default [`LOCAL_ADDRESS`]) with a certificate
/// issued at start, and registered with an apiserver on this machine by URL
/// in the configurations [`LOCAL`] (and the conversion of each CRD a
/// conversion webhook converts) until the manager stops; see
/// `opkit::webhook::LocalWebhooks`.
pub fn local_server(bind_address: Option<&str>) -> WebhookServer {
    let webhooks = webhooks();
    let mut local = LocalWebhooks::new(LOCAL);
    for crd in crate::crds() {
        if webhooks.converts(&crd.spec.group, &crd.spec.names.kind)
            && let Some(name) = crd.metadata.name
        {
            local = local.crd(name);
        }
    }
    WebhookServer::new(webhooks)
        .bind_address(bind_address.unwrap_or(LOCAL_ADDRESS))
        .local(local)
}

/// The certificate the manager issues and keeps in the Secret
/// `<SERVICE>-cert`, its CA injected into the configurations `deploy/`
/// holds (the validating one when there is a validator, the mutating one
/// when there is a defaulter) and every CRD a conversion webhook converts.
pub fn certificate() -> ManagedCertificate {
    let webhooks = webhooks();
    let client = WebhookClient::service(SERVICE, NAMESPACE);
    let mut certificate = ManagedCertificate::new(SERVICE, NAMESPACE);
    if webhooks
        .validating_configuration(VALIDATING, &client)
        .is_some()
    {
        certificate = certificate.validating_configuration(VALIDATING);
    }
    if webhooks.mutating_configuration(MUTATING, &client).is_some() {
        certificate = certificate.mutating_configuration(MUTATING);
    }
    for crd in crate::crds() {
        if webhooks.converts(&crd.spec.group, &crd.spec.names.kind)
            && let Some(name) = crd.metadata.name
        {
            certificate = certificate.crd(name);
        }
    }
    certificate
}

/// The CRDs, with the conversion stanza (through [`SERVICE`]) on each kind
/// a conversion webhook converts: what `deploy/01-crds.yaml` holds.
pub fn crds_with_conversion() -> Vec<CustomResourceDefinition> {
    let webhooks = webhooks();
    let client = WebhookClient::service(SERVICE, NAMESPACE);
    crate::crds()
        .into_iter()
        .map(|crd| webhooks.crd_with_conversion(crd, &client))
        .collect()
}

fn meta(name: String, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: namespace.map(str::to_owned),
        labels: Some([("app.kubernetes.io/name".to_owned(), NAME.to_owned())].into()),
        ..ObjectMeta::default()
    }
}

fn service_account() -> Vec<Subject> {
    vec![Subject {
        kind: "ServiceAccount".to_owned(),
        name: SERVICE_ACCOUNT.to_owned(),
        namespace: Some(NAMESPACE.to_owned()),
        ..Subject::default()
    }]
}

/// The Service, the RBAC of the managed certificate (a Role for its
/// Secret, a ClusterRole for the injection) and the webhook
/// configurations, as YAML: `deploy/05-webhooks.yaml`.
pub fn manifest() -> Result<String, ManifestError> {
    let client = WebhookClient::service(SERVICE, NAMESPACE);
    let webhooks = webhooks();
    let service = Service {
        metadata: meta(SERVICE.to_owned(), Some(NAMESPACE)),
        spec: Some(ServiceSpec {
            selector: Some(
                [
                    ("app.kubernetes.io/name".to_owned(), NAME.to_owned()),
                    (
                        "app.kubernetes.io/component".to_owned(),
                        "manager".to_owned(),
                    ),
                ]
                .into(),
            ),
            ports: Some(vec![ServicePort {
                name: Some("webhook".to_owned()),
                port: 443,
                target_port: Some(IntOrString::Int(i32::from(DEFAULT_PORT))),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };
    let (secret_rules, cluster_rules): (Vec<PolicyRule>, Vec<PolicyRule>) = certificate()
        .rbac_rules()
        .into_iter()
        .partition(|rule| rule.resources.as_deref() == Some(&["secrets".to_owned()][..]));
    let certificate_role = format!("{NAME}-webhook-certificate");
    let role = Role {
        metadata: meta(certificate_role.clone(), Some(NAMESPACE)),
        rules: Some(secret_rules),
    };
    let role_binding = RoleBinding {
        metadata: meta(certificate_role.clone(), Some(NAMESPACE)),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            kind: "Role".to_owned(),
            name: certificate_role.clone(),
        },
        subjects: Some(service_account()),
    };
    let injector_role = format!("{NAME}-webhook-ca-injector");
    let cluster_role = ClusterRole {
        metadata: meta(injector_role.clone(), None),
        rules: Some(cluster_rules),
        ..ClusterRole::default()
    };
    let cluster_role_binding = ClusterRoleBinding {
        metadata: meta(injector_role.clone(), None),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            kind: "ClusterRole".to_owned(),
            name: injector_role,
        },
        subjects: Some(service_account()),
    };
    let mut documents = Documents::new()
        .push(&service)?
        .push(&role)?
        .push(&role_binding)?
        .push(&cluster_role)?
        .push(&cluster_role_binding)?;
    if let Some(config) = webhooks.validating_configuration(VALIDATING, &client) {
        documents = documents.push(&config)?;
    }
    if let Some(config) = webhooks.mutating_configuration(MUTATING, &client) {
        documents = documents.push(&config)?;
    }
    documents.to_yaml()
}
