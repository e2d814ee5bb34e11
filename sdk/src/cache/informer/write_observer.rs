//! Where an informer reports the changes it applied, for a reader waiting
//! until the cache shows a write (the cache's read-your-own-writes hands
//! each informer of its scope one).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::cache::key::ObjectKey;

/// Told by an informer of every change it applied to its store, once a
/// write is pending ([`any_pending`](Self::any_pending) is checked first,
/// so an informer does no more than one call per change when none is).
pub(crate) trait WriteObserver: Send + Sync {
    /// Whether any write waits to be shown (cheap: checked per change).
    fn any_pending(&self) -> bool;

    /// The object `key` was deleted at `resource_version` (remembered for
    /// a write whose answer arrives after the deletion was applied).
    fn deleted(&self, key: &ObjectKey, resource_version: Option<&str>);

    /// The store now holds `current` for `key` (`None`: absent), after a
    /// deletion of `deleted` if any; `relisted` when a relist put it there.
    fn applied(
        &self,
        key: &ObjectKey,
        current: Option<&ObjectMeta>,
        deleted: Option<&ObjectMeta>,
        relisted: bool,
    );
}
