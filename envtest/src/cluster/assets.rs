//! Finding what `tests/node/build-node.sh` built (the controllers, the node
//! components, the CNI plugins), what `tests/node/build-images.sh` built
//! (the image archives, in a cache of their own so that changing an image
//! never rebuilds the components) and what `tests/coredns/build.sh` built
//! (the cluster DNS image).

use std::env;
use std::path::{Path, PathBuf};

use crate::error::{EnvtestError, Result};

/// The build-cache directory `tests/node/build-node.sh` fills, under
/// `${OPKIT_CACHE:-$HOME/.cache/opkit}/cluster/`. Kept in step with the
/// script's versions and recipe number by a unit test.
pub const DEFAULT_NODE_ASSETS: &str = "v1.36.3-containerd-v2.4.2-cni-v1.9.1-r1";

/// The build-cache directory `tests/coredns/build.sh` fills, under
/// `${OPKIT_CACHE:-$HOME/.cache/opkit}/coredns/`: CoreDNS's version and the
/// script's recipe number (a key of its own, so changing CoreDNS never
/// rebuilds the node's components). Kept in step by a unit test.
pub const DEFAULT_DNS_ASSETS: &str = "v1.15.0-r1";
/// The build-cache directory `tests/node/build-images.sh` fills, under
/// `${OPKIT_CACHE:-$HOME/.cache/opkit}/images/`. Kept in step with the
/// script's recipe number by a unit test.
pub const DEFAULT_IMAGES: &str = "r2";

/// The binaries and images a [`Cluster`](super::Cluster) runs besides etcd
/// and kube-apiserver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAssets {
    /// The directory `build-node.sh` printed.
    pub root: PathBuf,
}

/// The image archives of a build, and the reference each one carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageArchive {
    /// The archive (an OCI image layout in a tar file).
    pub path: PathBuf,
    /// The short name, e.g. `memcached` for `memcached.tar`.
    pub name: String,
    /// The image reference pods use, e.g. `opkit.local/memcached:1.6.18-1_deb12u1`.
    pub reference: String,
}

impl NodeAssets {
    /// A program in `bin/`.
    pub fn bin(&self, name: &str) -> PathBuf {
        self.root.join("bin").join(name)
    }

    /// The CNI plugin directory.
    pub fn cni_dir(&self) -> PathBuf {
        self.root.join("cni")
    }

    /// The image archives `build-images.sh` built, as its `refs` file lists
    /// them: from `$OPKIT_CLUSTER_IMAGES` when set, else the build cache's
    /// `images/<DEFAULT_IMAGES>` (see [`find_images_dir`]).
    pub fn images(&self) -> Result<Vec<ImageArchive>> {
        let dir = find_images_dir()?;
        let refs = dir.join("refs");
        let text = std::fs::read_to_string(&refs).map_err(|source| EnvtestError::Io {
            what: "reading the list of built images",
            path: refs.clone(),
            source,
        })?;
        Ok(parse_refs(&dir, &text))
    }
}

fn parse_refs(dir: &Path, text: &str) -> Vec<ImageArchive> {
    text.lines()
        .filter_map(|line| {
            let (file, reference) = line.split_once(' ')?;
            Some(ImageArchive {
                path: dir.join(file),
                name: file.trim_end_matches(".tar").to_owned(),
                reference: reference.trim().to_owned(),
            })
        })
        .collect()
}

/// The opkit build cache: `$OPKIT_CACHE`, else `$HOME/.cache/opkit`.
fn build_cache() -> Option<PathBuf> {
    env::var_os("OPKIT_CACHE")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| Path::new(&h).join(".cache").join("opkit")))
}

/// Finds a completed build directory: `$<variable>` when set, else
/// `<cache>/<kind>/<key>` in the build cache. A directory counts once its
/// build script marked it complete (`.complete`); otherwise `missing` makes
/// the error from where it looked.
fn find_build(
    variable: &str,
    kind: &str,
    key: &str,
    missing: fn(String) -> EnvtestError,
) -> Result<PathBuf> {
    let (dir, label) = match env::var_os(variable).filter(|v| !v.is_empty()) {
        Some(dir) => (PathBuf::from(dir), format!("${variable}")),
        None => {
            let cache = build_cache().ok_or_else(|| {
                missing(format!(
                    "nowhere ($HOME, OPKIT_CACHE and {variable} are all unset)"
                ))
            })?;
            (
                cache.join(kind).join(key),
                "the opkit build cache".to_owned(),
            )
        }
    };
    if dir.join(".complete").is_file() {
        Ok(dir)
    } else {
        Err(missing(format!("{} ({label})", dir.display())))
    }
}

/// Finds the node assets: `$OPKIT_CLUSTER_ASSETS` when set, else the build
/// cache. A directory counts once `build-node.sh` marked it complete.
pub fn find_node_assets() -> Result<NodeAssets> {
    let root = find_build(
        "OPKIT_CLUSTER_ASSETS",
        "cluster",
        DEFAULT_NODE_ASSETS,
        |searched| EnvtestError::MissingNodeAssets { searched },
    )?;
    Ok(NodeAssets { root })
}

