//! Owner references, with controller-runtime's rules: one controller per
//! object, no cross-namespace owners, no namespaced owner of a
//! cluster-scoped object.

use std::any::TypeId;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::core::{ClusterResourceScope, NamespaceResourceScope};
use kube::{Resource, ResourceExt};

use crate::owner_error::OwnerError;

/// Makes `owner` the controller of `owned`: an owner reference with
/// `controller: true` and `blockOwnerDeletion: true`, so the garbage
/// collector deletes `owned` with its owner and `owns()` watches map events
/// on `owned` back to the owner. The change is local; write `owned` after.
///
/// An existing reference to the same owner (same group, kind and name) is
/// replaced; references to other owners are kept.
///
/// # Errors
///
/// - [`OwnerError::AlreadyOwned`] if another object is already its controller;
/// - [`OwnerError::CrossNamespace`], [`OwnerError::ClusterScopedOwned`] or
///   [`OwnerError::OwnedNamespaceUnset`] if a namespaced owner cannot own it;
/// - [`OwnerError::OwnerNotPersisted`] if the owner has no name or uid.
///
/// ```
/// use k8s_openapi::api::apps::v1::Deployment;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::api::ObjectMeta;
/// use opkit::client::set_controller_reference;
///
/// let owner = Deployment {
///     metadata: ObjectMeta {
///         name: Some("web".into()),
///         namespace: Some("shop".into()),
///         uid: Some("6f1c-...".into()),
///         ..ObjectMeta::default()
///     },
///     ..Deployment::default()
/// };
/// let mut config = ConfigMap {
///     metadata: ObjectMeta {
///         name: Some("web-config".into()),
///         namespace: Some("shop".into()),
///         ..ObjectMeta::default()
///     },
///     ..ConfigMap::default()
/// };
/// set_controller_reference(&owner, &mut config)?;
/// let reference = &config.metadata.owner_references.as_ref().unwrap()[0];
/// assert_eq!((reference.kind.as_str(), reference.controller), ("Deployment", Some(true)));
/// # Ok::<(), opkit::client::OwnerError>(())
/// ```
pub fn set_controller_reference<O, K>(owner: &O, owned: &mut K) -> Result<(), OwnerError>
where
    O: Resource<DynamicType = ()>,
    O::Scope: 'static,
    K: Resource<DynamicType = ()>,
    K::Scope: 'static,
{
    let mut reference = reference_to(owner)?;
    validate_owner(owner, owned)?;
    reference.controller = Some(true);
    reference.block_owner_deletion = Some(true);
    if let Some(existing) = owned
        .owner_references()
        .iter()
        .find(|r| r.controller == Some(true))
        && !same_object(existing, &reference)
    {
        return Err(OwnerError::AlreadyOwned {
            owned: describe(owned),
            existing_kind: existing.kind.clone(),
            existing: existing.name.clone(),
        });
    }
    upsert(owned.owner_references_mut(), reference);
    Ok(())
}

/// Adds `owner` as a plain (non-controller) owner of `owned`: the garbage
/// collector deletes `owned` once all its owners are gone. Same namespace
/// rules as [`set_controller_reference`]; an existing reference to the same
/// owner is replaced (keeping its `controller` flag).
pub fn set_owner_reference<O, K>(owner: &O, owned: &mut K) -> Result<(), OwnerError>
where
    O: Resource<DynamicType = ()>,
    O::Scope: 'static,
    K: Resource<DynamicType = ()>,
    K::Scope: 'static,
{
    let mut reference = reference_to(owner)?;
    validate_owner(owner, owned)?;
    if let Some(existing) = owned
        .owner_references()
        .iter()
        .find(|r| same_object(r, &reference))
    {
        reference.controller = existing.controller;
        reference.block_owner_deletion = existing.block_owner_deletion;
    }
    upsert(owned.owner_references_mut(), reference);
    Ok(())
}

fn reference_to<O>(owner: &O) -> Result<OwnerReference, OwnerError>
where
    O: Resource<DynamicType = ()>,
{
    let missing = |missing| OwnerError::OwnerNotPersisted {
        owner: describe(owner),
        missing,
    };
    let meta = owner.meta();
    Ok(OwnerReference {
        api_version: O::api_version(&()).into_owned(),
        kind: O::kind(&()).into_owned(),
        name: meta.name.clone().ok_or_else(|| missing("metadata.name"))?,
        uid: meta.uid.clone().ok_or_else(|| missing("metadata.uid"))?,
        ..OwnerReference::default()
    })
}

fn is_scope<K: Resource, S: 'static>() -> bool
where
    K::Scope: 'static,
{
    TypeId::of::<K::Scope>() == TypeId::of::<S>()
}

