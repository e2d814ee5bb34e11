//! The image's config, manifest and index, and writing them as an OCI image
//! layout: a directory (`oci-layout`, `index.json`, `blobs/sha256/…`) or the
//! same tree in a tar archive (`ctr images import`, `podman load` and
//! `docker load` read it).
//!
//! JSON is written from structs and a sorted map, so the bytes (and with
//! them the digests) depend on the inputs alone.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::digest::Sha256Digest;
use super::error::ImageError;
use super::layer::{Layer, MANAGER_PATH, NONROOT_UID};

/// Media type of the manifest.
pub(crate) const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
const LAYER_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";

/// What the image says about itself: labels and the creation time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageMetadata {
    /// `org.opencontainers.image.*` labels (and any other), sorted by key.
    pub labels: BTreeMap<String, String>,
    /// The `created` time (RFC 3339), from `SOURCE_DATE_EPOCH`; `None`
    /// leaves it out, so the time of the build never changes the digest.
    pub created: Option<String>,
}

/// A blob: its bytes and digest.
#[derive(Debug, Clone)]
pub(crate) struct Blob {
    pub bytes: Vec<u8>,
    pub digest: Sha256Digest,
}

impl Blob {
    fn new(bytes: Vec<u8>) -> Self {
        let digest = Sha256Digest::of(&bytes);
        Self { bytes, digest }
    }
}

/// The three blobs of a single-platform image.
#[derive(Debug, Clone)]
pub(crate) struct ImageBlobs {
    pub layer: Blob,
    pub config: Blob,
    pub manifest: Blob,
}

impl ImageBlobs {
    /// The image's size: the sum of its blobs (what a pull transfers).
    pub fn size(&self) -> u64 {
        (self.layer.bytes.len() + self.config.bytes.len() + self.manifest.bytes.len()) as u64
    }
}

