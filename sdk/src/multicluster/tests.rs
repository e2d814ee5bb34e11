//! The fleet without a control plane: what it refuses, and a member that
//! cannot be reached engaged and disengaged without holding anything up
//! (the fleet test on real control planes is tests/tests/it/multicluster.rs).

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;

use super::*;
use crate::controller::{Controller, ControllerError};
use crate::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
use crate::workqueue::ExponentialFailureRateLimiter;

struct Nothing;

impl Reconcile for Nothing {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        _: Request,
        _: &Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        Ok(Action::done())
    }
}

/// `what`, within ten seconds.
async fn bounded<F: std::future::Future>(
    what: F,
) -> Result<F::Output, tokio::time::error::Elapsed> {
    tokio::time::timeout(Duration::from_secs(10), what).await
}

fn unreachable_client() -> kube::Client {
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    kube::Client::try_from(config).unwrap()
}

#[tokio::test]
async fn a_fleet_refuses_what_it_cannot_give_each_cluster() {
    let (clusters, _handle) = ClusterSet::new();
    let mut fleet = Fleet::new(clusters);
    let limited = Controller::new(Nothing).rate_limiter(ExponentialFailureRateLimiter::new(
        Duration::from_millis(5),
        Duration::from_secs(1),
    ));
    assert!(matches!(
        fleet.add(limited),
        Err(MultiClusterError::Controller(e)) if matches!(*e, ControllerError::NotMulticluster { .. })
    ));
    let (_wake, woken) = tokio::sync::mpsc::channel(1);
    let fed = Controller::new(Nothing).watches_channel(woken);
    assert!(matches!(
        fleet.add(fed),
        Err(MultiClusterError::Controller(e)) if matches!(*e, ControllerError::NotMulticluster { .. })
    ));
    fleet.add(Controller::new(Nothing).multicluster()).unwrap();
    assert!(matches!(
        fleet.add(Controller::new(Nothing)),
        Err(MultiClusterError::DuplicateController { name }) if name == "configmap"
    ));
}

#[tokio::test]
async fn a_fleet_without_a_provider_does_not_run() {
    let fleet = Fleet::without_provider();
    assert!(matches!(
        fleet.run(std::future::pending()).await,
        Err(MultiClusterError::NoProvider)
    ));
}

#[tokio::test]
async fn an_unreachable_member_is_engaged_and_disengaged_without_waiting_for_it() {
    let (clusters, handle) = ClusterSet::new();
    let mut fleet = Fleet::new(clusters);
    fleet.add(Controller::new(Nothing).multicluster()).unwrap();
    let engaged = fleet.engaged();
    let stop = tokio_util::sync::CancellationToken::new();
    let running = tokio::spawn(fleet.run(stop.clone().cancelled_owned()));

    bounded(handle.add("far", unreachable_client()))
        .await
        .expect("engaging does not wait for the member to sync")
        .unwrap();
    bounded(handle.add("near", unreachable_client()))
        .await
        .unwrap()
        .unwrap();
    let names: Vec<String> = engaged.borrow().iter().map(ToString::to_string).collect();
    assert_eq!(names, ["far", "near"]);
    // new credentials: engaged again, still one engagement
    bounded(handle.add("far", unreachable_client()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(engaged.borrow().len(), 2);

    assert!(bounded(handle.remove("far")).await.unwrap().unwrap());
    assert!(
        !bounded(handle.remove("far")).await.unwrap().unwrap(),
        "not engaged any more"
    );
    let names: Vec<String> = engaged.borrow().iter().map(ToString::to_string).collect();
    assert_eq!(names, ["near"]);

    stop.cancel();
    bounded(running).await.unwrap().unwrap().unwrap();
    assert!(engaged.borrow().is_empty());
    assert!(matches!(
        handle.add("late", unreachable_client()).await,
        Err(MultiClusterError::FleetStopped)
    ));
}

#[tokio::test]
async fn watches_across_the_fleet_are_refused_where_they_cannot_run() {
    let to_members = |_: &ConfigMap| vec![ClusterRequest::new("m1", Request::cluster("x"))];
    // hub-side watches on a fleet with no hub
    let (clusters, _handle) = ClusterSet::new();
    let mut fleet = Fleet::new(clusters);
    fleet
        .add(
            Controller::new(Nothing)
                .multicluster()
                .watches_hub(to_members),
        )
        .unwrap();
    assert!(matches!(
        bounded(fleet.run(std::future::pending())).await.unwrap(),
        Err(MultiClusterError::Controller(e)) if matches!(*e, ControllerError::NoHub { .. })
    ));
    // member-side watches on a multicluster controller
    let (clusters, _handle) = ClusterSet::new();
    let mut fleet = Fleet::new(clusters);
    let back = Controller::new(Nothing)
        .multicluster()
        .watches_members(|_, _: &ConfigMap| Vec::new());
    assert!(matches!(
        fleet.add(back),
        Err(MultiClusterError::Controller(e)) if matches!(*e, ControllerError::NotMulticluster { .. })
    ));
    // hub-side watches on a single-cluster controller, member-side ones
    // without a fleet: each says what to do
    let cache = crate::cache::SharedCache::new(unreachable_client());
    let hub_only = Controller::new(Nothing).watches_hub(to_members);
    let error = bounded(hub_only.run(&cache, std::future::pending()))
        .await
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(&error, ControllerError::HubWatchesNeedMulticluster { .. }),
        "{error}"
    );
    assert!(
        error.to_string().contains("call .multicluster()"),
        "{error}"
    );
    let members_only = Controller::new(Nothing).watches_members(|_, _: &ConfigMap| Vec::new());
    let error = bounded(members_only.run(&cache, std::future::pending()))
        .await
        .unwrap()
        .unwrap_err();
    assert!(matches!(&error, ControllerError::NoFleet { .. }), "{error}");
    assert!(
        error.to_string().contains("set_cluster_provider"),
        "{error}"
    );
}
