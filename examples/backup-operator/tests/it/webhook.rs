//! The Backup webhooks called by a real kube-apiserver: the webhook
//! server runs on loopback with a development certificate, and envtest
//! points the webhook configurations at it. The first object is the
//! sample (`samples/backup.yaml`): it stays a valid Backup as the spec
//! changes.

use std::time::Duration;

use backup_operator::api::backup::Backup;
use backup_operator::controllers::backup::DEFAULT_IMAGE;
use kube::api::{Api, Patch, PatchParams, PostParams};
use opkit::manager::Manager;
use opkit::webhook::{DevCertificate, WebhookClient, WebhookServer};
use opkit_envtest::eventually;
use serde_json::json;

use crate::support::control_plane;

/// How long the apiserver may take to call the webhook.
const WAIT: Duration = Duration::from_secs(30);
const NAMESPACE: &str = "backup-webhook-test";

/// The sample Backup, named `name`, without a namespace (the test's
/// `Api` sets it).
fn sample(name: &str) -> Backup {
    let documents = opkit::manifest::parse(include_str!("../../samples/backup.yaml"))
        .expect("samples/backup.yaml is YAML");
    let document = documents
        .into_iter()
        .next()
        .expect("samples/backup.yaml holds an object");
    let mut object: Backup = serde_json::to_value(document)
        .and_then(serde_json::from_value)
        .expect("samples/backup.yaml is a Backup: update it to the spec");
    object.metadata.name = Some(name.to_owned());
    object.metadata.namespace = None;
    object
}

/// The message of the apiserver's refusal of `result`.
fn refusal<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> String {
    match result {
        Err(kube::Error::Api(status)) => status.message,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn the_apiserver_calls_the_backup_webhooks() {
    let (plane, client) = control_plane(NAMESPACE).await;
    plane
        .install_crds(&backup_operator::crds())
        .await
        .expect("install the CRDs");

    let certs =
        std::env::temp_dir().join(format!("backup-operator-webhook-{}", std::process::id()));
    let dev = DevCertificate::generate(&["127.0.0.1"]).expect("a development certificate");
    dev.write_to(&certs).expect("write it");
    // The manager serves the webhooks, as in the operator's binary.
    let webhooks = backup_operator::webhooks::webhooks();
    let manager = Manager::builder()
        .client(client.clone())
        .webhook_server(
            WebhookServer::new(webhooks.clone())
                .bind_address("127.0.0.1:0")
                .cert_dir(&certs),
        )
        .build()
        .await
        .expect("manager");
    let url = format!("https://{}", manager.webhook_address().expect("bound"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(manager.run_until(async move {
        let _ = stopped.await;
    }));
    let api: Api<Backup> = Api::namespaced(client, NAMESPACE);
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    plane
        .install_webhooks(
            "backup-operator",
            &webhooks,
            &WebhookClient::url(url).ca_bundle(dev.ca_pem()),
        )
        .await
        .expect("install the webhook configurations");
    eventually("the webhooks to default the sample", WAIT, || async {
        let probe = api.create(&dry_run, &sample("probe")).await.ok()?;
        probe.spec.image.is_some().then_some(())
    })
    .await;

    // ANCHOR: defaults
    // Defaulted: the image and both history limits.
    let created = api
        .create(&PostParams::default(), &sample("sample"))
        .await
        .expect("create the sample through the webhooks");
    assert_eq!(created.spec.image.as_deref(), Some(DEFAULT_IMAGE));
    assert_eq!(created.spec.successful_jobs_history_limit, Some(3));
    assert_eq!(created.spec.failed_jobs_history_limit, Some(1));
    // ANCHOR_END: defaults

    // ANCHOR: denials
    // Refused: a name too long for its Jobs', a blank source, a new source.
    let long = sample(&"b".repeat(53));
    let message = refusal(api.create(&PostParams::default(), &long).await);
    assert!(message.contains("longer than 52 characters"), "{message}");
    let mut blank = sample("blank");
    blank.spec.source = "  ".into();
    let message = refusal(api.create(&PostParams::default(), &blank).await);
    assert!(
        message.contains("spec.source must not be blank"),
        "{message}"
    );
    let moved = json!({"spec": {"source": "another-db"}});
    let message = refusal(
        api.patch("sample", &PatchParams::default(), &Patch::Merge(moved))
            .await,
    );
    assert!(message.contains("spec.source cannot change"), "{message}");
    // ANCHOR_END: denials

    let _ = stop.send(());
    running
        .await
        .expect("manager task")
        .expect("manager stops cleanly");
    let _ = std::fs::remove_dir_all(certs);
}
