//! [`Profile`]: how the manager is built, dev or release.

/// How the manager is built (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Profile {
    /// `cargo build --bin <bin>`: shared with the project's own builds and
    /// tests, seconds after a change; the host's glibc goes in the image.
    Dev,
    /// `cargo build --release --target x86_64-unknown-linux-gnu`, static,
    /// with the project's release profile (fat LTO in generated projects):
    /// what ships, reproducible anywhere.
    #[default]
    Release,
}

impl Profile {
    /// `dev` or `release`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Dev => "dev",
            Self::Release => "release",
        }
    }
}
