//! Admission and conversion webhooks against a real kube-apiserver: the
//! apiserver calls opkit's webhook server on loopback (URL + caBundle of a
//! development certificate), as controller-runtime's envtest does.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, PostParams};
use kube::{CustomResource, CustomResourceExt, ResourceExt};
use opkit::manager::Manager;
use opkit::webhook::{
    Conversion, ConversionError, DevCertificate, FailurePolicy, HOSTS_ANNOTATION, Hub,
    ManagedCertificate, Operation, Spoke, WebhookClient, WebhookOptions, WebhookServer, Webhooks,
};
use opkit_envtest::ControlPlane;
use opkit_tests::{create_namespace, eventually, init_tracing, plane_with_namespace};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use super::webhook_support;
use webhook_support::*;

#[tokio::test]
async fn a_denied_create_update_or_delete_returns_the_webhooks_message() {
    let plane = plane_with_gadgets().await;
    let admin = plane.client().unwrap();
    let ns = "webhook-deny";
    create_namespace(&admin, ns).await;
    let webhooks = Webhooks::new().validating_with::<Gadget, _>(
        GadgetRules::default(),
        WebhookOptions::new()
            .operations([Operation::Create, Operation::Update, Operation::Delete])
            .namespaces([ns]),
    );
    let served = Served::start(&webhooks).await;
    plane
        .install_webhooks("webhook-deny", &webhooks, &served.client())
        .await
        .unwrap();
    let gadgets: Api<Gadget> = Api::namespaced(admin, ns);
    until_validating(&gadgets).await;

    let status = api_error(
        gadgets
            .create(&PostParams::default(), &gadget("big", Some(11), None))
            .await,
    );
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status
            .message
            .contains("denied the request: spec.size 11 is above the limit of 10"),
        "{}",
        status.message
    );

    // Update: color cannot change once set.
    gadgets
        .create(
            &PostParams::default(),
            &gadget("protected-a", Some(1), Some("red")),
        )
        .await
        .unwrap();
    let mut changed = gadgets.get("protected-a").await.unwrap();
    changed.spec.color = Some("green".to_owned());
    let status = api_error(
        gadgets
            .replace("protected-a", &PostParams::default(), &changed)
            .await,
    );
    assert_eq!(status.code, 403, "{status:?}");
    assert!(
        status.message.contains("spec.color cannot change once set"),
        "{}",
        status.message
    );

    // Delete: protected objects stay. The refusal's own code and reason
    // (`Denied::with_code`) and its warning (`Denied::with_warning`) reach
    // the client.
    let (status, warnings) = delete_with_warnings(&gadgets, "protected-a").await;
    assert_eq!(
        (status.code, status.reason.as_str()),
        (409, "Conflict"),
        "{status:?}"
    );
    assert!(
        status.message.contains("protected-a is protected"),
        "{}",
        status.message
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("remove the protected label first")),
        "{warnings:?}"
    );
    assert!(gadgets.get_opt("protected-a").await.unwrap().is_some());

    // Allowed requests go through.
    gadgets
        .create(&PostParams::default(), &gadget("small", Some(3), None))
        .await
        .unwrap();
    gadgets
        .delete("small", &DeleteParams::default())
        .await
        .unwrap();

    plane.uninstall_webhooks("webhook-deny").await.unwrap();
    served.stop().await;
}

/// Sends a create through the raw client and returns the `Warning`
/// headers of the answer.
async fn create_with_warnings(client: &kube::Client, ns: &str, g: &Gadget) -> Vec<String> {
    let request = kube::core::Request::new(format!(
        "/apis/admission.opkit.test/v1/namespaces/{ns}/gadgets"
    ))
    .create(&PostParams::default(), serde_json::to_vec(g).unwrap())
    .unwrap()
    .map(kube::client::Body::from);
    let response = client.send(request).await.unwrap();
    assert!(response.status().is_success(), "{:?}", response.status());
    warning_headers(response.headers())
}

/// The `Warning` headers of an answer.
fn warning_headers(headers: &http::HeaderMap) -> Vec<String> {
    headers
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect()
}

/// Sends a delete that a webhook refuses through the raw client and
/// returns the refusal and the `Warning` headers of the answer.
async fn delete_with_warnings(
    gadgets: &Api<Gadget>,
    name: &str,
) -> (kube::core::Status, Vec<String>) {
    let request = kube::core::Request::new(gadgets.resource_url())
        .delete(name, &DeleteParams::default())
        .unwrap()
        .map(kube::client::Body::from);
    let response = gadgets.clone().into_client().send(request).await.unwrap();
    let warnings = warning_headers(response.headers());
    assert!(!response.status().is_success(), "{:?}", response.status());
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (serde_json::from_slice(&body).unwrap(), warnings)
}

