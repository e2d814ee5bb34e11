//! RBAC rules an operator needs, computed from its code rather than written
//! by hand.
//!
//! `#[derive(Controller)]` turns a controller's declaration into [`Rules`]
//! (see [`crate::derive`]); an operator merges the rules of its controllers,
//! adds what its manager needs ([`Rules::leader_election`]), and renders a
//! `ClusterRole` and its binding for `deploy/`.
//!
//! ```
//! use k8s_openapi::api::apps::v1::Deployment;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use opkit::rbac::{Rules, Verb};
//!
//! let rules = Rules::new()
//!     .allow::<ConfigMap>(&Verb::READ)
//!     .allow::<Deployment>(&[Verb::Get, Verb::List, Verb::Watch, Verb::Patch])
//!     .leader_election();
//! assert!(rules.permits("apps", "deployments", Verb::Patch));
//! assert!(!rules.permits("apps", "deployments", Verb::Delete));
//!
//! let role = rules.cluster_role("web-operator-manager-role");
//! let yaml = opkit::manifest::to_yaml(&[&role]).expect("YAML");
//! assert!(yaml.contains("kind: ClusterRole"));
//! ```
//!
//! Rules are merged per API group and resource, so declaring the same kind
//! twice (watched and written) yields one rule with the union of the verbs.
//! [`Rules::cluster_role`] then folds resources of one group that share the
//! same verbs into one `PolicyRule`, in a stable order, so the rendered YAML
//! changes only when the code does.
//!
//! [`Rules::role`] and [`role_binding`] render the same rules as a `Role`
//! of one namespace, for what an operator reads only there.
//!
//! [`user_roles`] renders the admin, editor and viewer roles of a CRD for
//! the cluster's users, aggregated into the built-in `admin`, `edit` and
//! `view`.

mod bindings;
mod user_roles;

pub use bindings::{cluster_role_binding, role_binding};
pub use user_roles::user_roles;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use kube::Resource;
use kube::api::ObjectMeta;

/// An RBAC verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verb {
    /// Read one object.
    Get,
    /// List objects.
    List,
    /// Watch objects.
    Watch,
    /// Create objects (server-side apply of a new object needs it too).
    Create,
    /// Replace objects (`PUT`).
    Update,
    /// Patch objects (merge, JSON and server-side apply patches).
    Patch,
    /// Delete one object.
    Delete,
    /// Delete a collection of objects.
    DeleteCollection,
}

impl Verb {
    /// What a watch needs: `get`, `list`, `watch`.
    pub const READ: [Verb; 3] = [Verb::Get, Verb::List, Verb::Watch];
    /// Every write: `create`, `update`, `patch`, `delete`.
    pub const WRITE: [Verb; 4] = [Verb::Create, Verb::Update, Verb::Patch, Verb::Delete];
    /// Every verb.
    pub const ALL: [Verb; 8] = [
        Verb::Get,
        Verb::List,
        Verb::Watch,
        Verb::Create,
        Verb::Update,
        Verb::Patch,
        Verb::Delete,
        Verb::DeleteCollection,
    ];

    /// The verb as RBAC spells it (`deletecollection` for [`Verb::DeleteCollection`]).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::List => "list",
            Self::Watch => "watch",
            Self::Create => "create",
            Self::Update => "update",
            Self::Patch => "patch",
            Self::Delete => "delete",
            Self::DeleteCollection => "deletecollection",
        }
    }

    /// The verb RBAC spells `name`, if any.
    ///
    /// ```
    /// use opkit::rbac::Verb;
    /// assert_eq!(Verb::parse("patch"), Some(Verb::Patch));
    /// assert_eq!(Verb::parse("escalate"), None);
    /// ```
    #[cfg(test)]
    pub(crate) fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == name)
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of RBAC permissions: verbs per (API group, resource).
///
/// Built by value so a declaration reads as one expression (the derive
/// macro generates such chains). See the [module docs](self).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    entries: BTreeMap<(String, String), BTreeSet<Verb>>,
}

impl Rules {
    /// No permissions.
    pub fn new() -> Self {
        Self::default()
    }

    /// Allows `verbs` on the resource of kind `K` (its API group and plural).
    pub fn allow<K: Resource<DynamicType = ()>>(self, verbs: &[Verb]) -> Self {
        let group = K::group(&());
        let plural = K::plural(&());
        self.allow_resource(&group, &plural, verbs)
    }

    /// Allows `verbs` on the subresource `sub` (`status`, `finalizers`,
    /// `scale`, ...) of kind `K`.
    pub fn allow_subresource<K: Resource<DynamicType = ()>>(
        self,
        sub: &str,
        verbs: &[Verb],
    ) -> Self {
        let group = K::group(&());
        let resource = format!("{}/{sub}", K::plural(&()));
        self.allow_resource(&group, &resource, verbs)
    }

