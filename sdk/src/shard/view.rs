//! [`View`]: one member set, its [`Ring`], and the short id replicas
//! publish to acknowledge it.

use std::sync::Arc;

use super::hash::{fnv1a64, hash64};
use super::ring::Ring;

/// What a key is hashed by to find its owner.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum KeyScheme {
    /// The whole key (`namespace/name`), FNV-1a then splitmix64: objects
    /// spread evenly whatever their names; the cache is not divided.
    #[default]
    Object,
    /// The key's namespace alone (empty for a cluster-scoped key), plain
    /// FNV-1a as a KEP-5866 apiserver hashes `object.metadata.namespace`:
    /// the ring's ranges are then the replica's server-side shard selector.
    Namespace,
}

impl KeyScheme {
    /// The field a server-side shard selector hashes, for this scheme.
    pub(crate) const NAMESPACE_FIELD: &'static str = "object.metadata.namespace";

    /// The ring position of `key`.
    pub(crate) fn hash(self, key: &str) -> u64 {
        match self {
            Self::Object => hash64(key.as_bytes()),
            Self::Namespace => {
                let namespace = key.split_once('/').map_or("", |(ns, _)| ns);
                fnv1a64(namespace.as_bytes())
            }
        }
    }
}

/// A member set as one replica sees it. Two replicas seeing the same
/// members build equal views with equal [`id`](Self::id)s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct View {
    id: Arc<str>,
    ring: Arc<Ring>,
    scheme: KeyScheme,
}

impl View {
    /// The view of `members`, keys hashed whole.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn new<I, S>(members: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::with_scheme(members, KeyScheme::Object)
    }

    /// The view of `members`, keys hashed by `scheme`. The scheme is part
    /// of the id: replicas hashing keys differently (a rolling change of
    /// the scheme, or two Deployments sharing a ring name) never all
    /// acknowledge one view, so none of them starts a key.
    pub(crate) fn with_scheme<I, S>(members: I, scheme: KeyScheme) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let ring = Ring::new(members);
        // Members are sorted and have no NUL: joining with NUL is unambiguous.
        let joined = ring.members().join("\0");
        let mut id = format!(
            "{:016x}-{}",
            hash64(joined.as_bytes()),
            ring.members().len()
        );
        if scheme == KeyScheme::Namespace {
            id.push_str("-ns");
        }
        Self {
            id: id.into(),
            ring: Arc::new(ring),
            scheme,
        }
    }

    /// `<hash of the sorted members>-<count>`: what a replica writes to
    /// its Lease to say it acts on this view.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// The assignment.
    pub(crate) fn ring(&self) -> &Ring {
        &self.ring
    }

    /// The member owning `key` in this view (`None`: no members).
    pub(crate) fn owner(&self, key: &str) -> Option<&str> {
        self.ring.owner_of_hash(self.scheme.hash(key))
    }

    /// Whether `member` owns `key` in this view.
    pub(crate) fn owns(&self, member: &str, key: &str) -> bool {
        self.owner(key) == Some(member)
    }

    /// The KEP-5866 shard selector of `member`'s share, for a view hashing
    /// namespaces; `None` otherwise. A member owning no range (impossible
    /// with 128 points per member, but not by construction) gets a range
    /// of one hash value.
    pub(crate) fn server_selector(&self, member: &str) -> Option<String> {
        if self.scheme != KeyScheme::Namespace {
            return None;
        }
        let field = KeyScheme::NAMESPACE_FIELD;
        Some(self.ring.shard_selector(member, field).unwrap_or_else(|| {
            format!("shardRange({field}, '0x0000000000000000', '0x0000000000000001')")
        }))
    }
}