#[tokio::test]
async fn warnings_reach_the_client_and_defaults_are_applied() {
    let plane = plane_with_gadgets().await;
    let admin = plane.client().unwrap();
    let ns = "webhook-defaults";
    create_namespace(&admin, ns).await;
    let webhooks = Webhooks::new()
        .validating_with::<Gadget, _>(
            GadgetRules::default(),
            WebhookOptions::new().namespaces([ns]),
        )
        .defaulting_with::<Gadget, _>(GadgetDefaults, WebhookOptions::new().namespaces([ns]));
    let served = Served::start(&webhooks).await;
    plane
        .install_webhooks("webhook-defaults", &webhooks, &served.client())
        .await
        .unwrap();
    let gadgets: Api<Gadget> = Api::namespaced(admin.clone(), ns);
    until_validating(&gadgets).await;
    until_mutating(&gadgets).await;

    let warnings = create_with_warnings(&admin, ns, &gadget("costly", Some(7), None)).await;
    assert!(
        warnings.iter().any(|w| w.contains("spec.size 7 is costly")),
        "{warnings:?}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("spec.color defaulted to blue")),
        "{warnings:?}"
    );

    // The defaults are stored: read back what the apiserver kept.
    let stored = gadgets.get("costly").await.unwrap();
    assert_eq!(stored.spec.color.as_deref(), Some("blue"));
    assert_eq!(stored.spec.size, Some(7));
    assert_eq!(
        stored.labels().get("defaulted-by").map(String::as_str),
        Some("opkit")
    );

    // A value the client set is kept; only what was missing is defaulted.
    let red = gadgets
        .create(&PostParams::default(), &gadget("red", None, Some("red")))
        .await
        .unwrap();
    assert_eq!(red.spec.color.as_deref(), Some("red"));
    assert_eq!(red.spec.size, None);

    plane.uninstall_webhooks("webhook-defaults").await.unwrap();
    served.stop().await;
}

#[tokio::test]
async fn when_the_webhook_is_down_fail_refuses_and_ignore_admits() {
    let plane = plane_with_gadgets().await;
    let admin = plane.client().unwrap();
    let (fail_ns, ignore_ns) = ("webhook-down-fail", "webhook-down-ignore");
    create_namespace(&admin, fail_ns).await;
    create_namespace(&admin, ignore_ns).await;
    let webhooks = Webhooks::new()
        .validating_with::<Gadget, _>(
            GadgetRules::default(),
            WebhookOptions::new()
                .name("vgadget-fail.admission.opkit.test")
                .path("/validate-fail")
                .failure_policy(FailurePolicy::Fail)
                .namespaces([fail_ns]),
        )
        .validating_with::<Gadget, _>(
            GadgetRules::default(),
            WebhookOptions::new()
                .name("vgadget-ignore.admission.opkit.test")
                .path("/validate-ignore")
                .failure_policy(FailurePolicy::Ignore)
                .namespaces([ignore_ns]),
        );
    let served = Served::start(&webhooks).await;
    plane
        .install_webhooks("webhook-down", &webhooks, &served.client())
        .await
        .unwrap();
    let failing: Api<Gadget> = Api::namespaced(admin.clone(), fail_ns);
    let ignoring: Api<Gadget> = Api::namespaced(admin, ignore_ns);
    // Both webhooks are in effect while the server runs...
    until_validating(&failing).await;
    until_validating(&ignoring).await;
    // ... then it goes down.
    served.stop().await;

    let status = api_error(
        failing
            .create(&PostParams::default(), &gadget("while-down", Some(1), None))
            .await,
    );
    assert!(
        status.message.contains("failed calling webhook"),
        "{}",
        status.message
    );
    assert!(failing.get_opt("while-down").await.unwrap().is_none());
    // Ignore admits, even what the webhook would have refused.
    ignoring
        .create(
            &PostParams::default(),
            &gadget("while-down", Some(11), None),
        )
        .await
        .unwrap();

    plane.uninstall_webhooks("webhook-down").await.unwrap();
}