#[derive(Serialize)]
struct Config<'a> {
    architecture: &'static str,
    os: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    created: Option<&'a str>,
    config: RuntimeConfig<'a>,
    rootfs: RootFs,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct RuntimeConfig<'a> {
    user: String,
    entrypoint: [&'static str; 1],
    env: [&'static str; 1],
    working_dir: &'static str,
    labels: &'a BTreeMap<String, String>,
}

#[derive(Serialize)]
struct RootFs {
    #[serde(rename = "type")]
    kind: &'static str,
    diff_ids: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Descriptor<'a> {
    media_type: &'static str,
    digest: String,
    size: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<&'a BTreeMap<String, String>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Manifest<'a> {
    schema_version: u32,
    media_type: &'static str,
    config: Descriptor<'a>,
    layers: [Descriptor<'a>; 1],
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    annotations: &'a BTreeMap<String, String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Index<'a> {
    schema_version: u32,
    media_type: &'static str,
    manifests: [Descriptor<'a>; 1],
}

fn descriptor<'a>(media_type: &'static str, blob: &Blob) -> Descriptor<'a> {
    Descriptor {
        media_type,
        digest: blob.digest.to_string(),
        size: blob.bytes.len() as u64,
        annotations: None,
    }
}

fn json(value: &impl Serialize) -> Result<Vec<u8>, ImageError> {
    serde_json::to_vec(value).map_err(|e| ImageError::Internal(format!("encoding JSON: {e}")))
}

/// The config and manifest for `layer`, run as 65532:65532 with
/// `/manager` as entrypoint.
pub(crate) fn assemble(layer: Layer, metadata: &ImageMetadata) -> Result<ImageBlobs, ImageError> {
    let config = Config {
        architecture: "amd64",
        os: "linux",
        created: metadata.created.as_deref(),
        config: RuntimeConfig {
            user: format!("{NONROOT_UID}:{NONROOT_UID}"),
            entrypoint: [MANAGER_PATH],
            env: ["PATH=/usr/local/bin:/usr/bin:/bin"],
            working_dir: "/",
            labels: &metadata.labels,
        },
        rootfs: RootFs {
            kind: "layers",
            diff_ids: vec![layer.diff_id.to_string()],
        },
    };
    let config = Blob::new(json(&config)?);
    let layer = Blob {
        digest: layer.digest,
        bytes: layer.gzipped,
    };
    let manifest = Manifest {
        schema_version: 2,
        media_type: MANIFEST_MEDIA_TYPE,
        config: descriptor(CONFIG_MEDIA_TYPE, &config),
        layers: [descriptor(LAYER_MEDIA_TYPE, &layer)],
        annotations: &metadata.labels,
    };
    let manifest = Blob::new(json(&manifest)?);
    Ok(ImageBlobs {
        layer,
        config,
        manifest,
    })
}

/// `index.json` naming the manifest as `reference` (containerd's
/// `io.containerd.image.name`) and its tag (`org.opencontainers.image.ref.name`).
pub(crate) fn index_json(blobs: &ImageBlobs, reference: &str) -> Result<Vec<u8>, ImageError> {
    let tag = reference
        .rsplit_once(':')
        .filter(|(_, tag)| !tag.contains('/'))
        .map_or("latest", |(_, tag)| tag);
    let annotations = BTreeMap::from([
        ("io.containerd.image.name".to_owned(), reference.to_owned()),
        (
            "org.opencontainers.image.ref.name".to_owned(),
            tag.to_owned(),
        ),
    ]);
    let mut manifest = descriptor(MANIFEST_MEDIA_TYPE, &blobs.manifest);
    manifest.annotations = Some(&annotations);
    json(&Index {
        schema_version: 2,
        media_type: INDEX_MEDIA_TYPE,
        manifests: [manifest],
    })
}

/// The files of the layout, relative to its root, sorted.
fn layout_files(blobs: &ImageBlobs, reference: &str) -> Result<Vec<(String, Vec<u8>)>, ImageError> {
    let mut files = vec![
        (
            "oci-layout".to_owned(),
            br#"{"imageLayoutVersion":"1.0.0"}"#.to_vec(),
        ),
        ("index.json".to_owned(), index_json(blobs, reference)?),
    ];
    for blob in [&blobs.layer, &blobs.config, &blobs.manifest] {
        files.push((
            format!("blobs/sha256/{}", blob.digest.hex()),
            blob.bytes.clone(),
        ));
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    files.dedup_by(|a, b| a.0 == b.0);
    Ok(files)
}

/// How the layout is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    /// A directory holding the layout.
    Directory,
    /// A tar archive of the layout (chosen for paths ending in `.tar`).
    Archive,
}

impl OutputFormat {
    /// `Archive` for `*.tar`, else `Directory`.
    pub fn for_path(path: &Path) -> Self {
        if path.extension().is_some_and(|e| e == "tar") {
            Self::Archive
        } else {
            Self::Directory
        }
    }
}

/// Writes the layout to `output`, replacing an earlier layout there but
/// nothing else: a directory that is not an OCI layout (no `oci-layout`
/// file), or a file that is not a tar we could have written, is refused.
/// The layout is written beside `output` first and renamed into place, so a
/// failed write leaves the old one whole.
pub(crate) fn write(
    blobs: &ImageBlobs,
    reference: &str,
    output: &Path,
    format: OutputFormat,
) -> Result<(), ImageError> {
    check_replaceable(output, format)?;
    let files = layout_files(blobs, reference)?;
    let parent = output
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| ImageError::Io {
            what: "writing the image layout",
            path,
            source,
        }
    };
    std::fs::create_dir_all(parent).map_err(io(parent))?;
    let staging = tempfile::Builder::new()
        .prefix(".opkit-image-")
        .tempdir_in(parent)
        .map_err(io(parent))?;
    let staged = staging.path().join("out");
    match format {
        OutputFormat::Directory => {
            for (name, bytes) in &files {
                let path = staged.join(name);
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).map_err(io(dir))?;
                }
                std::fs::write(&path, bytes).map_err(io(&path))?;
            }
        }
        OutputFormat::Archive => {
            let bytes = archive(&files).map_err(io(&staged))?;
            std::fs::write(&staged, bytes).map_err(io(&staged))?;
        }
    }
    let old = staging.path().join("old");
    if output.exists() {
        std::fs::rename(output, &old).map_err(io(output))?;
    }
    if let Err(source) = std::fs::rename(&staged, output) {
        // Put the earlier layout back before reporting.
        let _ = std::fs::rename(&old, output);
        return Err(io(output)(source));
    }
    Ok(())
}