/// What `tests/coredns/build.sh` built: the cluster DNS server's image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsAssets {
    /// The directory `build.sh` printed.
    pub root: PathBuf,
}

impl DnsAssets {
    /// The CoreDNS image archive (listed in `images/refs`).
    pub fn image(&self) -> Result<ImageArchive> {
        let dir = self.root.join("images");
        let refs = dir.join("refs");
        let text = std::fs::read_to_string(&refs).map_err(|source| EnvtestError::Io {
            what: "reading the list of built images",
            path: refs.clone(),
            source,
        })?;
        parse_refs(&dir, &text)
            .into_iter()
            .find(|i| i.name == "coredns")
            .ok_or_else(|| EnvtestError::MissingDnsAssets {
                searched: format!("{} (no coredns.tar line)", refs.display()),
            })
    }
}

/// Finds the cluster DNS build: `$OPKIT_DNS_ASSETS` when set, else the build
/// cache. A directory counts once `build.sh` marked it complete.
pub fn find_dns_assets() -> Result<DnsAssets> {
    let root = find_build(
        "OPKIT_DNS_ASSETS",
        "coredns",
        DEFAULT_DNS_ASSETS,
        |searched| EnvtestError::MissingDnsAssets { searched },
    )?;
    Ok(DnsAssets { root })
}

/// Finds the directory of image archives: `$OPKIT_CLUSTER_IMAGES` when set,
/// else `images/<DEFAULT_IMAGES>` in the build cache. A directory counts once
/// `build-images.sh` marked it complete.
pub fn find_images_dir() -> Result<PathBuf> {
    find_build(
        "OPKIT_CLUSTER_IMAGES",
        "images",
        DEFAULT_IMAGES,
        |searched| EnvtestError::MissingImages { searched },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_name_each_archive() {
        let images = parse_refs(
            Path::new("/x"),
            "pause.tar opkit.local/pause:1\nmemcached.tar opkit.local/memcached:1.6\n\n",
        );
        assert_eq!(images.len(), 2);
        assert_eq!(images[1].name, "memcached");
        assert_eq!(images[1].path, Path::new("/x/memcached.tar"));
        assert_eq!(images[1].reference, "opkit.local/memcached:1.6");
    }

    /// The constant names the directory the script builds into.
    #[test]
    fn default_assets_match_the_build_script() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let version_of = |file: &str, module: &str| {
            let text = std::fs::read_to_string(repo.join(file)).unwrap();
            text.lines()
                .map(str::split_whitespace)
                .filter_map(|mut words| Some((words.next()?.to_owned(), words.next()?.to_owned())))
                .find(|(m, v)| m == module && v.starts_with('v'))
                .map(|(_, v)| v)
                .unwrap()
        };
        let script = std::fs::read_to_string(repo.join("tests/node/build-node.sh")).unwrap();
        let recipe = script
            .lines()
            .find_map(|l| l.strip_prefix("recipe="))
            .unwrap();
        let expected = format!(
            "{}-containerd-{}-cni-{}-r{recipe}",
            version_of("tests/controlplane/go.mod", "k8s.io/kubernetes"),
            version_of("tests/node/go.mod", "github.com/containerd/containerd/v2"),
            version_of(
                "tests/node/go.mod",
                "github.com/containernetworking/plugins"
            ),
        );
        assert_eq!(DEFAULT_NODE_ASSETS, expected);
    }

    /// The constant names the directory the CoreDNS script builds into.
    #[test]
    fn default_dns_assets_match_the_build_script() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/coredns");
        let go_mod = std::fs::read_to_string(dir.join("go.mod")).unwrap();
        let version = go_mod
            .lines()
            .map(|l| {
                l.trim_start_matches("require")
                    .split_whitespace()
                    .collect::<Vec<_>>()
            })
            .find(|w| w.first() == Some(&"github.com/coredns/coredns"))
            .and_then(|w| w.get(1).map(|v| (*v).to_owned()))
            .unwrap();
        let script = std::fs::read_to_string(dir.join("build.sh")).unwrap();
        let recipe = script
            .lines()
            .find_map(|l| l.strip_prefix("recipe="))
            .unwrap();
        assert_eq!(DEFAULT_DNS_ASSETS, format!("{version}-r{recipe}"));
    }

    /// The constant names the directory the images script builds into.
    #[test]
    fn default_images_match_the_build_script() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let script = std::fs::read_to_string(repo.join("tests/node/build-images.sh")).unwrap();
        let recipe = script
            .lines()
            .find_map(|l| l.strip_prefix("recipe="))
            .unwrap();
        assert!(script.contains(r#"out="$cache/images/r$recipe""#));
        assert_eq!(DEFAULT_IMAGES, format!("r{recipe}"));
    }
}