#[tokio::test]
async fn a_webhook_slower_than_its_timeout_follows_the_failure_policy() {
    let plane = plane_with_gadgets().await;
    let admin = plane.client().unwrap();
    let (fail_ns, ignore_ns) = ("webhook-slow-fail", "webhook-slow-ignore");
    create_namespace(&admin, fail_ns).await;
    create_namespace(&admin, ignore_ns).await;
    let rules = GadgetRules::default();
    let webhooks = Webhooks::new()
        .validating_with::<Gadget, _>(
            rules.clone(),
            WebhookOptions::new()
                .name("vgadget-slow-fail.admission.opkit.test")
                .path("/validate-slow-fail")
                .timeout_seconds(1)
                .failure_policy(FailurePolicy::Fail)
                .namespaces([fail_ns]),
        )
        .validating_with::<Gadget, _>(
            rules.clone(),
            WebhookOptions::new()
                .name("vgadget-slow-ignore.admission.opkit.test")
                .path("/validate-slow-ignore")
                .timeout_seconds(1)
                .failure_policy(FailurePolicy::Ignore)
                .namespaces([ignore_ns]),
        );
    let served = Served::start(&webhooks).await;
    plane
        .install_webhooks("webhook-slow", &webhooks, &served.client())
        .await
        .unwrap();
    let failing: Api<Gadget> = Api::namespaced(admin.clone(), fail_ns);
    let ignoring: Api<Gadget> = Api::namespaced(admin, ignore_ns);
    until_validating(&failing).await;
    until_validating(&ignoring).await;

    // `slow-*` objects are answered only when the gate opens: never, here,
    // within the 1 s timeout.
    let status = api_error(
        failing
            .create(&PostParams::default(), &gadget("slow-fail", Some(1), None))
            .await,
    );
    assert!(
        status.message.contains("failed calling webhook")
            && (status.message.contains("deadline") || status.message.contains("timeout")),
        "{}",
        status.message
    );
    assert!(failing.get_opt("slow-fail").await.unwrap().is_none());
    ignoring
        .create(
            &PostParams::default(),
            &gadget("slow-ignore", Some(1), None),
        )
        .await
        .unwrap();

    rules.gate.cancel();
    plane.uninstall_webhooks("webhook-slow").await.unwrap();
    served.stop().await;
}

/// Two versions of one kind: v1 has a URL, v2 (the hub, stored) a host
/// and a TLS flag.
mod v1 {
    use super::*;

    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
    #[kube(
        group = "conversion.opkit.test",
        version = "v1",
        kind = "Website",
        namespaced
    )]
    /// A Website in v1.
    pub struct WebsiteSpec {
        /// `scheme://host`.
        pub url: String,
    }
}

mod v2 {
    use super::*;

    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
    #[kube(
        group = "conversion.opkit.test",
        version = "v2",
        kind = "Website",
        namespaced
    )]
    /// A Website in v2.
    pub struct WebsiteSpec {
        /// The host.
        pub host: String,
        /// Served over HTTPS.
        pub tls: bool,
    }
}

/// How many objects the webhook converted, each way.
static TO_HUB: AtomicUsize = AtomicUsize::new(0);
static FROM_HUB: AtomicUsize = AtomicUsize::new(0);

impl Hub for v2::Website {}

impl Spoke<v2::Website> for v1::Website {
    fn to_hub(self) -> Result<v2::Website, ConversionError> {
        TO_HUB.fetch_add(1, Ordering::SeqCst);
        let Some((scheme, host)) = self.spec.url.split_once("://") else {
            return Err(ConversionError::new(format!(
                "spec.url {:?} has no scheme",
                self.spec.url
            )));
        };
        Ok(v2::Website {
            metadata: self.metadata,
            spec: v2::WebsiteSpec {
                host: host.to_owned(),
                tls: scheme == "https",
            },
        })
    }

    fn from_hub(hub: v2::Website) -> Result<Self, ConversionError> {
        FROM_HUB.fetch_add(1, Ordering::SeqCst);
        let scheme = if hub.spec.tls { "https" } else { "http" };
        Ok(v1::Website {
            metadata: hub.metadata,
            spec: v1::WebsiteSpec {
                url: format!("{scheme}://{}", hub.spec.host),
            },
        })
    }
}