fn check_replaceable(output: &Path, format: OutputFormat) -> Result<(), ImageError> {
    let refuse = |what: &str| ImageError::OutputInUse {
        path: output.to_owned(),
        what: what.to_owned(),
    };
    let Ok(meta) = std::fs::symlink_metadata(output) else {
        return Ok(());
    };
    match format {
        OutputFormat::Directory if meta.is_dir() => {
            if output.join("oci-layout").is_file() {
                Ok(())
            } else {
                Err(refuse("a directory that is not an OCI image layout"))
            }
        }
        OutputFormat::Archive if meta.is_file() => {
            let mut archive = tar::Archive::new(
                std::fs::File::open(output).map_err(|_| refuse("a file that cannot be read"))?,
            );
            let is_layout = archive.entries().ok().is_some_and(|mut entries| {
                entries.any(|e| {
                    e.ok()
                        .and_then(|e| e.path().ok().map(|p| p.as_os_str() == "oci-layout"))
                        .unwrap_or(false)
                })
            });
            if is_layout {
                Ok(())
            } else {
                Err(refuse("a file that is not an OCI image archive"))
            }
        }
        OutputFormat::Directory => Err(refuse("a file, not a directory")),
        OutputFormat::Archive => Err(refuse("a directory, not a file")),
    }
}

/// The layout as a tar, with fixed metadata like the layer.
fn archive(files: &[(String, Vec<u8>)]) -> std::io::Result<Vec<u8>> {
    let mut tar = tar::Builder::new(Vec::new());
    let mut dirs: Vec<String> = Vec::new();
    for (name, bytes) in files {
        // Parent directories first, once each.
        let mut prefix = String::new();
        for part in name
            .split('/')
            .collect::<Vec<_>>()
            .split_last()
            .map_or(&[][..], |(_, d)| d)
        {
            prefix.push_str(part);
            prefix.push('/');
            if !dirs.contains(&prefix) {
                dirs.push(prefix.clone());
                let mut header = fixed_header(tar::EntryType::Directory, 0o755, 0);
                tar.append_data(&mut header, &prefix, std::io::empty())?;
            }
        }
        let mut header = fixed_header(tar::EntryType::Regular, 0o644, bytes.len() as u64);
        tar.append_data(&mut header, name, bytes.as_slice())?;
    }
    tar.into_inner()
}

fn fixed_header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut header = tar::Header::new_ustar();
    header.set_entry_type(kind);
    header.set_mode(mode);
    header.set_size(size);
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    header.set_cksum();
    header
}

#[cfg(test)]
mod tests {
    use super::super::layer;
    use super::*;

    fn blobs(binary: &[u8], labels: &[(&str, &str)]) -> ImageBlobs {
        let layer = layer::pack(
            &layer::entries(binary.to_vec()),
            0,
            flate2::Compression::default(),
        )
        .unwrap();
        let metadata = ImageMetadata {
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            created: None,
        };
        assemble(layer, &metadata).unwrap()
    }

