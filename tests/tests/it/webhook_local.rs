//! `make run`'s webhooks (issue 38): a manager outside the cluster serves
//! them itself, registered by URL with an apiserver on this machine while
//! it runs (`WebhookServer::local`), and takes the registration away when
//! it stops.

use std::net::SocketAddr;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::{CustomResource, CustomResourceExt};
use opkit::manager::Manager;
use opkit::webhook::{
    Conversion, ConversionError, Hub, LocalWebhooks, Spoke, WebhookClient, WebhookOptions,
    WebhookServer, Webhooks,
};
use opkit_tests::{create_namespace, eventually};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::webhook_support::*;

/// A kind in two versions, converted by the local server: v1 counts in
/// `count`, v2 (the hub, stored) in `dozens` and `units`.
mod v1 {
    use super::*;

    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
    #[kube(group = "local.opkit.test", version = "v1", kind = "Crate", namespaced)]
    /// A Crate in v1.
    pub struct CrateSpec {
        /// How many bottles.
        pub count: u32,
    }
}

mod v2 {
    use super::*;

    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
    #[kube(group = "local.opkit.test", version = "v2", kind = "Crate", namespaced)]
    /// A Crate in v2.
    pub struct CrateSpec {
        /// Whole dozens.
        pub dozens: u32,
        /// And the rest.
        pub units: u32,
    }
}

impl Hub for v2::Crate {}

impl Spoke<v2::Crate> for v1::Crate {
    fn to_hub(self) -> Result<v2::Crate, ConversionError> {
        Ok(v2::Crate {
            metadata: self.metadata,
            spec: v2::CrateSpec {
                dozens: self.spec.count / 12,
                units: self.spec.count % 12,
            },
        })
    }

    fn from_hub(hub: v2::Crate) -> Result<Self, ConversionError> {
        Ok(v1::Crate {
            metadata: hub.metadata,
            spec: v1::CrateSpec {
                count: hub.spec.dozens * 12 + hub.spec.units,
            },
        })
    }
}

const CRD: &str = "crates.local.opkit.test";