#[tokio::test]
async fn a_v1_object_is_read_back_as_v2_and_converted_both_ways() {
    let ns = "webhook-conversion";
    let (plane, admin) = plane_with_namespace(ns).await;
    let webhooks =
        Webhooks::new().conversion(Conversion::<v2::Website>::new().spoke::<v1::Website>());
    let served = Served::start(&webhooks).await;
    let crd =
        kube::core::crd::merge_crds(vec![v1::Website::crd(), v2::Website::crd()], "v2").unwrap();
    let crd = webhooks.crd_with_conversion(crd, &served.client());
    assert_eq!(
        crd.spec.conversion.as_ref().map(|c| c.strategy.as_str()),
        Some("Webhook")
    );
    plane.install_crds(&[crd]).await.unwrap();

    let old: Api<v1::Website> = Api::namespaced(admin.clone(), ns);
    let new: Api<v2::Website> = Api::namespaced(admin, ns);
    // Created as v1: converted to v2 (the storage version) by the webhook.
    let created = old
        .create(
            &PostParams::default(),
            &v1::Website::new(
                "secure",
                v1::WebsiteSpec {
                    url: "https://secure.example".to_owned(),
                },
            ),
        )
        .await
        .unwrap();
    assert_eq!(created.spec.url, "https://secure.example");
    assert!(TO_HUB.load(Ordering::SeqCst) >= 1);

    // Read as v2: what is stored.
    let as_v2 = new.get("secure").await.unwrap();
    assert_eq!(as_v2.spec.host, "secure.example");
    assert!(as_v2.spec.tls);
    assert_eq!(as_v2.metadata.uid, created.metadata.uid);

    // Created as v2, read as v1: converted from the hub.
    let from_hub_before = FROM_HUB.load(Ordering::SeqCst);
    new.create(
        &PostParams::default(),
        &v2::Website::new(
            "plain",
            v2::WebsiteSpec {
                host: "plain.example".to_owned(),
                tls: false,
            },
        ),
    )
    .await
    .unwrap();
    let as_v1 = old.get("plain").await.unwrap();
    assert_eq!(as_v1.spec.url, "http://plain.example");
    assert!(FROM_HUB.load(Ordering::SeqCst) > from_hub_before);

    // A list in v1 converts every item.
    let mut urls: Vec<String> = old
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|w| w.spec.url)
        .collect();
    urls.sort();
    assert_eq!(urls, ["http://plain.example", "https://secure.example"]);

    // A conversion that fails reaches the client with its message.
    let error = old
        .create(
            &PostParams::default(),
            &v1::Website::new(
                "broken",
                v1::WebsiteSpec {
                    url: "no-scheme".to_owned(),
                },
            ),
        )
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("spec.url \"no-scheme\" has no scheme"),
        "{error}"
    );

    served.stop().await;
}

/// The certificate a TLS client trusting `ca_pem` is served at `addr`
/// (DER), or why the handshake failed.
async fn served_certificate(addr: SocketAddr, ca_pem: &str) -> Result<Vec<u8>, String> {
    served_certificate_for(addr, ca_pem, "127.0.0.1").await
}

/// [`served_certificate`], verified for the host `name`.
async fn served_certificate_for(
    addr: SocketAddr,
    ca_pem: &str,
    name: &str,
) -> Result<Vec<u8>, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let name = ServerName::try_from(name.to_owned()).unwrap();
    let tls = connector
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    let (_, connection) = tls.get_ref();
    Ok(connection.peer_certificates().unwrap()[0].to_vec())
}

fn der(pem: &str) -> Vec<u8> {
    CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .to_vec()
}

#[tokio::test]
async fn a_new_certificate_is_served_after_the_files_change() {
    init_tracing();
    let served = Served::start(&Webhooks::new()).await;
    let first = served_certificate(served.addr, served.dev.ca_pem())
        .await
        .unwrap();
    assert_eq!(first, der(served.dev.cert_pem()));

    // Rotate: a new CA and certificate, written as a Secret update would.
    let rotated = DevCertificate::generate(&["127.0.0.1"]).unwrap();
    rotated.write_to(served.dir.path()).unwrap();
    eventually("the rotated certificate to be served", WITHIN, || async {
        (served_certificate(served.addr, rotated.ca_pem()).await.ok()
            == Some(der(rotated.cert_pem())))
        .then_some(())
    })
    .await;
    // The old CA no longer verifies what is served.
    let error = served_certificate(served.addr, served.dev.ca_pem())
        .await
        .unwrap_err();
    assert!(error.contains("certificate"), "{error}");

    // A half-written rotation (a new certificate, the old key) is never
    // served: the current pair stays until both files match (the unit
    // test `loads_and_reloads_only_on_change` checks the refusal itself).
    let mut loads = served.loads.clone();
    let before = *loads.borrow();
    let third = DevCertificate::generate(&["127.0.0.1"]).unwrap();
    std::fs::write(served.dir.path().join("tls.crt"), third.cert_pem()).unwrap();
    assert_eq!(
        served_certificate(served.addr, rotated.ca_pem())
            .await
            .unwrap(),
        der(rotated.cert_pem())
    );
    std::fs::write(served.dir.path().join("tls.key"), third.key_pem()).unwrap();
    tokio::time::timeout(WITHIN, loads.wait_for(|n| *n > before))
        .await
        .expect("the third certificate is loaded")
        .unwrap();
    assert_eq!(
        served_certificate(served.addr, third.ca_pem())
            .await
            .unwrap(),
        der(third.cert_pem())
    );
    served.stop().await;
}

