//! Watches that cross the fleet, on real control planes: a hub-side
//! "placement" (a ConfigMap on the hub listing member clusters) mapped by
//! a multicluster controller to a copy in each member it names, a member
//! engaged after the placement was made getting its copy too, a member
//! dropped from the list losing its copy; and a hub controller whose
//! member-side watch maps each member's copy back to the placement, also
//! when the member leaves.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use opkit::cache::Store;
use opkit::controller::Controller;
use opkit::manager::Manager;
use opkit::multicluster::{ClusterName, ClusterRequest, ClusterSet};
use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
use opkit::{Controller, ControllerWiring};
use opkit_tests::{create_namespace, eventually, init_tracing, plane_with_namespace};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{WAIT, members, names};

/// The hub namespace of the placements; the members' namespace of the copies.
const NS: &str = "mc-hub-watches";

/// The members a placement lists (its `clusters` key, comma-separated).
fn listed(placement: &ConfigMap) -> Vec<String> {
    placement
        .data
        .as_ref()
        .and_then(|d| d.get("clusters"))
        .map(|clusters| {
            clusters
                .split(',')
                .map(|c| c.trim().to_owned())
                .filter(|c| !c.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// The copy of placement `name` in a member.
fn copy_name(placement: &str) -> String {
    format!("{placement}-copy")
}

/// Each placement of the hub, as a request for its copy in every member it
/// lists.
fn to_members(placement: &ConfigMap) -> Vec<ClusterRequest> {
    if placement.metadata.namespace.as_deref() != Some(NS) {
        return Vec::new();
    }
    let name = placement.metadata.name.clone().unwrap_or_default();
    listed(placement)
        .into_iter()
        .map(|cluster| ClusterRequest::new(cluster, Request::namespaced(NS, copy_name(&name))))
        .collect()
}

/// In each member: makes the copy of every hub placement that lists the
/// member, and deletes the copy of one that does not (any more). Reads
/// the placements from the hub's cache. Declared with the derive (the hub
/// controller below with the builder): `watches_hub` wires the same.
#[derive(Controller)]
#[controller(for = ConfigMap, name = "placer", multicluster, watches_hub(ConfigMap, map = to_members))]
struct Placer {
    placements: Store<ConfigMap>,
}

impl Reconcile for Placer {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        req: Request,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        let Some(placement) = req.name.strip_suffix("-copy") else {
            return Ok(Action::done());
        };
        if req.namespace.as_deref() != Some(NS) {
            return Ok(Action::done());
        }
        let cluster = ctx.cluster().expect("a member's reconcile").to_string();
        let api = ctx.api::<ConfigMap>(Some(NS));
        let wanted = self
            .placements
            .get(Some(NS), placement)
            .filter(|p| listed(p).contains(&cluster));
        match wanted {
            Some(p) => {
                let copy = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(req.name.clone()),
                        namespace: Some(NS.to_owned()),
                        labels: Some(BTreeMap::from([(
                            "placement".to_owned(),
                            placement.to_owned(),
                        )])),
                        ..ObjectMeta::default()
                    },
                    data: p.data.clone(),
                    ..ConfigMap::default()
                };
                api.patch(
                    &req.name,
                    &PatchParams::apply("placer").force(),
                    &Patch::Apply(&copy),
                )
                .await?;
            }
            None => {
                if ctx.object().await?.is_some() {
                    api.delete(&req.name, &DeleteParams::default()).await?;
                }
            }
        }
        Ok(Action::done())
    }
}

/// On the hub: what the member-side watch mapped (member, copy), and
/// when each placement was reconciled.
#[derive(Default)]
struct Seen {
    mapped: Mutex<Vec<(String, String)>>,
    reconciled: Mutex<Vec<(String, Instant)>>,
}

impl Seen {
    fn mapped(&self, cluster: &str, copy: &str) -> bool {
        self.mapped
            .lock()
            .unwrap()
            .iter()
            .any(|(c, n)| c == cluster && n == copy)
    }

    fn reconciled_since(&self, name: &str, since: Instant) -> bool {
        self.reconciled
            .lock()
            .unwrap()
            .iter()
            .any(|(n, at)| n == name && *at >= since)
    }
}

/// The hub controller of the placements: records its reconciles.
struct PlacementStatus {
    seen: Arc<Seen>,
}

impl Reconcile for PlacementStatus {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        req: Request,
        _: &Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        if req.namespace.as_deref() == Some(NS) {
            self.seen
                .reconciled
                .lock()
                .unwrap()
                .push((req.name.clone(), Instant::now()));
        }
        Ok(Action::done())
    }
}

async fn place(hub: &kube::Client, name: &str, clusters: &str) {
    let placement = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(NS.to_owned()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            "clusters".to_owned(),
            clusters.to_owned(),
        )])),
        ..ConfigMap::default()
    };
    Api::<ConfigMap>::namespaced(hub.clone(), NS)
        .patch(
            name,
            &PatchParams::apply("test").force(),
            &Patch::Apply(&placement),
        )
        .await
        .unwrap_or_else(|e| panic!("placing {name}: {e}"));
}

