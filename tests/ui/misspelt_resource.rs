#![allow(unused_imports)]
use k8s_openapi::api::core::v1::ConfigMap;
use opkit::Controller;
use opkit::reconcile::{Action, Context, ReconcileError, Reconcile, Request};

#[derive(Controller)]
#[controller(for = ConfigMap, rbac(get, list on "deploymnets.apps"))]
struct R;

impl Reconcile for R {
    type Object = ConfigMap;

    async fn reconcile(&self, _req: Request, _ctx: &Context<ConfigMap>) -> Result<Action, ReconcileError> {
        Ok(Action::done())
    }
}

fn main() {}
