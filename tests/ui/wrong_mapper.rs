#![allow(unused_imports)]
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use opkit::Controller;
use opkit::reconcile::{Action, Context, Error, Reconcile, Request};

/// Takes the wrong kind: a ConfigMap watch maps Secrets.
fn by_name(secret: &Secret, _cache: &opkit::cache::SharedCache) -> Vec<Request> {
    Request::for_object(secret).into_iter().collect()
}

#[derive(Controller)]
#[controller(for = ConfigMap, watches(ConfigMap, map = by_name))]
struct R;

impl Reconcile for R {
    async fn reconcile(&self, _req: Request, _ctx: &Context) -> Result<Action, Error> {
        Ok(Action::done())
    }
}

fn main() {}
