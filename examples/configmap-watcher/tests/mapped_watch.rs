//! A ConfigMap change re-reconciles the Websites that reference it (and
//! only those), against a real kube-apiserver.

use std::collections::BTreeMap;
use std::time::Duration;

use configmap_watcher::{CONFIG_FOUND, Website, WebsiteReconciler, WebsiteSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{CustomResourceExt, ResourceExt as _};
use opkit::ControllerWiring;
use opkit::conditions;
use opkit::manager::Manager;
use opkit_envtest::{ControlPlane, eventually};
use serde_json::json;

/// How long the operator may take to react.
const WAIT: Duration = Duration::from_secs(30);

fn website(name: &str, config_map: &str) -> Website {
    Website::new(
        name,
        WebsiteSpec {
            config_map: config_map.to_owned(),
        },
    )
}

#[tokio::test]
async fn a_configmap_change_reconciles_the_websites_that_reference_it() {
    let plane = ControlPlane::start().await.expect("control plane");
    plane.install_crds(&[Website::crd()]).await.expect("CRD");
    let client = plane.client().expect("client");
    let mut ns = Namespace::default();
    ns.metadata.name = Some("web".into());
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace");

    let mut manager = Manager::builder()
        .client(client.clone())
        .build()
        .await
        .expect("manager");
    WebsiteReconciler
        .add_to(&mut manager)
        .expect("add the controller");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(manager.run_until(async move {
        let _ = stopped.await;
    }));

    let sites: Api<Website> = Api::namespaced(client.clone(), "web");
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "web");
    for (name, config) in [("blog", "theme"), ("shop", "theme"), ("wiki", "other")] {
        sites
            .create(&PostParams::default(), &website(name, config))
            .await
            .expect("website");
    }
    // No ConfigMap yet: reported as not found.
    eventually("ConfigFound=False", WAIT, || async {
        let status = sites.get("blog").await.ok()?.status?;
        let c = conditions::find(&status.conditions, CONFIG_FOUND)?;
        (c.status == "False").then_some(())
    })
    .await;

    let theme = ConfigMap {
        metadata: ObjectMeta {
            name: Some("theme".into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("colour".to_owned(), "blue".to_owned())])),
        ..ConfigMap::default()
    };
    let created = maps
        .create(&PostParams::default(), &theme)
        .await
        .expect("configmap");
    for site in ["blog", "shop"] {
        eventually("the Websites to see the new ConfigMap", WAIT, || async {
            let status = sites.get(site).await.ok()?.status?;
            (status.config_version == created.resource_version()
                && conditions::is_true(&status.conditions, CONFIG_FOUND))
            .then_some(())
        })
        .await;
    }

    let changed = maps
        .patch(
            "theme",
            &PatchParams::default(),
            &Patch::Merge(json!({ "data": { "font": "serif" } })),
        )
        .await
        .expect("change the ConfigMap");
    for site in ["blog", "shop"] {
        eventually("the Websites to see the change", WAIT, || async {
            let status = sites.get(site).await.ok()?.status?;
            (status.config_version == changed.resource_version()
                && status.config_keys == ["colour", "font"])
            .then_some(())
        })
        .await;
    }
    // The site that references another ConfigMap was not touched.
    let wiki = sites.get("wiki").await.expect("wiki");
    let wiki_status = wiki.status.expect("status");
    assert_eq!(wiki_status.config_version, None);

    maps.delete("theme", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("ConfigFound=False after the delete", WAIT, || async {
        let status = sites.get("shop").await.ok()?.status?;
        (!conditions::is_true(&status.conditions, CONFIG_FOUND) && status.config_version.is_none())
            .then_some(())
    })
    .await;

    let _ = stop.send(());
    running.await.expect("manager task").expect("clean stop");
}
