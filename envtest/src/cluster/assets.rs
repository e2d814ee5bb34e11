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

/// Finds the node assets: `$OPKIT_CLUSTER_ASSETS` when set, else the build
/// cache. A directory counts once `build-node.sh` marked it complete.
pub fn find_node_assets() -> Result<NodeAssets> {
    let (dir, label) = match env::var_os("OPKIT_CLUSTER_ASSETS").filter(|v| !v.is_empty()) {
        Some(dir) => (PathBuf::from(dir), "$OPKIT_CLUSTER_ASSETS"),
        None => {
            let cache = build_cache().ok_or_else(|| EnvtestError::MissingNodeAssets {
                searched: "nowhere ($HOME, OPKIT_CACHE and OPKIT_CLUSTER_ASSETS are all unset)"
                    .to_owned(),
            })?;
            (
                cache.join("cluster").join(DEFAULT_NODE_ASSETS),
                "the opkit build cache",
            )
        }
    };
    if dir.join(".complete").is_file() {
        Ok(NodeAssets { root: dir })
    } else {
        Err(EnvtestError::MissingNodeAssets {
            searched: format!("{} ({label})", dir.display()),
        })
    }
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
    let (dir, label) = match env::var_os("OPKIT_DNS_ASSETS").filter(|v| !v.is_empty()) {
        Some(dir) => (PathBuf::from(dir), "$OPKIT_DNS_ASSETS"),
        None => {
            let cache = build_cache().ok_or_else(|| EnvtestError::MissingDnsAssets {
                searched: "nowhere ($HOME, OPKIT_CACHE and OPKIT_DNS_ASSETS are all unset)"
                    .to_owned(),
            })?;
            (
                cache.join("coredns").join(DEFAULT_DNS_ASSETS),
                "the opkit build cache",
            )
        }
    };
    if dir.join(".complete").is_file() {
        Ok(DnsAssets { root: dir })
    } else {
        Err(EnvtestError::MissingDnsAssets {
            searched: format!("{} ({label})", dir.display()),
        })
    }
}

/// Finds the directory of image archives: `$OPKIT_CLUSTER_IMAGES` when set,
/// else `images/<DEFAULT_IMAGES>` in the build cache. A directory counts once
/// `build-images.sh` marked it complete.
pub fn find_images_dir() -> Result<PathBuf> {
    let (dir, label) = match env::var_os("OPKIT_CLUSTER_IMAGES").filter(|v| !v.is_empty()) {
        Some(dir) => (PathBuf::from(dir), "$OPKIT_CLUSTER_IMAGES"),
        None => {
            let cache = build_cache().ok_or_else(|| EnvtestError::MissingImages {
                searched: "nowhere ($HOME, OPKIT_CACHE and OPKIT_CLUSTER_IMAGES are all unset)"
                    .to_owned(),
            })?;
            (
                cache.join("images").join(DEFAULT_IMAGES),
                "the opkit build cache",
            )
        }
    };
    if dir.join(".complete").is_file() {
        Ok(dir)
    } else {
        Err(EnvtestError::MissingImages {
            searched: format!("{} ({label})", dir.display()),
        })
    }
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
