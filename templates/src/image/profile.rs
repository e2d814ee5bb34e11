//! [`Profile`]: how the manager is built, dev or release.

/// How the manager is built (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Profile {
    /// `cargo build --bin <bin>`: shared with the project's own builds and
    /// tests, seconds after a change; the host's glibc goes in the image.
    Dev,
    /// `cargo build --release --target x86_64-unknown-linux-gnu`, static,
    /// with the project's release profile (fat LTO in generated projects,
    /// unless `CARGO_PROFILE_RELEASE_LTO` says otherwise):
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

/// Link-time optimisation across crates in the release build, as cargo
/// will apply it: `CARGO_PROFILE_RELEASE_LTO` over the workspace's
/// `[profile.release] lto` over cargo's default (none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Lto {
    /// `lto = true` or `"fat"`: one optimisation unit, the slowest link.
    Fat,
    /// `lto = "thin"`.
    Thin,
    /// `lto = false`, `"off"` or unset.
    Off,
}

impl Lto {
    /// The setting for the workspace at `workspace_root`, with `env` the
    /// value of `CARGO_PROFILE_RELEASE_LTO` if set.
    pub(crate) fn of(workspace_root: &std::path::Path, env: Option<&str>) -> Self {
        let written = env.map(str::to_owned).or_else(|| {
            let cargo = std::fs::read_to_string(workspace_root.join("Cargo.toml")).ok()?;
            crate::cargo_toml::table_value(&cargo, "profile.release", "lto")
        });
        match written.as_deref().map(str::trim) {
            Some("true" | "fat") => Self::Fat,
            Some("thin") => Self::Thin,
            _ => Self::Off,
        }
    }

    /// `fat LTO`, `thin LTO` or `no LTO`, for the progress lines.
    pub(crate) fn describe(&self) -> &'static str {
        match self {
            Self::Fat => "fat LTO",
            Self::Thin => "thin LTO",
            Self::Off => "no LTO",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Lto;

    #[test]
    fn the_environment_overrides_the_workspace_profile() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("Cargo.toml"),
            "[package]\nname = \"p\"\n\n[profile.release]\nlto = \"fat\"\ncodegen-units = 1\n",
        )
        .expect("write");
        assert_eq!(Lto::of(dir.path(), None), Lto::Fat);
        assert_eq!(Lto::of(dir.path(), Some("thin")), Lto::Thin);
        assert_eq!(Lto::of(dir.path(), Some("false")), Lto::Off);
        let empty = tempfile::tempdir().expect("tempdir");
        assert_eq!(Lto::of(empty.path(), None), Lto::Off);
    }
}