#[tokio::test]
async fn local_webhooks_are_registered_while_the_manager_runs_and_removed_at_its_stop() {
    let plane = plane_with_gadgets().await;
    let admin = plane.client().unwrap();
    let ns = "webhook-local";
    create_namespace(&admin, ns).await;
    let webhooks = Webhooks::new()
        .validating_with::<Gadget, _>(
            GadgetRules::default(),
            WebhookOptions::new().namespaces([ns]),
        )
        .conversion(Conversion::<v2::Crate>::new().spoke::<v1::Crate>());
    // Installed as `make install` installs it: the conversion through the
    // operator's Service, which does not exist outside a deploy.
    let crd = kube::core::crd::merge_crds(vec![v1::Crate::crd(), v2::Crate::crd()], "v2").unwrap();
    let in_cluster = WebhookClient::service("crate-webhook", "crate-system");
    let crd = webhooks.crd_with_conversion(crd, &in_cluster);
    plane.install_crds(&[crd]).await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let installed_conversion =
        serde_json::to_value(crds.get(CRD).await.unwrap().spec.conversion).unwrap();

    let build = || {
        Manager::builder()
            .kubeconfig(plane.kubeconfig_path())
            .health_probe_bind_address("127.0.0.1:0")
            .webhook_server(
                WebhookServer::new(webhooks.clone())
                    .bind_address("127.0.0.1:0")
                    .local(LocalWebhooks::new("webhook-local").crd(CRD)),
            )
            .build()
    };
    let manager = build().await.unwrap();
    let address: SocketAddr = manager.webhook_address().expect("served locally");

    // Registered by URL, trusting the certificate issued for the address.
    let configurations: Api<ValidatingWebhookConfiguration> = Api::all(admin.clone());
    let configuration = configurations.get("webhook-local").await.unwrap();
    let client_config = &configuration.webhooks.unwrap()[0].client_config;
    let url = client_config.url.as_deref().unwrap();
    assert!(
        url.starts_with(&format!("https://{address}/validate-")),
        "{url}"
    );
    assert!(client_config.service.is_none() && client_config.ca_bundle.is_some());

    let stop = CancellationToken::new();
    let running = tokio::spawn(manager.run_until(stop.clone().cancelled_owned()));

    // A denial from the manager's own server reaches the client.
    let gadgets: Api<Gadget> = Api::namespaced(admin.clone(), ns);
    until_validating(&gadgets).await;
    let status = api_error(
        gadgets
            .create(&PostParams::default(), &gadget("big", Some(11), None))
            .await,
    );
    assert!(
        status
            .message
            .contains("spec.size 11 is above the limit of 10"),
        "{}",
        status.message
    );
    gadgets
        .create(&PostParams::default(), &gadget("small", Some(3), None))
        .await
        .unwrap();
    // The CRD converts through the local server.
    let old: Api<v1::Crate> = Api::namespaced(admin.clone(), ns);
    let new: Api<v2::Crate> = Api::namespaced(admin.clone(), ns);
    old.create(
        &PostParams::default(),
        &v1::Crate::new("cider", v1::CrateSpec { count: 30 }),
    )
    .await
    .unwrap();
    let stored = new.get("cider").await.unwrap();
    assert_eq!((stored.spec.dozens, stored.spec.units), (2, 6));

    // Stopped: the configuration is gone, the CRD's conversion is what
    // `make install` installed, and oversized Gadgets are admitted again.
    stop.cancel();
    tokio::time::timeout(WITHIN, running)
        .await
        .expect("the manager stops")
        .unwrap()
        .unwrap();
    assert!(
        configurations
            .get_opt("webhook-local")
            .await
            .unwrap()
            .is_none(),
        "the local configuration outlived the manager"
    );
    let after = crds.get(CRD).await.unwrap();
    assert_eq!(
        serde_json::to_value(&after.spec.conversion).unwrap(),
        installed_conversion
    );
    eventually(
        "an oversized Gadget to be admitted without the webhook",
        WITHIN,
        || async {
            gadgets
                .create(
                    &PostParams {
                        dry_run: true,
                        ..PostParams::default()
                    },
                    &gadget("big", Some(11), None),
                )
                .await
                .ok()
        },
    )
    .await;

    // A second run registers again (a process killed outright left its
    // configuration: the next start replaces it).
    let manager = build().await.unwrap();
    assert!(
        configurations
            .get_opt("webhook-local")
            .await
            .unwrap()
            .is_some()
    );
    let stop = CancellationToken::new();
    let running = tokio::spawn(manager.run_until(stop.clone().cancelled_owned()));
    stop.cancel();
    running.await.unwrap().unwrap();
    assert!(
        configurations
            .get_opt("webhook-local")
            .await
            .unwrap()
            .is_none()
    );
}

/// An apiserver that is not on this machine could not call the server:
/// it is left out, and the manager runs without it.
#[tokio::test]
async fn local_webhooks_for_an_apiserver_elsewhere_are_left_out() {
    assert!(!LocalWebhooks::apiserver_is_on_this_host(
        "https://203.0.113.7:6443"
    ));
    let plane = plane_with_gadgets().await;
    let admin = plane.client().unwrap();
    // A client given as is has no URL the manager can judge: elsewhere.
    let manager = Manager::builder()
        .client(admin)
        .health_probe_bind_address("127.0.0.1:0")
        .webhook_server(
            WebhookServer::new(Webhooks::new().validating::<Gadget, _>(GadgetRules::default()))
                .bind_address("127.0.0.1:0")
                .local(LocalWebhooks::new("webhook-local-elsewhere")),
        )
        .build()
        .await
        .unwrap();
    assert_eq!(manager.webhook_address(), None);
}
