//! Loading the connection to a cluster: a kubeconfig file, or the in-cluster
//! service account, with errors that say what to do.
//!
//! ```no_run
//! use opkit::config::{load, ConfigSource};
//!
//! # async fn example() -> Result<(), opkit::config::ConfigError> {
//! // What `--kubeconfig` / `--context` flags would give; `Infer` follows
//! // KUBECONFIG, ~/.kube/config, then the in-cluster service account.
//! let config = load(&ConfigSource::Infer).await?;
//! let config = load(&ConfigSource::File {
//!     path: "deploy/kubeconfig".into(),
//!     context: Some("staging".into()),
//! })
//! .await?;
//! let client = kube::Client::try_from(config).expect("TLS setup");
//! # Ok(()) }
//! ```

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};

/// Where the cluster connection comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ConfigSource {
    /// `KUBECONFIG`, then `~/.kube/config`, then the in-cluster service
    /// account (as kubectl and client-go do).
    #[default]
    Infer,
    /// A kubeconfig file, optionally with a context other than its current one.
    File {
        /// The kubeconfig file.
        path: PathBuf,
        /// The context to use; `None` uses the file's `current-context`.
        context: Option<String>,
    },
}

/// Why no cluster connection could be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The kubeconfig file could not be read.
    #[error("cannot read kubeconfig {path}: {source}; pass --kubeconfig PATH or set KUBECONFIG")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a kubeconfig.
    #[error("kubeconfig {path} is not valid kubeconfig YAML: {detail}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        detail: String,
    },
    /// The requested (or current) context is not in the file.
    #[error("kubeconfig {path} has no context {context:?}; it has: {available}")]
    UnknownContext {
        /// The file.
        path: PathBuf,
        /// The context asked for.
        context: String,
        /// The contexts the file defines.
        available: String,
    },
    /// The file parses but does not describe a usable connection.
    #[error("kubeconfig {path} cannot be used: {detail}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// Neither a kubeconfig nor the in-cluster service account was found.
    #[error(
        "no cluster to connect to: {detail}. Outside a cluster pass --kubeconfig PATH or set \
         KUBECONFIG; inside one, mount the service-account token (automountServiceAccountToken)"
    )]
    NotFound {
        /// What each attempt said.
        detail: String,
    },
}

/// Loads a `kube::Config` from `source`.
pub async fn load(source: &ConfigSource) -> Result<kube::Config, ConfigError> {
    match source {
        ConfigSource::Infer => kube::Config::infer()
            .await
            .map_err(|e| ConfigError::NotFound {
                detail: e.to_string(),
            }),
        ConfigSource::File { path, context } => {
            let kubeconfig = Kubeconfig::read_from(path).map_err(|e| match e {
                KubeconfigError::ReadConfig(source, _) => ConfigError::Read {
                    path: path.clone(),
                    source,
                },
                KubeconfigError::Parse(detail) => ConfigError::Parse {
                    path: path.clone(),
                    detail: detail.to_string(),
                },
                other => ConfigError::Invalid {
                    path: path.clone(),
                    detail: other.to_string(),
                },
            })?;
            let wanted = context
                .clone()
                .or_else(|| kubeconfig.current_context.clone());
            if let Some(wanted) = &wanted
                && !kubeconfig.contexts.iter().any(|c| &c.name == wanted)
            {
                let names: Vec<&str> = kubeconfig
                    .contexts
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect();
                return Err(ConfigError::UnknownContext {
                    path: path.clone(),
                    context: wanted.clone(),
                    available: if names.is_empty() {
                        "no contexts".to_owned()
                    } else {
                        names.join(", ")
                    },
                });
            }
            let options = KubeConfigOptions {
                context: context.clone(),
                ..KubeConfigOptions::default()
            };
            kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|e| ConfigError::Invalid {
                    path: path.clone(),
                    detail: e.to_string(),
                })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(contents: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        std::fs::write(&path, contents).unwrap();
        (dir, path)
    }

    const GOOD: &str = r#"
apiVersion: v1
kind: Config
clusters:
- name: dev
  cluster: {server: "https://127.0.0.1:6443"}
users:
- name: dev
  user: {token: abc}
contexts:
- name: dev
  context: {cluster: dev, user: dev}
current-context: dev
"#;

    async fn load_file(path: PathBuf, context: Option<&str>) -> Result<kube::Config, ConfigError> {
        load(&ConfigSource::File {
            path,
            context: context.map(str::to_owned),
        })
        .await
    }

    #[tokio::test]
    async fn missing_file_names_the_path_and_the_fix() {
        let msg = load_file("/nonexistent/kubeconfig".into(), None)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("cannot read kubeconfig /nonexistent/kubeconfig"),
            "{msg}"
        );
        assert!(msg.contains("--kubeconfig"), "{msg}");
    }

    #[tokio::test]
    async fn garbage_is_a_parse_error() {
        let (_dir, path) = file("clusters: [this is: not: valid");
        let err = load_file(path.clone(), None).await.unwrap_err();
        assert!(matches!(err, ConfigError::Parse { .. }), "{err:?}");
        assert!(err.to_string().contains(&path.display().to_string()));
    }

    #[tokio::test]
    async fn unknown_context_lists_the_available_ones() {
        let (_dir, path) = file(GOOD);
        let msg = load_file(path, Some("prod")).await.unwrap_err().to_string();
        assert!(
            msg.contains("has no context \"prod\"; it has: dev"),
            "{msg}"
        );
    }

    #[tokio::test]
    async fn cluster_without_server_is_invalid() {
        let (_dir, path) = file(&GOOD.replace(r#"{server: "https://127.0.0.1:6443"}"#, "{}"));
        let err = load_file(path, None).await.unwrap_err();
        assert!(matches!(err, ConfigError::Invalid { .. }), "{err:?}");
        assert!(err.to_string().contains("cluster url is missing"), "{err}");
    }

    #[tokio::test]
    async fn good_file_loads() {
        let (_dir, path) = file(GOOD);
        let config = load_file(path, None).await.unwrap();
        assert_eq!(config.cluster_url.to_string(), "https://127.0.0.1:6443/");
    }
}
