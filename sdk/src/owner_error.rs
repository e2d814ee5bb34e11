//! [`OwnerError`]: an owner reference that cannot be set. A leaf of its
//! own, below [`action`](crate::action), so that a reconcile error made from
//! it with `?` is terminal (retrying cannot fix it); re-exported as
//! [`opkit::client::OwnerError`](crate::client::OwnerError).
//!
//! ```
//! use opkit::client::OwnerError;
//! use opkit::reconcile::ReconcileError;
//!
//! let taken = OwnerError::AlreadyOwned {
//!     owned: "ConfigMap shop/web".into(),
//!     existing_kind: "Deployment".into(),
//!     existing: "other".into(),
//! };
//! let error: ReconcileError = taken.into();
//! assert!(error.is_terminal());
//! ```

/// An owner reference could not be set: the rules of controller-runtime's
/// `SetControllerReference` / `SetOwnerReference`, checked before any write.
/// Objects are named `Kind namespace/name` (or `Kind name`).
///
/// Every kind is a fact about the objects that another attempt will not
/// change, so a [`ReconcileError`](crate::action::ReconcileError) made from
/// an `OwnerError` (with `?` or `into`) is terminal: not retried, counted in
/// `controller_runtime_terminal_reconcile_errors_total`, reconciled again on
/// the object's next change. Wrap it in
/// [`ReconcileError::retryable`](crate::action::ReconcileError::retryable)
/// to retry it anyway (e.g. when the other controller is expected to let go).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OwnerError {
    /// The owner has no name or uid: it was not read from the apiserver.
    #[error(
        "the owner {owner} has no {missing}: create it (or read it from the apiserver) before owning objects with it"
    )]
    OwnerNotPersisted {
        /// The owner.
        owner: String,
        /// `"metadata.name"` or `"metadata.uid"`.
        missing: &'static str,
    },
    /// A namespaced owner cannot own a cluster-scoped object.
    #[error(
        "cluster-scoped {owned} cannot be owned by namespaced {owner}: the garbage collector would ignore the reference"
    )]
    ClusterScopedOwned {
        /// The owned object.
        owned: String,
        /// The owner.
        owner: String,
    },
    /// Owner and owned object are in different namespaces.
    #[error("cross-namespace owner references are not allowed: {owned} cannot be owned by {owner}")]
    CrossNamespace {
        /// The owned object.
        owned: String,
        /// The owner.
        owner: String,
    },
    /// The owned object is namespaced but its namespace is not set yet.
    #[error("set metadata.namespace on {owned} before setting its owner {owner}")]
    OwnedNamespaceUnset {
        /// The owned object.
        owned: String,
        /// The owner.
        owner: String,
    },
    /// The object already has a different controller.
    #[error(
        "{owned} is already controlled by {existing_kind} {existing:?}; an object has at most one controller"
    )]
    AlreadyOwned {
        /// The owned object.
        owned: String,
        /// The kind of the existing controller.
        existing_kind: String,
        /// The name of the existing controller.
        existing: String,
    },
}
