use k8s_openapi::api::core::v1::ConfigMap;
use opkit::Controller;

/// Declares a controller but never implements `Reconcile`.
#[derive(Controller)]
#[controller(for = ConfigMap)]
struct R;

fn main() {}
