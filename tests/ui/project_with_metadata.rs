#![allow(unused_imports)]
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use opkit::Controller;
use opkit::cache::Projection;
use opkit::reconcile::{Action, Context, ReconcileError, Reconcile, Request};

struct PodView;

#[derive(Controller)]
#[controller(for = ConfigMap, owns(Pod, metadata, project = PodView))]
struct R;

impl Reconcile for R {
    type Object = ConfigMap;

    async fn reconcile(&self, _req: Request, _ctx: &Context<ConfigMap>) -> Result<Action, ReconcileError> {
        Ok(Action::done())
    }
}

fn main() {}
