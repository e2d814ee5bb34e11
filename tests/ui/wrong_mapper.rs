#![allow(unused_imports)]
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use opkit::Controller;
use opkit::reconcile::{Action, Context, ReconcileError, Reconcile, Request};

/// Takes the wrong kind: a ConfigMap watch maps Secrets.
fn by_name(secret: &Secret, _primaries: &opkit::cache::Store<ConfigMap>) -> Vec<Request> {
    Request::for_object(secret).into_iter().collect()
}

#[derive(Controller)]
#[controller(for = ConfigMap, watches(ConfigMap, map = by_name))]
struct R;

impl Reconcile for R {
    type Object = ConfigMap;

    async fn reconcile(&self, _req: Request, _ctx: &Context<ConfigMap>) -> Result<Action, ReconcileError> {
        Ok(Action::done())
    }
}

fn main() {}
