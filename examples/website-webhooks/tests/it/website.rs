//! The Website operator against a real apiserver: the manager serves the
//! conversion, defaulting and validating webhooks the apiserver calls, and
//! the controller reads v2 objects stored as v1.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ObjectMeta, PostParams};
use opkit::controller::Controller;
use opkit::manager::Manager;
use opkit::webhook::{DevCertificate, WebhookClient, WebhookServer};
use opkit_envtest::{ControlPlane, eventually};
use tokio_util::sync::CancellationToken;
use website_webhooks::api::{v1, v2};
use website_webhooks::{NAME, WebsiteReconciler, crd, webhooks};

const WITHIN: Duration = Duration::from_secs(30);

fn api_message(result: Result<impl std::fmt::Debug, kube::Error>) -> String {
    match result {
        Err(kube::Error::Api(status)) => status.message,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn websites_are_converted_defaulted_validated_and_reconciled() {
    let plane = ControlPlane::start().await.unwrap();
    let admin = plane.client().unwrap();
    let ns = "websites";
    Api::<Namespace>::all(admin.clone())
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some(ns.to_owned()),
                    ..ObjectMeta::default()
                },
                ..Namespace::default()
            },
        )
        .await
        .unwrap();

    // ANCHOR: envtest
    // The manager binds its webhook server first, so the CRD and the
    // webhook configurations can point at it.
    let certs = tempfile::tempdir().unwrap();
    let dev = DevCertificate::generate(&["127.0.0.1"]).unwrap();
    dev.write_to(certs.path()).unwrap();
    let mut manager = Manager::builder()
        .client(admin.clone())
        .webhook_server(
            WebhookServer::new(webhooks())
                .bind_address("127.0.0.1:0")
                .cert_dir(certs.path()),
        )
        .build()
        .await
        .unwrap();
    let client = WebhookClient::url(format!("https://{}", manager.webhook_address().unwrap()))
        .ca_bundle(dev.ca_pem());
    plane
        .install_crds(&[crd(&webhooks(), &client).unwrap()])
        .await
        .unwrap();
    plane
        .install_webhooks(NAME, &webhooks(), &client)
        .await
        .unwrap();
    manager.add(Controller::new(WebsiteReconciler)).unwrap();
    let stop = CancellationToken::new();
    let running = tokio::spawn(manager.run_until(stop.clone().cancelled_owned()));

    // ANCHOR_END: envtest

    let old: Api<v1::Website> = Api::namespaced(admin.clone(), ns);
    let new: Api<v2::Website> = Api::namespaced(admin.clone(), ns);
    // Wait until the apiserver calls the validating webhook.
    let probe = v2::Website::new(
        "probe",
        v2::WebsiteSpec {
            host: "Not A Host".to_owned(),
            tls: None,
            replicas: None,
        },
    );
    eventually("the validating webhook to be in effect", WITHIN, || async {
        new.create(
            &PostParams {
                dry_run: true,
                ..PostParams::default()
            },
            &probe,
        )
        .await
        .is_err()
        .then_some(())
    })
    .await;

    // A v1 client creates; the webhooks see v2 (matchPolicy Equivalent):
    // defaults are applied and stored.
    let shop = old
        .create(
            &PostParams::default(),
            &v1::Website::new(
                "shop",
                v1::WebsiteSpec {
                    url: "https://shop.example".to_owned(),
                },
            ),
        )
        .await
        .unwrap();
    assert_eq!(shop.spec.url, "https://shop.example");
    let shop_v2 = new.get("shop").await.unwrap();
    assert_eq!(shop_v2.spec.host, "shop.example");
    assert_eq!(shop_v2.spec.tls, Some(true));
    assert_eq!(shop_v2.spec.replicas, Some(1), "defaulted");

    // A v2 field survives storage in v1.
    new.create(
        &PostParams::default(),
        &v2::Website::new(
            "blog",
            v2::WebsiteSpec {
                host: "blog.example".to_owned(),
                tls: Some(false),
                replicas: Some(3),
            },
        ),
    )
    .await
    .unwrap();
    let blog_v1 = old.get("blog").await.unwrap();
    assert_eq!(blog_v1.spec.url, "http://blog.example");
    let blog_v2 = new.get("blog").await.unwrap();
    assert_eq!(blog_v2.spec.replicas, Some(3));
    assert_eq!(blog_v2.spec.tls, Some(false));

    // Refusals carry the webhook's message, in either version.
    let message = api_message(
        new.create(
            &PostParams::default(),
            &v2::Website::new(
                "big",
                v2::WebsiteSpec {
                    host: "big.example".to_owned(),
                    tls: None,
                    replicas: Some(9),
                },
            ),
        )
        .await,
    );
    assert!(
        message.contains("spec.replicas 9 must be between 1 and 5"),
        "{message}"
    );
    let mut moved = old.get("shop").await.unwrap();
    moved.spec.url = "https://elsewhere.example".to_owned();
    let message = api_message(old.replace("shop", &PostParams::default(), &moved).await);
    assert!(message.contains("spec.host cannot change"), "{message}");
    let message = api_message(
        old.create(
            &PostParams::default(),
            &v1::Website::new(
                "ftp",
                v1::WebsiteSpec {
                    url: "ftp://files.example".to_owned(),
                },
            ),
        )
        .await,
    );
    assert!(
        message.contains("must start with https:// or http://"),
        "{message}"
    );

    // The controller reads v2 from its cache (listed through the
    // conversion webhook) and writes each site's ConfigMap.
    let config_maps: Api<ConfigMap> = Api::namespaced(admin, ns);
    for (name, url, replicas) in [
        ("shop-site", "https://shop.example", "1"),
        ("blog-site", "http://blog.example", "3"),
    ] {
        eventually(&format!("ConfigMap {name}"), WITHIN, || async {
            config_maps
                .get_opt(name)
                .await
                .ok()
                .flatten()
                .is_some_and(|cm| {
                    let data = cm.data.unwrap_or_default();
                    data.get("url").map(String::as_str) == Some(url)
                        && data.get("replicas").map(String::as_str) == Some(replicas)
                })
                .then_some(())
        })
        .await;
    }

    stop.cancel();
    tokio::time::timeout(WITHIN, running)
        .await
        .expect("the manager stops")
        .unwrap()
        .unwrap();
}

#[test]
fn manifests_hold_the_crd_conversion_and_both_webhook_configurations() {
    let yaml = website_webhooks::manifests().unwrap();
    for expected in [
        "kind: CustomResourceDefinition",
        "strategy: Webhook",
        "path: /convert",
        "kind: ValidatingWebhookConfiguration",
        "path: /validate-example-opkit-dev-v2-website",
        "kind: MutatingWebhookConfiguration",
        "path: /mutate-example-opkit-dev-v2-website",
        "name: website-webhook-service",
        "failurePolicy: Fail",
        "sideEffects: None",
    ] {
        assert!(
            yaml.contains(expected),
            "{expected:?} missing from:\n{yaml}"
        );
    }
}
