//! `#[derive(Controller)]` with every option at once: it compiles (on a
//! generic reconciler too) and yields the RBAC rules the docs promise. The
//! mistakes are in `macros_ui.rs`.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret, Service};
use opkit::cache::{Projection, Store};
use opkit::predicate::{
    GenerationChanged, LabelSelector, LabelsChanged, PredicateEvent, PredicateExt,
};
use opkit::rbac::Verb;
use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
use opkit::{Controller, ControllerWiring};

fn by_name(cm: &ConfigMap, _primaries: &Store<ConfigMap>) -> Vec<Request> {
    Request::for_object(cm).into_iter().collect()
}

/// Reads a field of the object: predicates see whole objects.
fn ready_changed(e: &PredicateEvent<'_, Deployment>) -> bool {
    match e {
        PredicateEvent::Update { old, new } => {
            let ready = |d: &Deployment| d.status.as_ref().and_then(|s| s.ready_replicas);
            ready(old) != ready(new)
        }
        _ => true,
    }
}

/// A projection of Secrets: how many keys they hold.
struct SecretKeys(usize);

impl Projection<Secret> for SecretKeys {
    fn project(secret: Secret) -> Self {
        SecretKeys(secret.data.map_or(0, |d| d.len()))
    }
}

/// A projection of Pods: running or not.
struct PodRunning(bool);

impl Projection<Pod> for PodRunning {
    fn project(pod: Pod) -> Self {
        PodRunning(pod.status.and_then(|s| s.phase).as_deref() == Some("Running"))
    }
}

#[test]
fn projections_hold_what_they_project() {
    assert_eq!(SecretKeys::project(Secret::default()).0, 0);
    assert!(!PodRunning::project(Pod::default()).0);
}

#[derive(Controller)]
#[controller(
    for(ConfigMap, predicates(LabelsChanged, GenerationChanged.not())),
    owns(Deployment, predicates(ready_changed)),
    owns(Service),
    owns(Pod, metadata, predicates(LabelsChanged)),
    owns(Pod, project = PodRunning),
    owns(Secret, project = SecretKeys, predicates(LabelsChanged))
)]
#[controller(
    watches(Secret, map = |s, _| Request::for_object(s).into_iter().collect()),
    watches(ConfigMap, map = by_name, predicates(LabelsChanged)),
    reads(Node),
    index(ConfigMap, "settings", |cm: &ConfigMap| cm.data.iter().flat_map(|d| d.keys().cloned()).collect()),
    watches(Pod, by_index = "settings", predicates(LabelsChanged)),
    event_filter(GenerationChanged.or(LabelsChanged)),
    event_filter(LabelSelector::new([("team", "a")].into_iter().collect())),
    rbac(create, patch, delete on Deployment, Service),
    rbac(get on "pods/log", "deployments.apps/scale"),
    rbac(list on unchecked("widgets.example.com")),
    status,
    finalizer,
    events,
    name = "every-option",
    max_concurrent_reconciles = 3,
    throttle(per_second = 20, burst = 5),
)]
struct R<T: Send + Sync + 'static> {
    _state: T,
}

impl<T: Send + Sync + 'static> Reconcile for R<T> {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        _req: Request,
        _ctx: &Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        Ok(Action::done())
    }
}

#[test]
fn every_option_compiles_and_yields_the_documented_rules() {
    let rules = R::<u8>::rbac_rules();
    assert!(rules.permits("", "configmaps", Verb::Watch));
    assert!(rules.permits("", "configmaps", Verb::Patch)); // finalizer
    assert!(rules.permits("", "configmaps/status", Verb::Update));
    assert!(rules.permits("", "configmaps/finalizers", Verb::Update));
    assert!(rules.permits("", "secrets", Verb::List));
    assert!(rules.permits("", "pods", Verb::Watch)); // owns(.., metadata), owns(.., project = ..)
    assert!(rules.permits("", "nodes", Verb::List)); // reads
    assert!(!rules.permits("", "nodes", Verb::Patch));
    assert!(!rules.permits("", "secrets", Verb::Create));
    assert!(rules.permits("apps", "deployments", Verb::Delete));
    assert!(rules.permits("", "services", Verb::Create));
    assert!(rules.permits("", "pods/log", Verb::Get));
    assert!(rules.permits("apps", "deployments/scale", Verb::Get));
    assert!(rules.permits("example.com", "widgets", Verb::List));
    assert!(rules.permits("events.k8s.io", "events", Verb::Create));
    assert!(!rules.permits("coordination.k8s.io", "leases", Verb::Get));
}

#[test]
fn the_declared_controller_is_named_as_declared() {
    let controller = R { _state: 0u8 }.controller();
    assert_eq!(controller.controller_name(), "every-option");
}

/// A Secret of the hub, as the request for its namesake in member `east`.
fn to_members(hub: &Secret) -> Vec<opkit::multicluster::ClusterRequest> {
    let name = hub.metadata.name.clone().unwrap_or_default();
    vec![opkit::multicluster::ClusterRequest::new(
        "east",
        Request::namespaced("copies", name),
    )]
}

/// A member's Service mapped back to the hub ConfigMap of its name.
fn to_hub(_cluster: &opkit::multicluster::ClusterName, service: &Service) -> Vec<Request> {
    Request::for_object(service).into_iter().collect()
}

#[derive(Controller)]
#[controller(for = ConfigMap, multicluster, watches_hub(Secret, map = to_members))]
struct InEveryMember;

impl Reconcile for InEveryMember {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        _: Request,
        _: &Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        Ok(Action::done())
    }
}

#[derive(Controller)]
#[controller(for = ConfigMap, name = "on-the-hub", watches_members(Service, map = to_hub))]
struct OnTheHub;

impl Reconcile for OnTheHub {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        _: Request,
        _: &Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        Ok(Action::done())
    }
}

/// `watches_hub(..)` and `watches_members(..)` wire the builder's watches
/// across the fleet and read their kinds (in the hub, and in each member).
#[test]
fn watches_across_the_fleet_are_declared_in_the_derive() {
    let member = InEveryMember::rbac_rules();
    assert!(member.permits("", "secrets", Verb::Watch));
    assert!(!member.permits("", "secrets", Verb::Create));
    let hub = OnTheHub::rbac_rules();
    assert!(hub.permits("", "services", Verb::List));
    assert!(!hub.permits("", "services", Verb::Patch));
    // The wiring itself runs in `multicluster::hub_watches` (a derived
    // multicluster controller with `watches_hub`).
    let _ = (InEveryMember.controller(), OnTheHub.controller());
}