async fn copy_exists(member: &kube::Client, placement: &str) -> bool {
    Api::<ConfigMap>::namespaced(member.clone(), NS)
        .get_opt(&copy_name(placement))
        .await
        .unwrap()
        .is_some()
}

async fn wait_copy(member: &kube::Client, cluster: &str, placement: &str, exists: bool) {
    eventually(
        &format!(
            "{cluster}: the copy of {placement} to {}",
            if exists { "exist" } else { "be gone" }
        ),
        WAIT,
        || async { (copy_exists(member, placement).await == exists).then_some(()) },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hub_objects_reach_the_members_they_name_and_member_objects_map_back() {
    init_tracing();
    let (_hub_plane, hub) = plane_with_namespace(NS).await;
    let planes = members().await;
    let (m1, m2) = (planes[0].client().unwrap(), planes[1].client().unwrap());
    for member in [&m1, &m2] {
        create_namespace(member, NS).await;
    }
    let mut manager = Manager::builder()
        .client(hub.clone())
        .graceful_shutdown_timeout(std::time::Duration::from_secs(5))
        .build()
        .await
        .unwrap();
    let (clusters, handle) = ClusterSet::new();
    manager.set_cluster_provider(clusters);
    let placements = manager.cache().store::<ConfigMap>().unwrap();
    manager.add(Placer { placements }.controller()).unwrap();
    let seen = Arc::new(Seen::default());
    let mapping = Arc::clone(&seen);
    manager
        .add(
            Controller::new(PlacementStatus {
                seen: Arc::clone(&seen),
            })
            .name("placement-status")
            .watches_members(move |cluster: &ClusterName, copy: &ConfigMap| {
                let placement = copy
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("placement"));
                match (placement, copy.metadata.namespace.as_deref()) {
                    (Some(placement), Some(NS)) => {
                        mapping.mapped.lock().unwrap().push((
                            cluster.to_string(),
                            copy.metadata.name.clone().unwrap_or_default(),
                        ));
                        vec![Request::namespaced(NS, placement)]
                    }
                    _ => Vec::new(),
                }
            }),
        )
        .unwrap();
    let engaged = manager.engaged_clusters();
    let stop = CancellationToken::new();
    let running = tokio::spawn(manager.run_until(stop.clone().cancelled_owned()));

    // A placement naming m1 and m2 while only m1 is engaged: m1 gets its
    // copy; m2, engaged later, gets its own from the replay.
    handle.add("m1", m1.clone()).await.unwrap();
    place(&hub, "web", "m1, m2").await;
    wait_copy(&m1, "m1", "web", true).await;
    assert!(!copy_exists(&m2, "web").await, "m2 is not engaged yet");
    handle.add("m2", m2.clone()).await.unwrap();
    assert_eq!(names(&engaged.borrow()), ["m1", "m2"]);
    wait_copy(&m2, "m2", "web", true).await;

    // Both copies were mapped back to the placement by the hub controller's
    // member-side watch, naming the member each lives in.
    eventually("both copies mapped back", WAIT, || async {
        (seen.mapped("m1", "web-copy") && seen.mapped("m2", "web-copy")).then_some(())
    })
    .await;
    // A change to a member's copy reconciles the placement on the hub.
    let changed = Instant::now();
    Api::<ConfigMap>::namespaced(m2.clone(), NS)
        .patch(
            "web-copy",
            &PatchParams::apply("someone-else"),
            &Patch::Apply(&serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "web-copy", "namespace": NS},
                "data": {"touched": "yes"},
            })),
        )
        .await
        .unwrap();
    eventually(
        "the placement reconciled after m2's copy changed",
        WAIT,
        || async { seen.reconciled_since("web", changed).then_some(()) },
    )
    .await;

    // The placement drops m1: the update maps the old list too, so m1's
    // copy goes and m2's stays.
    place(&hub, "web", "m2").await;
    wait_copy(&m1, "m1", "web", false).await;
    assert!(copy_exists(&m2, "web").await);

    // m2 leaves: its copy is mapped back once more, so the placement is
    // reconciled and can see m2 gone; the hub's requests for m2 are dropped
    // (no reconcile runs for it), and the others keep converging.
    let left = Instant::now();
    assert!(handle.remove("m2").await.unwrap());
    eventually("the placement reconciled after m2 left", WAIT, || async {
        seen.reconciled_since("web", left).then_some(())
    })
    .await;
    place(&hub, "web", "m1, m2").await;
    wait_copy(&m1, "m1", "web", true).await;
    Api::<ConfigMap>::namespaced(hub.clone(), NS)
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some("late".to_owned()),
                    ..ObjectMeta::default()
                },
                data: Some(BTreeMap::from([("clusters".to_owned(), "m2".to_owned())])),
                ..ConfigMap::default()
            },
        )
        .await
        .unwrap();
    // m2 back: its copies of both placements come from the replay.
    handle.add("m2", m2.clone()).await.unwrap();
    wait_copy(&m2, "m2", "late", true).await;
    wait_copy(&m2, "m2", "web", true).await;

    stop.cancel();
    running.await.unwrap().unwrap();
}
