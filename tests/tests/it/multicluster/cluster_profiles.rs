//! The `ClusterProfiles` provider on real control planes: a hub with the
//! Cluster Inventory API's CRD and `ClusterProfile`s written as a cluster
//! manager writes them, members reached through an exec plugin (a shell
//! script printing a ServiceAccount token), each profile engaged once
//! healthy, rotated in place, and disengaged when it no longer names an
//! access provider the operator has or is deleted.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResourceExt;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use opkit::ControllerWiring;
use opkit::manager::Manager;
use opkit::multicluster::{
    ADDITIONAL_ENVS_EXTENSION, AccessCluster, AccessExtension, AccessPlugin, AccessProvider,
    CLUSTER_MANAGER_LABEL, CONTROL_PLANE_HEALTHY, ClusterManager, ClusterProfile,
    ClusterProfileAccess, ClusterProfileSpec, ClusterProfileStatus, ClusterProfiles,
    ProfileEnvsPolicy,
};
use opkit_envtest::ControlPlane;
use opkit_tests::{create_namespace, plane_with_namespace};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Log, cluster_admin_token, copier, create_labelled, members, wait_engaged, wait_seen};

const HUB_NS: &str = "mc-inventory";
const NS: &str = "mc-profiles";
const MANAGER: &str = "opkit-test";
/// The access provider's name, in the profiles and the operator's config.
const ACCESS: &str = "token-file";

/// The exec plugin: prints an ExecCredential whose token is the contents
/// of `$TOKEN_FILE`, which each profile sets through KEP-5339's
/// environment extension.
const PLUGIN: &str = r#"#!/bin/sh
set -eu
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}' "$(cat "$TOKEN_FILE")"
"#;

/// A token of the ServiceAccount `NS/account` of `plane`, bound to
/// `cluster-admin`, written to `dir/<file>`.
async fn token_file(plane: &ControlPlane, account: &str, dir: &Path, file: &str) -> PathBuf {
    let path = dir.join(file);
    std::fs::write(&path, cluster_admin_token(plane, NS, account).await).unwrap();
    path
}

/// The status a cluster manager writes for `plane`: healthy or not, one
/// access provider named `access` whose plugin reads `token`.
fn status(plane: &ControlPlane, healthy: bool, access: &str, token: &Path) -> ClusterProfileStatus {
    // ByteString serializes as base64: the kubeconfig form of the CA.
    let ca = serde_json::to_value(ByteString(plane.ca_pem().as_bytes().to_vec())).unwrap();
    ClusterProfileStatus {
        conditions: vec![Condition {
            type_: CONTROL_PLANE_HEALTHY.to_owned(),
            status: if healthy { "True" } else { "False" }.to_owned(),
            reason: "Probed".to_owned(),
            message: String::new(),
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::now()),
            observed_generation: None,
        }],
        access_providers: vec![AccessProvider {
            name: access.to_owned(),
            cluster: AccessCluster {
                server: Some(plane.server_url().to_owned()),
                certificate_authority_data: ca.as_str().map(str::to_owned),
                extensions: vec![AccessExtension {
                    name: ADDITIONAL_ENVS_EXTENSION.to_owned(),
                    extension: serde_json::json!({ "TOKEN_FILE": token }),
                }],
                ..AccessCluster::default()
            },
        }],
        ..ClusterProfileStatus::default()
    }
}

/// Creates the profile `name` of the cluster manager `manager`, then
/// writes its status.
async fn publish(
    profiles: &Api<ClusterProfile>,
    name: &str,
    manager: &str,
    status: ClusterProfileStatus,
) {
    let mut profile = ClusterProfile::new(
        name,
        ClusterProfileSpec {
            display_name: None,
            cluster_manager: ClusterManager {
                name: manager.to_owned(),
            },
        },
    );
    profile.metadata = ObjectMeta {
        name: Some(name.to_owned()),
        labels: Some(BTreeMap::from([(
            CLUSTER_MANAGER_LABEL.to_owned(),
            manager.to_owned(),
        )])),
        ..ObjectMeta::default()
    };
    profiles
        .create(&PostParams::default(), &profile)
        .await
        .unwrap_or_else(|e| panic!("creating the ClusterProfile {name}: {e}"));
    update_status(profiles, name, status).await;
}

