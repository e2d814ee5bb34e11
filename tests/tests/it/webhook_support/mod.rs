//! The webhook fixture shared by the webhook tests and the admission
//! latency benchmark: a `Gadget` custom resource, its validating and
//! defaulting webhooks, a webhook server on loopback, and waits for the
//! apiserver to call them.

use std::net::SocketAddr;
use std::time::Duration;

use kube::api::{Api, PostParams};
use kube::{CustomResource, CustomResourceExt, ResourceExt};
use opkit::webhook::{
    AdmissionRequest, BoundWebhookServer, Defaulter, Denied, DevCertificate, Validator, Verdict,
    WebhookClient, WebhookError, WebhookServer, Webhooks,
};
use opkit_envtest::ControlPlane;
use opkit_tests::{eventually, init_tracing};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Long enough for a real apiserver on a loaded 2-core machine.
pub const WITHIN: Duration = Duration::from_secs(20);

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[kube(
    group = "admission.opkit.test",
    version = "v1",
    kind = "Gadget",
    namespaced
)]
/// A Gadget: a size and a color, both optional.
pub struct GadgetSpec {
    /// At most 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<i32>,
    /// Defaults to blue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
}

pub fn gadget(name: &str, size: Option<i32>, color: Option<&str>) -> Gadget {
    let mut g = Gadget::new(
        name,
        GadgetSpec {
            size,
            color: color.map(str::to_owned),
        },
    );
    if name.starts_with("protected") {
        g.metadata.labels = Some([("protected".to_owned(), "true".to_owned())].into());
    }
    g
}

/// Sizes above 10 are refused, above 5 warned about; `protected` objects
/// cannot be deleted (409 Conflict, with a warning); objects named `slow-*` are answered only once the
/// gate opens.
#[derive(Clone, Default)]
pub struct GadgetRules {
    pub gate: CancellationToken,
}

impl Validator<Gadget> for GadgetRules {
    async fn validate_create(&self, g: &Gadget, _: &AdmissionRequest) -> Verdict {
        if g.metadata
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with("slow-"))
        {
            self.gate.cancelled().await;
        }
        match g.spec.size {
            Some(size) if size > 10 => Err(Denied::invalid(format!(
                "spec.size {size} is above the limit of 10"
            ))),
            Some(size) if size > 5 => Ok(vec![format!("spec.size {size} is costly")]),
            _ => Ok(vec![]),
        }
    }

    async fn validate_update(&self, old: &Gadget, new: &Gadget, req: &AdmissionRequest) -> Verdict {
        if old.spec.color.is_some() && new.spec.color != old.spec.color {
            return Err(Denied::new("spec.color cannot change once set"));
        }
        self.validate_create(new, req).await
    }

    async fn validate_delete(&self, g: &Gadget, _: &AdmissionRequest) -> Verdict {
        if g.labels().contains_key("protected") {
            return Err(Denied::new(format!(
                "{} is protected",
                g.metadata.name.as_deref().unwrap_or_default()
            ))
            .with_code(409, "Conflict")
            .with_warning("remove the protected label first"));
        }
        Ok(vec![])
    }
}

/// Colors default to blue, and the object is labelled.
pub struct GadgetDefaults;

impl Defaulter<Gadget> for GadgetDefaults {
    async fn default(&self, g: &mut Gadget, _: &AdmissionRequest) -> Verdict {
        g.labels_mut()
            .insert("defaulted-by".to_owned(), "opkit".to_owned());
        if g.spec.color.is_none() {
            g.spec.color = Some("blue".to_owned());
            return Ok(vec!["spec.color defaulted to blue".to_owned()]);
        }
        Ok(vec![])
    }
}

/// A webhook server running on loopback with a fresh development
/// certificate.
pub struct Served {
    pub addr: SocketAddr,
    pub dev: DevCertificate,
    pub stop: CancellationToken,
    pub task: JoinHandle<Result<(), WebhookError>>,
    pub loads: tokio::sync::watch::Receiver<u64>,
    pub dir: tempfile::TempDir,
}

impl Served {
    pub async fn start(webhooks: &Webhooks) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let dev = DevCertificate::generate(&["127.0.0.1"]).unwrap();
        let (cert, key) = dev.write_to(dir.path()).unwrap();
        let server = WebhookServer::new(webhooks.clone())
            .bind_address("127.0.0.1:0")
            .cert_files(cert, key)
            .reload_interval(Duration::from_millis(50))
            .bind()
            .await
            .unwrap();
        Self::spawn(server, dev, dir)
    }

    pub fn spawn(server: BoundWebhookServer, dev: DevCertificate, dir: tempfile::TempDir) -> Self {
        let addr = server.local_addr().unwrap();
        let loads = server.certificate_loads();
        let stop = CancellationToken::new();
        let task = tokio::spawn(server.serve(stop.clone()));
        Self {
            addr,
            dev,
            stop,
            task,
            loads,
            dir,
        }
    }

    pub fn client(&self) -> WebhookClient {
        WebhookClient::url(format!("https://{}", self.addr)).ca_bundle(self.dev.ca_pem())
    }

    pub async fn stop(self) {
        self.stop.cancel();
        tokio::time::timeout(WITHIN, self.task)
            .await
            .expect("the webhook server stops")
            .unwrap()
            .unwrap();
    }
}

pub async fn plane_with_gadgets() -> &'static ControlPlane {
    init_tracing();
    let plane = ControlPlane::shared().await.unwrap();
    plane.install_crds(&[Gadget::crd()]).await.unwrap();
    plane
}

pub fn api_error(result: Result<impl std::fmt::Debug, kube::Error>) -> kube::core::Status {
    match result {
        Err(kube::Error::Api(status)) => *status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Waits until the apiserver calls the validating webhook in `ns` (a
/// dry-run create of an oversized Gadget is refused by it).
pub async fn until_validating(gadgets: &Api<Gadget>) {
    let probe = gadget("probe", Some(99), Some("red"));
    eventually("the validating webhook to be in effect", WITHIN, || async {
        matches!(
            gadgets.create(&PostParams { dry_run: true, ..PostParams::default() }, &probe).await,
            Err(kube::Error::Api(status)) if status.message.contains("above the limit")
        )
        .then_some(())
    })
    .await;
}

/// Waits until the apiserver calls the mutating webhook in `ns`.
pub async fn until_mutating(gadgets: &Api<Gadget>) {
    let probe = gadget("probe", None, None);
    eventually("the mutating webhook to be in effect", WITHIN, || async {
        gadgets
            .create(
                &PostParams {
                    dry_run: true,
                    ..PostParams::default()
                },
                &probe,
            )
            .await
            .is_ok_and(|g| g.spec.color.as_deref() == Some("blue"))
            .then_some(())
    })
    .await;
}
