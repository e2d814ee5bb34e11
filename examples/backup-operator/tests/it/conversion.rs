//! Backup's conversion between `v1` (the hub, stored) and `v2` by a real
//! kube-apiserver calling the webhook server on loopback.

use std::time::Duration;

use backup_operator::api::backup::{Backup, BackupSpec};
use backup_operator::api::backup_v2 as v2;
use kube::api::{Api, PostParams};
use opkit::manager::Manager;
use opkit::webhook::{DevCertificate, WebhookClient, WebhookServer};
use opkit_envtest::eventually;

use crate::support::control_plane;

const WAIT: Duration = Duration::from_secs(30);
const NAMESPACE: &str = "backup-conversion-test";

#[tokio::test]
async fn backup_is_converted_between_v2_and_v1() {
    let (plane, client) = control_plane(NAMESPACE).await;
    let dir_name = format!("backup-operator-conversion-{}", std::process::id());
    let certs = std::env::temp_dir().join(dir_name);
    let dev = DevCertificate::generate(&["127.0.0.1"]).expect("a development certificate");
    dev.write_to(&certs).expect("write it");
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
    // The CRDs with their conversion stanza pointing at the server.
    let webhook = WebhookClient::url(url).ca_bundle(dev.ca_pem());
    let crds: Vec<_> = backup_operator::crds()
        .into_iter()
        .map(|crd| webhooks.crd_with_conversion(crd, &webhook))
        .collect();
    plane.install_crds(&crds).await.expect("install the CRDs");

    // ANCHOR: conversion
    let v1_api: Api<Backup> = Api::namespaced(client.clone(), NAMESPACE);
    let v2_api: Api<v2::Backup> = Api::namespaced(client, NAMESPACE);
    // Written as v2: stored as v1 (converted to the hub).
    let written = v2::Backup::new(
        "from-v2",
        v2::BackupSpec {
            source: "orders-db".into(),
            image: None,
            interval_minutes: Some(30),
            suspend: None,
            history: Some(v2::History {
                successful: Some(5),
                failed: Some(2),
            }),
        },
    );
    eventually("the create as v2 to succeed", WAIT, || async {
        match v2_api.create(&PostParams::default(), &written).await {
            Ok(_) => Some(()),
            // A new CRD version takes a moment to be served.
            Err(e) => {
                eprintln!("retrying the create: {e}");
                None
            }
        }
    })
    .await;
    let read = v1_api.get("from-v2").await.expect("read as v1");
    assert_eq!(read.spec.successful_jobs_history_limit, Some(5));
    assert_eq!(read.spec.failed_jobs_history_limit, Some(2));
    assert_eq!(read.spec.interval_minutes, Some(30));

    // Written as v1, read as v2 (converted from the hub).
    let spec = BackupSpec {
        source: "users-db".into(),
        image: None,
        interval_minutes: None,
        suspend: Some(true),
        successful_jobs_history_limit: Some(4),
        failed_jobs_history_limit: None,
    };
    v1_api
        .create(&PostParams::default(), &Backup::new("from-v1", spec))
        .await
        .expect("create as v1");
    let read = v2_api.get("from-v1").await.expect("read as v2");
    let history = read.spec.history.expect("the history limits");
    assert_eq!((history.successful, history.failed), (Some(4), None));
    assert_eq!(read.spec.suspend, Some(true));
    // ANCHOR_END: conversion

    let _ = stop.send(());
    running
        .await
        .expect("manager task")
        .expect("manager stops cleanly");
    let _ = std::fs::remove_dir_all(certs);
}