    /// Allows `verbs` on `resource` (`plural` or `plural/subresource`) of
    /// API `group` (`""` for the core group).
    pub fn allow_resource(mut self, group: &str, resource: &str, verbs: &[Verb]) -> Self {
        self.entries
            .entry((group.to_owned(), resource.to_owned()))
            .or_default()
            .extend(verbs.iter().copied());
        self
    }

    /// Adds every permission of `other`.
    pub fn merge(mut self, other: Rules) -> Self {
        for (key, verbs) in other.entries {
            self.entries.entry(key).or_default().extend(verbs);
        }
        self
    }

    /// What leader election needs: `get`, `create`, `update` on
    /// `coordination.k8s.io` `leases` (see [`crate::leader`]).
    pub fn leader_election(self) -> Self {
        self.allow_resource(
            "coordination.k8s.io",
            "leases",
            &[Verb::Get, Verb::Create, Verb::Update],
        )
    }

    #[cfg(feature = "secure-metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "secure-metrics")))]
    /// What [secure metrics](crate::manager::SecureMetrics) needs to check
    /// a scraper: `create` on `authentication.k8s.io` `tokenreviews` and
    /// `authorization.k8s.io` `subjectaccessreviews`.
    pub fn metrics_auth(self) -> Self {
        self.allow_resource("authentication.k8s.io", "tokenreviews", &[Verb::Create])
            .allow_resource(
                "authorization.k8s.io",
                "subjectaccessreviews",
                &[Verb::Create],
            )
    }

    #[cfg(feature = "shard")]
    #[cfg_attr(docsrs, doc(cfg(feature = "shard")))]
    /// What sharding needs: `get`, `list`, `create`, `update`, `delete` on
    /// `coordination.k8s.io` `leases` (see [`crate::shard`]). A
    /// [`by_namespace`](crate::shard::Sharding::by_namespace) ring on a
    /// server without KEP-5866 runs in label mode and also needs `patch`
    /// on each sharded controller's primary kind, which this cannot name:
    /// `#[controller(finalizer)]` grants it, else add
    /// `.allow::<K>(&[Verb::Patch])`.
    pub fn sharding(self) -> Self {
        self.allow_resource(
            "coordination.k8s.io",
            "leases",
            &[
                Verb::Get,
                Verb::List,
                Verb::Create,
                Verb::Update,
                Verb::Delete,
            ],
        )
    }

    /// What an [`EventRecorder`](crate::client::EventRecorder) needs:
    /// `create` and `patch` on `events.k8s.io` `events`.
    pub fn events(self) -> Self {
        self.allow_resource("events.k8s.io", "events", &[Verb::Create, Verb::Patch])
    }

    /// Removes `verb` on `resource` of `group`; `true` if it was allowed.
    /// Useful to check that an operator fails clearly without a permission.
    #[cfg(test)]
    pub(crate) fn deny(&mut self, group: &str, resource: &str, verb: Verb) -> bool {
        let key = (group.to_owned(), resource.to_owned());
        let Some(verbs) = self.entries.get_mut(&key) else {
            return false;
        };
        let removed = verbs.remove(&verb);
        if verbs.is_empty() {
            self.entries.remove(&key);
        }
        removed
    }

    /// Whether `verb` on `resource` of `group` is allowed.
    pub fn permits(&self, group: &str, resource: &str, verb: Verb) -> bool {
        self.entries
            .get(&(group.to_owned(), resource.to_owned()))
            .is_some_and(|verbs| verbs.contains(&verb))
    }

    /// Whether there is no permission at all.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The rules as `PolicyRule`s: one per API group and set of verbs,
    /// listing every resource of that group with exactly those verbs.
    /// Sorted by group, then by the first resource, so the output is stable.
    pub(crate) fn policy_rules(&self) -> Vec<PolicyRule> {
        let mut folded: BTreeMap<(&str, Vec<Verb>), Vec<&str>> = BTreeMap::new();
        for ((group, resource), verbs) in &self.entries {
            folded
                .entry((group.as_str(), verbs.iter().copied().collect()))
                .or_default()
                .push(resource.as_str());
        }
        let mut rules: Vec<(&str, Vec<&str>, Vec<Verb>)> = folded
            .into_iter()
            .map(|((group, verbs), resources)| (group, resources, verbs))
            .collect();
        rules.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        rules
            .into_iter()
            .map(|(group, resources, verbs)| PolicyRule {
                api_groups: Some(vec![group.to_owned()]),
                resources: Some(resources.into_iter().map(str::to_owned).collect()),
                verbs: verbs.iter().map(|v| v.as_str().to_owned()).collect(),
                ..PolicyRule::default()
            })
            .collect()
    }

    /// A `Role` named `name` in `namespace` granting these rules there, and
    /// nowhere else (folded as [`Rules::cluster_role`] folds them); bind it
    /// with [`role_binding`].
    pub fn role(&self, name: &str, namespace: &str) -> Role {
        Role {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            rules: Some(self.policy_rules()),
        }
    }