    #[test]
    fn config_runs_the_manager_as_nonroot() {
        let blobs = blobs(b"bin", &[("org.opencontainers.image.version", "1.2.3")]);
        let config: serde_json::Value = serde_json::from_slice(&blobs.config.bytes).unwrap();
        assert_eq!(config["config"]["User"], "65532:65532");
        assert_eq!(
            config["config"]["Entrypoint"],
            serde_json::json!(["/manager"])
        );
        assert_eq!(
            config["config"]["Labels"]["org.opencontainers.image.version"],
            "1.2.3"
        );
        assert_eq!(config["rootfs"]["diff_ids"].as_array().unwrap().len(), 1);
        assert!(config.get("created").is_none());
        let manifest: serde_json::Value = serde_json::from_slice(&blobs.manifest.bytes).unwrap();
        assert_eq!(
            manifest["config"]["digest"],
            blobs.config.digest.to_string()
        );
        assert_eq!(
            manifest["layers"][0]["digest"],
            blobs.layer.digest.to_string()
        );
        assert_eq!(
            manifest["layers"][0]["size"],
            blobs.layer.bytes.len() as u64
        );
    }

    #[test]
    fn digest_depends_on_inputs_only() {
        let labels = [("b", "2"), ("a", "1")];
        let reversed = [("a", "1"), ("b", "2")];
        assert_eq!(
            blobs(b"bin", &labels).manifest.digest,
            blobs(b"bin", &reversed).manifest.digest
        );
        assert_ne!(
            blobs(b"bin", &labels).manifest.digest,
            blobs(b"bin", &[("a", "1")]).manifest.digest
        );
    }

    #[test]
    fn directory_and_archive_hold_the_same_layout() {
        let blobs = blobs(b"bin", &[]);
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("image");
        write(&blobs, "demo:1", &out, OutputFormat::Directory).unwrap();
        let index: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("index.json")).unwrap()).unwrap();
        assert_eq!(
            index["manifests"][0]["digest"],
            blobs.manifest.digest.to_string()
        );
        assert_eq!(
            index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"],
            "1"
        );
        for blob in [&blobs.layer, &blobs.config, &blobs.manifest] {
            let path = out.join("blobs/sha256").join(blob.digest.hex());
            assert_eq!(std::fs::read(path).unwrap(), blob.bytes);
        }
        // Writing again replaces the layout.
        write(&blobs, "demo:1", &out, OutputFormat::Directory).unwrap();

        let tar_path = dir.path().join("image.tar");
        write(&blobs, "demo:1", &tar_path, OutputFormat::Archive).unwrap();
        let first = std::fs::read(&tar_path).unwrap();
        write(&blobs, "demo:1", &tar_path, OutputFormat::Archive).unwrap();
        assert_eq!(
            first,
            std::fs::read(&tar_path).unwrap(),
            "archives are reproducible"
        );
        let mut names: Vec<String> = tar::Archive::new(first.as_slice())
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned())
            .collect();
        assert!(names.contains(&"oci-layout".to_owned()));
        assert!(names.contains(&format!("blobs/sha256/{}", blobs.layer.digest.hex())));
        names.retain(|n| !n.ends_with('/'));
        assert_eq!(names.len(), 5);
    }

    #[test]
    fn refuses_to_overwrite_what_it_did_not_write() {
        let blobs = blobs(b"bin", &[]);
        let dir = tempfile::tempdir().unwrap();
        let keep = dir.path().join("src");
        std::fs::create_dir(&keep).unwrap();
        std::fs::write(keep.join("main.rs"), "fn main() {}").unwrap();
        let err = write(&blobs, "demo:1", &keep, OutputFormat::Directory).unwrap_err();
        assert!(err.to_string().contains("not an OCI image layout"), "{err}");
        assert!(keep.join("main.rs").is_file(), "nothing was lost");

        let notes = dir.path().join("notes.tar");
        std::fs::write(&notes, "not a tar").unwrap();
        let err = write(&blobs, "demo:1", &notes, OutputFormat::Archive).unwrap_err();
        assert!(
            err.to_string().contains("not an OCI image archive"),
            "{err}"
        );
        assert_eq!(std::fs::read_to_string(&notes).unwrap(), "not a tar");
    }
}
