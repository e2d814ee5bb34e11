//! [`View`]: one member set, its [`Ring`], and the short id replicas
//! publish to acknowledge it.

use std::sync::Arc;

use super::hash::hash64;
use super::ring::Ring;

/// A member set as one replica sees it. Two replicas seeing the same
/// members build equal views with equal [`id`](Self::id)s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct View {
    id: Arc<str>,
    ring: Arc<Ring>,
}

impl View {
    /// The view of `members`.
    pub(crate) fn new<I, S>(members: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let ring = Ring::new(members);
        // Members are sorted and have no NUL: joining with NUL is unambiguous.
        let joined = ring.members().join("\0");
        let id = format!(
            "{:016x}-{}",
            hash64(joined.as_bytes()),
            ring.members().len()
        );
        Self {
            id: id.into(),
            ring: Arc::new(ring),
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

    /// Whether `member` owns `key` in this view.
    pub(crate) fn owns(&self, member: &str, key: &str) -> bool {
        self.ring.owner(key) == Some(member)
    }
}
