//! `sha256:<hex>` digests, as OCI names content.

use std::fmt;

use sha2::{Digest as _, Sha256};

/// A sha256 content digest; displays as `sha256:<64 hex digits>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Sha256Digest(String);

impl Sha256Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        let hash = Sha256::digest(bytes);
        let mut hex = String::with_capacity(64);
        for byte in hash.iter() {
            hex.push_str(&format!("{byte:02x}"));
        }
        Self(hex)
    }

    /// The 64 hex digits alone (the file name under `blobs/sha256/`).
    pub fn hex(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digest() {
        assert_eq!(
            Sha256Digest::of(b"").to_string(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