async fn http_get(addr: SocketAddr, path: &str) -> u16 {
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let uri = format!("http://{addr}{path}").parse().unwrap();
    let response = tokio::time::timeout(WITHIN, client.get(uri))
        .await
        .expect("the server answers")
        .expect("an HTTP response");
    let status = response.status().as_u16();
    let _ = response.into_body().collect().await;
    status
}

#[tokio::test]
async fn the_manager_serves_webhooks_reports_them_ready_and_stops_them() {
    let plane = plane_with_gadgets().await;
    let admin = plane.client().unwrap();
    let ns = "webhook-manager";
    create_namespace(&admin, ns).await;
    let webhooks = Webhooks::new().validating_with::<Gadget, _>(
        GadgetRules::default(),
        WebhookOptions::new().namespaces([ns]),
    );
    let dir = tempfile::tempdir().unwrap();
    let dev = DevCertificate::generate(&["127.0.0.1"]).unwrap();
    dev.write_to(dir.path()).unwrap();
    let manager = Manager::builder()
        .client(admin.clone())
        .health_probe_bind_address("127.0.0.1:0")
        .webhook_server(
            WebhookServer::new(webhooks.clone())
                .bind_address("127.0.0.1:0")
                .cert_dir(dir.path()),
        )
        .build()
        .await
        .unwrap();
    let webhook_addr = manager.webhook_address().unwrap();
    let probes = manager.health_probe_address().unwrap();
    let stop = CancellationToken::new();
    let running = tokio::spawn(manager.run_until(stop.clone().cancelled_owned()));

    eventually("/readyz/webhook to pass", WITHIN, || async {
        (http_get(probes, "/readyz/webhook").await == 200).then_some(())
    })
    .await;
    let client = WebhookClient::url(format!("https://{webhook_addr}")).ca_bundle(dev.ca_pem());
    plane
        .install_webhooks("webhook-manager", &webhooks, &client)
        .await
        .unwrap();
    let gadgets: Api<Gadget> = Api::namespaced(admin, ns);
    until_validating(&gadgets).await;

    stop.cancel();
    tokio::time::timeout(WITHIN, running)
        .await
        .expect("the manager stops")
        .unwrap()
        .unwrap();
    // Stopped with the manager: nothing listens any more.
    assert!(TcpStream::connect(webhook_addr).await.is_err());
    plane.uninstall_webhooks("webhook-manager").await.unwrap();
}

