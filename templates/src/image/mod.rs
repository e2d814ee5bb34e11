//! `cargo opkit image`: an OCI image of the operator's manager, built
//! without a container engine — the way `ko` builds Go operators.
//!
//! ```no_run
//! use cargo_opkit::image::{ImageOptions, PushOptions};
//!
//! # async fn example() -> Result<(), cargo_opkit::image::ImageError> {
//! let image = ImageOptions {
//!     dir: "examples/memcached".into(),
//!     ..ImageOptions::default()
//! }
//! .build()?;
//! println!("{} ({} bytes) in {}", image.digest, image.size, image.output.display());
//! image
//!     .push("127.0.0.1:5000/memcached-operator:dev", PushOptions::default())
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! # What is built
//!
//! Two profiles ([`Profile`]). The **dev** profile (the default of `cargo
//! opkit image` and `make image`) is for the inner loop: the manager is
//! built exactly as `cargo build --bin <bin>` builds it (cargo's `dev`
//! profile, no LTO, incremental, the host's target), so it shares every
//! dependency build with `cargo build`, `cargo run` and `cargo test` and a
//! one-line change rebuilds in seconds; the binary is linked against the
//! host's glibc, and the image holds the loader and the libraries `ldd`
//! names, at their paths. Its digest depends on the checkout's path (debug
//! line tables). The **release** profile (`--release`, `make image
//! RELEASE=1`, CI) is what ships:
//!
//! - The manager: `cargo build --release --target x86_64-unknown-linux-gnu`
//!   with `-C target-feature=+crt-static` (glibc, linked statically: the
//!   image needs no libc and no loader), and `--remap-path-prefix` for the
//!   workspace (`/src`), the target directory (`/target`) and the cargo home
//!   (`/cargo`), so the same source gives the same binary in any checkout.
//!   Flags from `RUSTFLAGS` are kept and ours added; `build.rustflags` in a
//!   `.cargo/config.toml` is not read while these are set. In `cargo
//!   opkit` (and any program that calls [`serve_as_rustc_wrapper`] first),
//!   the workspace's remap reaches only the workspace's own crates, so
//!   dependencies' release builds are shared by every project that uses
//!   the same target directory.
//! - One layer (gzipped tar): `/manager`; `/etc/passwd` and `/etc/group`
//!   with `root`, `nobody` and `nonroot` (65532); `/home/nonroot`; `/tmp`
//!   (mode 1777). No CA certificates: in a cluster the manager trusts the
//!   API server through the ServiceAccount's `ca.crt`, which the kubelet
//!   mounts, and it talks to nothing else; an operator that calls other
//!   HTTPS services must bring their CA (e.g. from a Secret).
//! - The config: `User` `65532:65532`, `Entrypoint` `["/manager"]`, labels
//!   `org.opencontainers.image.{source,revision,version,title}`.
//!
//! The Dockerfile of a generated project builds the same thing with Docker
//! (distroless `static:nonroot`, the same user, path and entrypoint).
//!
//! # Reproducible
//!
//! Every tar entry has a fixed mtime (`SOURCE_DATE_EPOCH`, else 0), owner
//! and mode; entries are sorted; gzip's header is fixed; JSON is written
//! from structs and sorted maps. The same binary and labels always give the
//! same digest. `created` is set only from `SOURCE_DATE_EPOCH`.

mod binary;
mod credentials;
mod digest;
mod error;
mod labels;
mod layer;
mod layout;
mod libraries;
mod package;
mod profile;
mod progress;
mod push;
mod rustc_wrapper;
mod token;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use binary::TARGET;
pub use credentials::Login;
pub use digest::Sha256Digest;
pub use error::ImageError;
pub use layer::{MANAGER_PATH, NONROOT_UID};
pub use layout::{ImageMetadata, OutputFormat};
pub use profile::Profile;
pub use push::PushOptions;
pub use rustc_wrapper::serve_as_rustc_wrapper;

/// What to build; [`ImageOptions::build`] builds it.
#[derive(Debug, Clone)]
pub struct ImageOptions {
    /// The project's directory, or any directory inside it.
    pub dir: PathBuf,
    /// The binary to put in the image (default: the package's only binary,
    /// or the one named like the package).
    pub bin: Option<String>,
    /// Where to write the OCI layout: a directory, or a tar archive if the
    /// path ends in `.tar`. Default: `<target dir>/oci/<bin>`.
    pub output: Option<PathBuf>,
    /// The reference the layout names the image by (`index.json`), e.g. the
    /// one it is pushed as. Default: `<bin>:<package version>`.
    pub reference: Option<String>,
    /// How the manager is built (default: [`Profile::Release`]; `cargo
    /// opkit image` defaults to [`Profile::Dev`]).
    pub profile: Profile,
}

impl Default for ImageOptions {
    fn default() -> Self {
        Self {
            dir: PathBuf::from("."),
            bin: None,
            output: None,
            reference: None,
            profile: Profile::Release,
        }
    }
}

