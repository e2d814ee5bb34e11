//! The admin, editor and viewer `ClusterRole`s of a CRD: what the
//! cluster's users (not the operator) may do with its objects, as
//! kubebuilder scaffolds per kind. Each is labelled to aggregate into the
//! built-in role of the same level (`admin`, `edit`, `view`), so a user
//! bound to `view` in a namespace can read the custom resources there
//! without a binding of its own.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::ObjectMeta;

/// The label prefix the built-in roles aggregate on.
const AGGREGATE_TO: &str = "rbac.authorization.k8s.io/aggregate-to-";

/// One level of access: the role's suffix, the built-in role it
/// aggregates into, and the verbs on the resource.
const LEVELS: [(&str, &str, &[&str]); 3] = [
    ("admin", "admin", &["*"]),
    (
        "editor",
        "edit",
        &[
            "create", "delete", "get", "list", "patch", "update", "watch",
        ],
    ),
    ("viewer", "view", &["get", "list", "watch"]),
];

/// The `<prefix>-<kind>-admin-role`, `-editor-role` and `-viewer-role`
/// ClusterRoles of `crd` (kind in lower case), in that order.
///
/// - admin: every verb on the resource (`*`), aggregated into `admin`;
/// - editor: create, delete, get, list, patch, update, watch, into `edit`;
/// - viewer: get, list, watch, into `view`.
///
/// Each also reads the `status` subresource. `prefix` (the operator's
/// name) keeps two operators with a kind of the same name apart, as
/// kubebuilder's name prefix does. The operator itself is bound to none
/// of them: they are for the cluster's users.
///
/// ```
/// use kube::CustomResourceExt;
/// # use kube::CustomResource;
/// # use schemars::JsonSchema;
/// # use serde::{Deserialize, Serialize};
/// # #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
/// # #[kube(group = "web.example.com", version = "v1", kind = "StaticSite", namespaced)]
/// # pub struct StaticSiteSpec {}
///
/// let roles = opkit::rbac::user_roles(&StaticSite::crd(), "site-operator");
/// let names: Vec<_> = roles.iter().filter_map(|r| r.metadata.name.as_deref()).collect();
/// assert_eq!(
///     names,
///     [
///         "site-operator-staticsite-admin-role",
///         "site-operator-staticsite-editor-role",
///         "site-operator-staticsite-viewer-role",
///     ]
/// );
/// let viewer = roles[2].metadata.labels.as_ref().expect("labels");
/// assert_eq!(viewer["rbac.authorization.k8s.io/aggregate-to-view"], "true");
/// ```
pub fn user_roles(crd: &CustomResourceDefinition, prefix: &str) -> Vec<ClusterRole> {
    let group = &crd.spec.group;
    let plural = &crd.spec.names.plural;
    let kind = crd.spec.names.kind.to_ascii_lowercase();
    let strings = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    LEVELS
        .iter()
        .map(|(level, builtin, verbs)| ClusterRole {
            metadata: ObjectMeta {
                name: Some(format!("{prefix}-{kind}-{level}-role")),
                labels: Some(BTreeMap::from([
                    ("app.kubernetes.io/name".to_owned(), prefix.to_owned()),
                    (format!("{AGGREGATE_TO}{builtin}"), "true".to_owned()),
                ])),
                ..ObjectMeta::default()
            },
            rules: Some(vec![
                PolicyRule {
                    api_groups: Some(vec![group.clone()]),
                    resources: Some(vec![plural.clone()]),
                    verbs: strings(verbs),
                    ..PolicyRule::default()
                },
                PolicyRule {
                    api_groups: Some(vec![group.clone()]),
                    resources: Some(vec![format!("{plural}/status")]),
                    verbs: strings(&["get"]),
                    ..PolicyRule::default()
                },
            ]),
            ..ClusterRole::default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceDefinitionNames, CustomResourceDefinitionSpec,
    };

    fn crd() -> CustomResourceDefinition {
        CustomResourceDefinition {
            spec: CustomResourceDefinitionSpec {
                group: "cache.example.com".into(),
                names: CustomResourceDefinitionNames {
                    kind: "Memcached".into(),
                    plural: "memcacheds".into(),
                    ..Default::default()
                },
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn three_levels_each_aggregating_into_its_builtin_role() {
        let roles = user_roles(&crd(), "memcached-operator");
        let show: Vec<String> = roles
            .iter()
            .map(|role| {
                let labels = role.metadata.labels.clone().unwrap_or_default();
                let rules = role.rules.clone().unwrap_or_default();
                format!(
                    "{} {:?} {}",
                    role.metadata.name.as_deref().unwrap_or_default(),
                    labels.keys().collect::<Vec<_>>(),
                    rules
                        .iter()
                        .map(|r| format!(
                            "{:?} {:?} {:?}",
                            r.api_groups.as_deref().unwrap_or_default(),
                            r.resources.as_deref().unwrap_or_default(),
                            r.verbs
                        ))
                        .collect::<Vec<_>>()
                        .join("; ")
                )
            })
            .collect();
        assert_eq!(
            show,
            [
                r#"memcached-operator-memcached-admin-role ["app.kubernetes.io/name", "rbac.authorization.k8s.io/aggregate-to-admin"] ["cache.example.com"] ["memcacheds"] ["*"]; ["cache.example.com"] ["memcacheds/status"] ["get"]"#,
                r#"memcached-operator-memcached-editor-role ["app.kubernetes.io/name", "rbac.authorization.k8s.io/aggregate-to-edit"] ["cache.example.com"] ["memcacheds"] ["create", "delete", "get", "list", "patch", "update", "watch"]; ["cache.example.com"] ["memcacheds/status"] ["get"]"#,
                r#"memcached-operator-memcached-viewer-role ["app.kubernetes.io/name", "rbac.authorization.k8s.io/aggregate-to-view"] ["cache.example.com"] ["memcacheds"] ["get", "list", "watch"]; ["cache.example.com"] ["memcacheds/status"] ["get"]"#,
            ]
        );
        for role in &roles {
            let labels = role.metadata.labels.as_ref().expect("labels");
            assert!(
                labels
                    .values()
                    .all(|v| v == "true" || v == "memcached-operator")
            );
        }
    }
}
