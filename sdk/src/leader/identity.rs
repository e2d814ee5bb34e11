//! The default identity of an elector: `<hostname>_<random UUID>`, as
//! controller-runtime builds it, so two processes on one host never share it.

use crate::host::hostname;

/// The longest identity a Lease's `holderIdentity` is given by opkit. The
/// apiserver does not bound the field, but identities are also used in
/// Events and logs; 128 matches an Event's `reportingInstance` limit.
pub(crate) const MAX_IDENTITY_LEN: usize = 128;

/// `<hostname>_<uuid>`: the host name from `$HOSTNAME`, else
/// `/proc/sys/kernel/hostname`, else `localhost`; the suffix a random
/// version-4 UUID.
///
/// In a Pod, the host name is the Pod's name, so the Lease's holder says
/// which replica leads.
pub(crate) fn default_identity() -> String {
    format!("{}_{}", hostname(), random_uuid())
}

/// A random (version 4, RFC 4122 variant) UUID in its 8-4-4-4-12 hex form.
pub(crate) fn random_uuid() -> String {
    let mut bytes = fastrand::u128(..).to_be_bytes();
    bytes[6] = (bytes[6] & 0x0f) | 0x40; // version 4
    bytes[8] = (bytes[8] & 0x3f) | 0x80; // RFC 4122 variant
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_has_the_canonical_form_and_version_4() {
        let id = random_uuid();
        let parts: Vec<&str> = id.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(id.chars().all(|c| c == '-' || c.is_ascii_hexdigit()));
        assert!(parts[2].starts_with('4'), "{id}");
        assert!(matches!(&parts[3][..1], "8" | "9" | "a" | "b"), "{id}");
        assert_ne!(random_uuid(), random_uuid());
    }

    #[test]
    fn identity_is_hostname_underscore_uuid() {
        let id = default_identity();
        let (host, uuid) = id.rsplit_once('_').unwrap();
        assert!(!host.is_empty());
        assert_eq!(uuid.len(), 36);
    }
}