async fn update_status(profiles: &Api<ClusterProfile>, name: &str, status: ClusterProfileStatus) {
    let patch = serde_json::json!({ "status": status });
    profiles
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("writing the status of {name}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_profiles_engage_when_healthy_rotate_and_leave() {
    let (hub_plane, hub) = plane_with_namespace(HUB_NS).await;
    hub_plane
        .install_crds(&[ClusterProfile::crd()])
        .await
        .unwrap();
    let planes = members().await;
    let admins: Vec<kube::Client> = planes.iter().map(|p| p.client().unwrap()).collect();
    for admin in &admins {
        create_namespace(admin, NS).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("token-plugin");
    std::fs::write(&plugin, PLUGIN).unwrap();
    std::fs::set_permissions(&plugin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let access = ClusterProfileAccess::new().plugin(
        AccessPlugin::new(
            ACCESS,
            kube::config::ExecConfig {
                api_version: Some("client.authentication.k8s.io/v1".to_owned()),
                command: Some(plugin.display().to_string()),
                ..kube::config::ExecConfig::default()
            },
        )
        .profile_envs(ProfileEnvsPolicy::AppendIfNotExists),
    );
    let m1_token = token_file(&planes[0], "m1", dir.path(), "m1.token").await;
    let m2_token = token_file(&planes[1], "m2", dir.path(), "m2.token").await;
    let other_token = token_file(&planes[2], "other", dir.path(), "other.token").await;

    let log = Arc::new(Log::default());
    let mut manager = Manager::builder()
        .client(hub.clone())
        .metrics_bind_address("0")
        .health_probe_bind_address("0")
        .graceful_shutdown_timeout(std::time::Duration::from_secs(5))
        .build()
        .await
        .unwrap();
    manager.set_cluster_provider(
        ClusterProfiles::new(hub.clone(), access)
            .namespace(HUB_NS)
            .cluster_manager(MANAGER),
    );
    copier(&log, NS).add_to(&mut manager).unwrap();
    let mut engaged = manager.engaged_clusters();
    let stop = CancellationToken::new();
    let running = tokio::spawn(manager.run_until(stop.clone().cancelled_owned()));

    // m1 healthy, m2 not yet, and a third cluster of another manager.
    let profiles: Api<ClusterProfile> = Api::namespaced(hub.clone(), HUB_NS);
    publish(
        &profiles,
        "m1",
        MANAGER,
        status(&planes[0], true, ACCESS, &m1_token),
    )
    .await;
    publish(
        &profiles,
        "m2",
        MANAGER,
        status(&planes[1], false, ACCESS, &m2_token),
    )
    .await;
    publish(
        &profiles,
        "m3",
        "someone-else",
        status(&planes[2], true, ACCESS, &other_token),
    )
    .await;
    wait_engaged(&mut engaged, &["mc-inventory/m1"]).await;
    for admin in &admins {
        create_labelled(admin, NS, "a").await;
    }
    wait_seen(&admins[0], NS, "a", "mc-inventory/m1").await;

    // m2's control plane turns healthy: engaged, its objects reconciled.
    update_status(&profiles, "m2", status(&planes[1], true, ACCESS, &m2_token)).await;
    wait_engaged(&mut engaged, &["mc-inventory/m1", "mc-inventory/m2"]).await;
    wait_seen(&admins[1], NS, "a", "mc-inventory/m2").await;

    // m2's credentials rotate (the profile's plugin environment names a
    // new token; the server is the same) and the old ServiceAccount goes:
    // swapped in under its cache, nothing of it reconciled again.
    let rotated_token = token_file(&planes[1], "rotated", dir.path(), "m2-rotated.token").await;
    let rotated = Instant::now();
    update_status(
        &profiles,
        "m2",
        status(&planes[1], true, ACCESS, &rotated_token),
    )
    .await;
    Api::<ServiceAccount>::namespaced(admins[1].clone(), NS)
        .delete("m2", &DeleteParams::default())
        .await
        .unwrap();
    create_labelled(&admins[1], NS, "b").await;
    wait_seen(&admins[1], NS, "b", "mc-inventory/m2").await;
    let since = log.started_after("mc-inventory/m2", rotated);
    assert!(
        !since.contains(&"a".to_owned()),
        "the rotation kept m2's cache: \"a\" was not reconciled again ({since:?})"
    );

    // m2's profile is deleted: disengaged, nothing of it reconciled after
    // (m1 converging on the same object shows the others do).
    profiles
        .delete("m2", &DeleteParams::default())
        .await
        .unwrap();
    wait_engaged(&mut engaged, &["mc-inventory/m1"]).await;
    let removed = Instant::now();
    create_labelled(&admins[0], NS, "c").await;
    create_labelled(&admins[1], NS, "c").await;
    wait_seen(&admins[0], NS, "c", "mc-inventory/m1").await;
    assert_eq!(
        log.started_after("mc-inventory/m2", removed),
        Vec::<String>::new()
    );
    assert!(
        !log.started("mc-inventory/m3", "a"),
        "another cluster manager's profile is never engaged"
    );

    // m1 now lists only an access provider the operator lacks: disengaged.
    update_status(&profiles, "m1", status(&planes[0], true, "oidc", &m1_token)).await;
    wait_engaged(&mut engaged, &[]).await;

    stop.cancel();
    running.await.unwrap().unwrap();
}
