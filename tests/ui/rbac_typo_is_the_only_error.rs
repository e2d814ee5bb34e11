#![allow(unused_imports)]
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use opkit::Controller;
use opkit::derive::ControllerWiring;
use opkit::manager::{Manager, ManagerError};
use opkit::reconcile::{Action, Context, ReconcileError, Reconcile, Request};

// A typo in `rbac(...)`: the one error is the typo, not also
// `no method named add_to` where the controller is added.
#[derive(Controller)]
#[controller(for = ConfigMap, rbac(get, lsit on Secret))]
struct R;

impl Reconcile for R {
    type Object = ConfigMap;

    async fn reconcile(&self, _req: Request, _ctx: &Context<ConfigMap>) -> Result<Action, ReconcileError> {
        Ok(Action::done())
    }
}

fn add_controllers(manager: &mut Manager) -> Result<(), ManagerError> {
    let _rules = R::rbac_rules();
    R.add_to(manager)
}

fn main() {}