    /// A `ClusterRole` named `name` granting these rules.
    pub fn cluster_role(&self, name: &str) -> ClusterRole {
        ClusterRole {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            rules: Some(self.policy_rules()),
            ..ClusterRole::default()
        }
    }
}

#[cfg(feature = "secure-metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "secure-metrics")))]
/// A `ClusterRole` named `name` allowing `get` on the non-resource URL
/// `/metrics`: bind it to a scraper's ServiceAccount (Prometheus) to read
/// [secure metrics](crate::manager::SecureMetrics) (kubebuilder's
/// `metrics-reader` role).
///
/// ```
/// let role = opkit::rbac::metrics_reader_role("web-operator-metrics-reader");
/// let rule = &role.rules.as_deref().unwrap_or_default()[0];
/// assert_eq!(rule.non_resource_urls.as_deref(), Some(&["/metrics".to_owned()][..]));
/// assert_eq!(rule.verbs, ["get"]);
/// ```
pub fn metrics_reader_role(name: &str) -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        rules: Some(vec![PolicyRule {
            non_resource_urls: Some(vec!["/metrics".to_owned()]),
            verbs: vec![Verb::Get.as_str().to_owned()],
            ..PolicyRule::default()
        }]),
        ..ClusterRole::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_role_holds_the_rules_in_its_namespace_only() {
        use k8s_openapi::api::core::v1::Secret;
        let role = Rules::new()
            .allow::<Secret>(&Verb::READ)
            .role("reader", "fleet");
        assert_eq!(role.metadata.namespace.as_deref(), Some("fleet"));
        let rules = role.rules.unwrap_or_default();
        assert_eq!(rules.len(), 1);
        assert_eq!(
            rules[0].resources.as_deref(),
            Some(&["secrets".to_owned()][..])
        );
        assert_eq!(
            rules[0].verbs,
            ["get", "list", "watch"].map(str::to_owned).to_vec()
        );
    }
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{ConfigMap, Service};

    #[test]
    fn verbs_round_trip() {
        for verb in Verb::ALL {
            assert_eq!(Verb::parse(verb.as_str()), Some(verb));
        }
        assert_eq!(Verb::DeleteCollection.to_string(), "deletecollection");
    }

    #[test]
    fn merges_per_resource_and_folds_equal_verb_sets() {
        let rules = Rules::new()
            .allow::<Deployment>(&Verb::READ)
            .allow::<Service>(&Verb::READ)
            .allow::<ConfigMap>(&Verb::READ)
            .allow::<Deployment>(&[Verb::Patch, Verb::Create])
            .allow_subresource::<Deployment>("status", &[Verb::Get])
            .leader_election()
            .events();
        let policy = rules.policy_rules();
        let show: Vec<String> = policy
            .iter()
            .map(|r| {
                format!(
                    "{:?} {:?} {:?}",
                    r.api_groups.as_deref().unwrap_or_default(),
                    r.resources.as_deref().unwrap_or_default(),
                    r.verbs
                )
            })
            .collect();
        assert_eq!(
            show,
            [
                r#"[""] ["configmaps", "services"] ["get", "list", "watch"]"#,
                r#"["apps"] ["deployments"] ["get", "list", "watch", "create", "patch"]"#,
                r#"["apps"] ["deployments/status"] ["get"]"#,
                r#"["coordination.k8s.io"] ["leases"] ["get", "create", "update"]"#,
                r#"["events.k8s.io"] ["events"] ["create", "patch"]"#,
            ]
        );
    }

    #[cfg(feature = "shard")]
    #[test]
    fn sharding_needs_list_and_delete_on_leases() {
        let rules = Rules::new().sharding();
        for verb in [
            Verb::Get,
            Verb::List,
            Verb::Create,
            Verb::Update,
            Verb::Delete,
        ] {
            assert!(rules.permits("coordination.k8s.io", "leases", verb));
        }
        assert!(!rules.permits("coordination.k8s.io", "leases", Verb::Watch));
    }

    #[test]
    fn deny_removes_one_verb() {
        let mut rules = Rules::new().allow::<Service>(&[Verb::Get, Verb::Patch]);
        assert!(rules.deny("", "services", Verb::Patch));
        assert!(!rules.deny("", "services", Verb::Patch));
        assert!(rules.permits("", "services", Verb::Get));
        assert!(rules.deny("", "services", Verb::Get));
        assert!(rules.is_empty());
    }

    #[test]
    fn binding_names_the_service_account() {
        let b = cluster_role_binding("b", "r", "sa", "ns");
        let subject = &b.subjects.as_deref().unwrap_or_default()[0];
        assert_eq!(
            (subject.kind.as_str(), subject.name.as_str()),
            ("ServiceAccount", "sa")
        );
        assert_eq!(subject.namespace.as_deref(), Some("ns"));
    }
}