/// A built image, written as an OCI layout.
#[derive(Debug, Clone)]
pub struct BuiltImage {
    /// The manifest digest (what a registry and containerd call the image).
    pub digest: Sha256Digest,
    /// The sum of the blobs' sizes (what a pull transfers).
    pub size: u64,
    /// The manager binary's size.
    pub binary_size: u64,
    /// The reference `index.json` names.
    pub reference: String,
    /// Where the layout was written.
    pub output: PathBuf,
    /// Directory or archive.
    pub format: OutputFormat,
    /// The time `cargo build` took.
    pub build_time: Duration,
    blobs: layout::ImageBlobs,
}

impl ImageOptions {
    /// Builds the binary and writes the image layout.
    pub fn build(&self) -> Result<BuiltImage, ImageError> {
        let project = binary::locate_package(&self.dir, self.bin.as_deref())?;
        let started = Instant::now();
        let executable = binary::build(&project, self.profile)?;
        let build_time = started.elapsed();
        let binary = std::fs::read(&executable).map_err(|source| ImageError::Io {
            what: "reading the built manager",
            path: executable.clone(),
            source,
        })?;
        let mut libraries = Vec::new();
        match binary::is_static_elf(&binary) {
            Ok(true) => {}
            Ok(false) if self.profile == Profile::Dev => {
                libraries = libraries::for_binary(&executable)?;
            }
            Ok(false) => {
                return Err(ImageError::NotStatic {
                    binary: executable,
                    reason: "it names a dynamic loader (PT_INTERP)".to_owned(),
                });
            }
            Err(reason) => {
                return Err(ImageError::NotStatic {
                    binary: executable,
                    reason: reason.to_owned(),
                });
            }
        }
        let project_dir = project
            .manifest
            .parent()
            .map_or_else(|| self.dir.clone(), Path::to_owned);
        let labels = labels::labels(
            &project_dir,
            &project.bin,
            &project.version,
            project.repository.as_deref(),
        );
        let reference = self
            .reference
            .clone()
            .unwrap_or_else(|| format!("{}:{}", project.bin, project.version));
        let output = self
            .output
            .clone()
            .unwrap_or_else(|| project.target_dir.join("oci").join(&project.bin));
        // A dev image is rebuilt at every change: gzip fast (the layer is
        // larger, the push on loopback no slower).
        let level = match self.profile {
            Profile::Dev => flate2::Compression::fast(),
            Profile::Release => flate2::Compression::default(),
        };
        let layer = layer::entries_with(binary, libraries);
        pack_entries(layer, labels, &reference, &output, level).map(|mut image| {
            image.build_time = build_time;
            image
        })
    }
}

/// Packs an already built static `binary` with `labels` and writes the
/// layout to `output` (a directory, or an archive for `*.tar`).
pub fn pack_binary(
    binary: Vec<u8>,
    labels: std::collections::BTreeMap<String, String>,
    reference: &str,
    output: &Path,
) -> Result<BuiltImage, ImageError> {
    pack_entries(
        layer::entries(binary),
        labels,
        reference,
        output,
        flate2::Compression::default(),
    )
}

/// [`pack_binary`] for the layer's `entries` (the manager and, for a
/// dynamic one, its libraries), gzipped at `level`.
fn pack_entries(
    entries: Vec<layer::Entry>,
    labels: std::collections::BTreeMap<String, String>,
    reference: &str,
    output: &Path,
    level: flate2::Compression,
) -> Result<BuiltImage, ImageError> {
    let epoch = labels::source_date_epoch().map_err(ImageError::BadSourceDate)?;
    let binary_size = entries
        .iter()
        .find(|e| e.path == MANAGER_PATH.trim_start_matches('/'))
        .and_then(|e| e.contents.as_ref())
        .map_or(0, |c| c.len() as u64);
    let layer = layer::pack(&entries, epoch.unwrap_or(0), level)
        .map_err(|e| ImageError::Internal(format!("writing the layer: {e}")))?;
    let metadata = ImageMetadata {
        labels,
        created: epoch.map(labels::rfc3339),
    };
    let blobs = layout::assemble(layer, &metadata)?;
    let format = OutputFormat::for_path(output);
    layout::write(&blobs, reference, output, format)?;
    Ok(BuiltImage {
        digest: blobs.manifest.digest.clone(),
        size: blobs.size(),
        binary_size,
        reference: reference.to_owned(),
        output: output.to_owned(),
        format,
        build_time: Duration::ZERO,
        blobs,
    })
}

impl BuiltImage {
    /// Pushes the image to a registry as `reference` (`host[:port]/name:tag`).
    /// Returns the digest, the same as [`BuiltImage::digest`].
    pub async fn push(&self, reference: &str, options: PushOptions) -> Result<String, ImageError> {
        push::push(&self.blobs, reference, &options).await
    }
}

/// Checks an image reference before anything is built, so a typo fails at
/// once.
pub fn check_reference(reference: &str) -> Result<(), ImageError> {
    push::parse_reference(reference).map(|_| ())
}
