#![allow(unused_imports)]
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use opkit::Controller;
use opkit::multicluster::ClusterName;
use opkit::reconcile::{Action, Context, ReconcileError, Reconcile, Request};

fn to_hub(_: &ClusterName, _: &Secret) -> Vec<Request> {
    Vec::new()
}

#[derive(Controller)]
#[controller(for = ConfigMap, multicluster, watches_members(Secret, map = to_hub))]
struct R;

impl Reconcile for R {
    type Object = ConfigMap;

    async fn reconcile(&self, _req: Request, _ctx: &Context<ConfigMap>) -> Result<Action, ReconcileError> {
        Ok(Action::done())
    }
}

fn main() {}
