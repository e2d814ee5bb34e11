//! A `RoleBinding`: a `Role` ([`Rules::role`](super::Rules::role)) granted
//! in its namespace, for what an operator reads in a namespace it knows
//! (kubebuilder's `+kubebuilder:rbac:...,namespace=...` marker).
//!
//! ```
//! use k8s_openapi::api::core::v1::Secret;
//! use opkit::rbac::{self, Rules, Verb};
//!
//! let secrets = Rules::new().allow::<Secret>(&Verb::READ);
//! let role = secrets.role("hub-operator-fleet-secrets", "fleet");
//! let binding = rbac::role_binding(
//!     "hub-operator-fleet-secrets",
//!     "hub-operator-fleet-secrets",
//!     "hub-operator-controller-manager",
//!     "hub-operator-system",
//!     "fleet",
//! );
//! assert_eq!(role.metadata.namespace.as_deref(), Some("fleet"));
//! assert_eq!(binding.role_ref.kind, "Role");
//! ```

use k8s_openapi::api::rbac::v1::{RoleBinding, RoleRef, Subject};
use kube::api::ObjectMeta;

/// A `RoleBinding` named `name` in `namespace` granting the `Role` `role`
/// (of that namespace) to the ServiceAccount `service_account` of
/// `service_account_namespace`.
pub fn role_binding(
    name: &str,
    role: &str,
    service_account: &str,
    service_account_namespace: &str,
    namespace: &str,
) -> RoleBinding {
    RoleBinding {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            kind: "Role".to_owned(),
            name: role.to_owned(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name: service_account.to_owned(),
            namespace: Some(service_account_namespace.to_owned()),
            ..Subject::default()
        }]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_role_binding_lives_in_its_namespace_and_names_the_account_of_another() {
        let binding = role_binding("reader", "reader", "op", "op-system", "fleet");
        assert_eq!(binding.metadata.namespace.as_deref(), Some("fleet"));
        assert_eq!(binding.role_ref.kind, "Role");
        let subjects = binding.subjects.unwrap_or_default();
        assert_eq!(subjects[0].namespace.as_deref(), Some("op-system"));
    }
}