/// controller-runtime's `validateOwner`, using the types' scopes where the
/// namespace field alone is ambiguous (a namespaced object not yet given one).
fn validate_owner<O, K>(owner: &O, owned: &K) -> Result<(), OwnerError>
where
    O: Resource<DynamicType = ()>,
    O::Scope: 'static,
    K: Resource<DynamicType = ()>,
    K::Scope: 'static,
{
    let owner_ns = owner.namespace().filter(|ns| !ns.is_empty());
    let Some(owner_ns) = owner_ns else {
        // A cluster-scoped owner may own anything.
        return Ok(());
    };
    if is_scope::<O, ClusterResourceScope>() {
        return Ok(());
    }
    let owned_ns = owned.namespace().filter(|ns| !ns.is_empty());
    let (owned_desc, owner_desc) = (describe(owned), describe(owner));
    match owned_ns {
        _ if is_scope::<K, ClusterResourceScope>() => Err(OwnerError::ClusterScopedOwned {
            owned: owned_desc,
            owner: owner_desc,
        }),
        None if is_scope::<K, NamespaceResourceScope>() => Err(OwnerError::OwnedNamespaceUnset {
            owned: owned_desc,
            owner: owner_desc,
        }),
        None => Err(OwnerError::ClusterScopedOwned {
            owned: owned_desc,
            owner: owner_desc,
        }),
        Some(ns) if ns != owner_ns => Err(OwnerError::CrossNamespace {
            owned: owned_desc,
            owner: owner_desc,
        }),
        Some(_) => Ok(()),
    }
}

/// `Kind namespace/name`, or `Kind name` without a namespace.
fn describe<K: Resource<DynamicType = ()>>(obj: &K) -> String {
    match obj.namespace().filter(|ns| !ns.is_empty()) {
        Some(ns) => format!("{} {ns}/{}", K::kind(&()), obj.name_any()),
        None => format!("{} {}", K::kind(&()), obj.name_any()),
    }
}

/// The group of an `apiVersion` (`apps/v1` → `apps`, `v1` → ``).
fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

/// Whether two references name the same object: same group, kind and name
/// (the version may differ), as controller-runtime's `referSameObject`.
fn same_object(a: &OwnerReference, b: &OwnerReference) -> bool {
    group_of(&a.api_version) == group_of(&b.api_version) && a.kind == b.kind && a.name == b.name
}

fn upsert(references: &mut Vec<OwnerReference>, reference: OwnerReference) {
    match references.iter_mut().find(|r| same_object(r, &reference)) {
        Some(existing) => *existing = reference,
        None => references.push(reference),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    use k8s_openapi::api::rbac::v1::ClusterRole;
    use kube::api::ObjectMeta;

    fn meta(ns: Option<&str>, name: &str, uid: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: ns.map(Into::into),
            uid: uid.map(Into::into),
            ..ObjectMeta::default()
        }
    }

    fn deployment(ns: &str, name: &str) -> Deployment {
        Deployment {
            metadata: meta(Some(ns), name, Some(&format!("uid-{name}"))),
            ..Deployment::default()
        }
    }

    fn config_map(ns: Option<&str>) -> ConfigMap {
        ConfigMap {
            metadata: meta(ns, "child", None),
            ..ConfigMap::default()
        }
    }

    #[test]
    fn sets_controller_and_block_owner_deletion_idempotently() {
        let owner = deployment("a", "web");
        let mut child = config_map(Some("a"));
        set_controller_reference(&owner, &mut child).unwrap();
        set_controller_reference(&owner, &mut child).unwrap();
        let refs = child.metadata.owner_references.unwrap();
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0].api_version, "apps/v1");
        assert_eq!(refs[0].uid, "uid-web");
        assert_eq!(refs[0].controller, Some(true));
        assert_eq!(refs[0].block_owner_deletion, Some(true));
    }

    #[test]
    fn a_second_controller_is_refused_but_plain_owners_are_kept() {
        let mut child = config_map(Some("a"));
        set_owner_reference(&deployment("a", "plain"), &mut child).unwrap();
        set_controller_reference(&deployment("a", "first"), &mut child).unwrap();
        let err = set_controller_reference(&deployment("a", "second"), &mut child).unwrap_err();
        assert!(matches!(&err, OwnerError::AlreadyOwned { existing, .. } if existing == "first"));
        assert!(
            err.to_string()
                .contains("already controlled by Deployment \"first\""),
            "{err}"
        );
        assert_eq!(child.metadata.owner_references.unwrap().len(), 2);
    }

    #[test]
    fn namespace_rules() {
        let owner = deployment("a", "web");
        let err = set_controller_reference(&owner, &mut config_map(Some("b"))).unwrap_err();
        assert!(matches!(err, OwnerError::CrossNamespace { .. }), "{err}");
        assert!(err.to_string().contains("cross-namespace"));

        let err = set_controller_reference(&owner, &mut config_map(None)).unwrap_err();
        assert!(
            matches!(err, OwnerError::OwnedNamespaceUnset { .. }),
            "{err}"
        );

        let mut role = ClusterRole {
            metadata: meta(None, "r", None),
            ..ClusterRole::default()
        };
        let err = set_controller_reference(&owner, &mut role).unwrap_err();
        assert!(
            matches!(err, OwnerError::ClusterScopedOwned { .. }),
            "{err}"
        );

        // A cluster-scoped owner may own namespaced and cluster-scoped objects.
        let ns = Namespace {
            metadata: meta(None, "tenant", Some("uid-ns")),
            ..Namespace::default()
        };
        set_controller_reference(&ns, &mut config_map(Some("b"))).unwrap();
        set_controller_reference(&ns, &mut role).unwrap();
    }

    #[test]
    fn an_unsaved_owner_is_refused() {
        let owner = Deployment {
            metadata: meta(Some("a"), "web", None),
            ..Deployment::default()
        };
        let err = set_controller_reference(&owner, &mut config_map(Some("a"))).unwrap_err();
        assert!(matches!(
            err,
            OwnerError::OwnerNotPersisted {
                missing: "metadata.uid",
                ..
            }
        ));
    }
}
