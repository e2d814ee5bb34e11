//! Bindings of an operator's roles to its ServiceAccount: a
//! `ClusterRoleBinding` for its `ClusterRole`, and a `RoleBinding` for a
//! `Role` ([`Rules::role`](super::Rules::role)) that holds in one
//! namespace, for what an operator reads in a namespace it knows
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

use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding, RoleRef, Subject};
use kube::api::ObjectMeta;

/// RBAC's API group, which every `roleRef` names.
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// A reference to the role `kind` (`Role` or `ClusterRole`) named `name`.
fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef {
        api_group: Some(RBAC_GROUP.to_owned()),
        kind: kind.to_owned(),
        name: name.to_owned(),
    }
}

/// The ServiceAccount `name` of `namespace`, as a binding's only subject.
fn service_account_subject(name: &str, namespace: &str) -> Option<Vec<Subject>> {
    Some(vec![Subject {
        kind: "ServiceAccount".to_owned(),
        name: name.to_owned(),
        namespace: Some(namespace.to_owned()),
        ..Subject::default()
    }])
}

/// A `ClusterRoleBinding` named `name` granting the `ClusterRole` `role` to
/// the ServiceAccount `service_account` in `namespace`.
///
/// ```
/// let binding = opkit::rbac::cluster_role_binding(
///     "web-operator-manager-rolebinding",
///     "web-operator-manager-role",
///     "web-operator-controller-manager",
///     "web-operator-system",
/// );
/// assert_eq!(binding.role_ref.kind, "ClusterRole");
/// ```
pub fn cluster_role_binding(
    name: &str,
    role: &str,
    service_account: &str,
    namespace: &str,
) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        role_ref: role_ref("ClusterRole", role),
        subjects: service_account_subject(service_account, namespace),
    }
}

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
        role_ref: role_ref("Role", role),
        subjects: service_account_subject(service_account, service_account_namespace),
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