/// The manager issues its own certificate: kept in a Secret, written to the
/// cert dir, its CA injected into the configuration; a second replica
/// reuses it; a Secret issued for other hosts is replaced.
#[tokio::test]
async fn a_managed_certificate_is_kept_in_a_secret_and_its_ca_injected() {
    let plane = plane_with_gadgets().await;
    let admin = plane.client().unwrap();
    let ns = "webhook-managed";
    create_namespace(&admin, ns).await;
    let webhooks = Webhooks::new().validating_with::<Gadget, _>(
        GadgetRules::default(),
        WebhookOptions::new().namespaces([ns]),
    );
    // Installed as `cargo opkit manifests` writes it: a Service, no caBundle.
    let service = WebhookClient::service("gadget-webhook", ns);
    plane
        .install_webhooks("webhook-managed", &webhooks, &service)
        .await
        .unwrap();
    let managed = ManagedCertificate::new("gadget-webhook", ns)
        .validating_configuration("webhook-managed")
        // Not installed at start: skipped with a warning, not an error, and
        // injected once it is.
        .mutating_configuration("webhook-managed-late");

    // Bad input: without a client (no manager) the server refuses to bind.
    let error = WebhookServer::new(webhooks.clone())
        .managed_certificate(managed.clone())
        .bind()
        .await
        .unwrap_err();
    assert!(error.to_string().contains("no client"), "{error}");

    let replica = |dir: &std::path::Path| {
        Manager::builder().client(admin.clone()).webhook_server(
            WebhookServer::new(webhooks.clone())
                .bind_address("127.0.0.1:0")
                .cert_dir(dir)
                .managed_certificate(managed.clone()),
        )
    };
    let first_dir = tempfile::tempdir().unwrap();
    let first = replica(first_dir.path()).build().await.unwrap();

    let secrets: Api<Secret> = Api::namespaced(admin.clone(), ns);
    let secret = secrets.get("gadget-webhook-cert").await.unwrap();
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let data = secret.data.unwrap();
    let part = |k: &str| String::from_utf8(data[k].0.clone()).unwrap();
    let ca = part("ca.crt");
    assert_eq!(
        std::fs::read_to_string(first_dir.path().join("tls.crt")).unwrap(),
        part("tls.crt")
    );
    // The apiserver trusts it through the injected caBundle...
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(admin.clone());
    let config = configs.get("webhook-managed").await.unwrap();
    let client_config = &config.webhooks.unwrap()[0].client_config;
    assert_eq!(client_config.ca_bundle.as_ref().unwrap().0, ca.as_bytes());
    assert_eq!(
        client_config.service.as_ref().unwrap().name,
        "gadget-webhook"
    );
    // ... and the server presents a certificate for the Service's name.
    let stop = CancellationToken::new();
    let addr = first.webhook_address().unwrap();
    let running = tokio::spawn(first.run_until(stop.clone().cancelled_owned()));
    let served = served_certificate_for(addr, &ca, "gadget-webhook.webhook-managed.svc")
        .await
        .unwrap();
    assert_eq!(served, der(&part("tls.crt")));
    // A configuration applied after the start gets the CA while it runs.
    let late = Webhooks::new()
        .defaulting_with::<Gadget, _>(GadgetDefaults, WebhookOptions::new().namespaces([ns]));
    plane
        .install_webhooks("webhook-managed-late", &late, &service)
        .await
        .unwrap();
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(admin.clone());
    eventually("the late configuration's caBundle", WITHIN, || async {
        mutating
            .get("webhook-managed-late")
            .await
            .ok()
            .and_then(|c| c.webhooks)
            .and_then(|w| w[0].client_config.ca_bundle.clone())
            .is_some_and(|b| b.0 == ca.as_bytes())
            .then_some(())
    })
    .await;
    stop.cancel();
    running.await.unwrap().unwrap();

    // A second replica uses the same certificate.
    let second_dir = tempfile::tempdir().unwrap();
    replica(second_dir.path()).build().await.unwrap();
    assert_eq!(
        std::fs::read_to_string(second_dir.path().join("tls.crt")).unwrap(),
        part("tls.crt")
    );

    // A Secret issued for other hosts is replaced, and the new CA injected.
    let mut stale = secrets.get("gadget-webhook-cert").await.unwrap();
    stale
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(HOSTS_ANNOTATION.to_owned(), "old.example.svc".to_owned());
    secrets
        .replace("gadget-webhook-cert", &PostParams::default(), &stale)
        .await
        .unwrap();
    let third_dir = tempfile::tempdir().unwrap();
    replica(third_dir.path()).build().await.unwrap();
    let renewed = secrets.get("gadget-webhook-cert").await.unwrap();
    let renewed_ca = String::from_utf8(renewed.data.unwrap()["ca.crt"].0.clone()).unwrap();
    assert_ne!(renewed_ca, ca);
    let config = configs.get("webhook-managed").await.unwrap();
    assert_eq!(
        config.webhooks.unwrap()[0]
            .client_config
            .ca_bundle
            .as_ref()
            .unwrap()
            .0,
        renewed_ca.as_bytes()
    );
    plane.uninstall_webhooks("webhook-managed").await.unwrap();
    plane
        .uninstall_webhooks("webhook-managed-late")
        .await
        .unwrap();
}

#[tokio::test]
async fn a_missing_certificate_fails_the_manager_build_with_the_path() {
    init_tracing();
    let plane = ControlPlane::shared().await.unwrap();
    let error = Manager::builder()
        .client(plane.client().unwrap())
        .webhook_server(
            WebhookServer::new(Webhooks::new())
                .bind_address("127.0.0.1:0")
                .cert_dir("/nonexistent/opkit-certs"),
        )
        .build()
        .await
        .unwrap_err();
    let text = error.to_string();
    assert!(text.contains("/nonexistent/opkit-certs/tls.crt"), "{text}");
}
