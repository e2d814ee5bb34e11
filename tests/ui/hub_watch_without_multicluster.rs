#![allow(unused_imports)]
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use opkit::Controller;
use opkit::multicluster::ClusterRequest;
use opkit::reconcile::{Action, Context, ReconcileError, Reconcile, Request};

fn to_members(_: &Secret) -> Vec<ClusterRequest> {
    Vec::new()
}

#[derive(Controller)]
#[controller(for = ConfigMap, watches_hub(Secret, map = to_members))]
struct R;

impl Reconcile for R {
    type Object = ConfigMap;

    async fn reconcile(&self, _req: Request, _ctx: &Context<ConfigMap>) -> Result<Action, ReconcileError> {
        Ok(Action::done())
    }
}

fn main() {}
