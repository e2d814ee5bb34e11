//! Typed errors of `opkit::shard`.

/// Why a [`Sharding`](super::Sharding) could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    /// The ring name is not a valid label value of at most 63 lowercase
    /// letters, digits and dashes.
    #[error(
        "the ring name {0:?} is invalid: use 1 to 63 lowercase letters, digits and '-', \
         starting and ending with a letter or digit"
    )]
    InvalidRing(String),
    /// The Leases' namespace is empty.
    #[error("the member Leases' namespace must not be empty")]
    EmptyNamespace,
    /// The identity is empty or longer than 128 bytes.
    #[error("the replica identity {0:?} must be 1 to 128 bytes long")]
    InvalidIdentity(String),
    /// The lease duration, renew deadline and retry period do not fit
    /// together (leader election's rules); the text says why.
    #[error("invalid sharding timing: {0}")]
    InvalidTiming(String),
}
