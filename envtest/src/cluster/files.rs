//! The key material and kubeconfigs of a cluster's components, written into
//! the cluster's directory.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use crate::error::{EnvtestError, Result};
use crate::kubeconfig::{self, Credentials};
use crate::pki::Pki;

use super::node_name::NODE_NAME;

/// Paths of the files the components read.
#[derive(Debug)]
pub(crate) struct ClusterFiles {
    pub ca: PathBuf,
    pub service_account_key: PathBuf,
    pub apiserver_kubelet_client_cert: PathBuf,
    pub apiserver_kubelet_client_key: PathBuf,
    pub kubelet_serving_cert: PathBuf,
    pub kubelet_serving_key: PathBuf,
    pub controller_manager_kubeconfig: PathBuf,
    pub scheduler_kubeconfig: PathBuf,
    pub kubelet_kubeconfig: PathBuf,
    pub proxy_kubeconfig: PathBuf,
}

pub(crate) fn write(path: &Path, contents: &str) -> Result<()> {
    std::fs::write(path, contents).map_err(|source| EnvtestError::Io {
        what: "writing a cluster file",
        path: path.to_owned(),
        source,
    })
}

impl ClusterFiles {
    /// Writes the CA, the service-account key, the certificate kube-apiserver
    /// shows the kubelet, and the kubelet's serving certificate for `node`.
    pub fn write_certificates(dir: &Path, pki: &Pki, node: Ipv4Addr) -> Result<Self> {
        let files = Self {
            ca: dir.join("ca.crt"),
            service_account_key: dir.join("sa.key"),
            apiserver_kubelet_client_cert: dir.join("apiserver-kubelet-client.crt"),
            apiserver_kubelet_client_key: dir.join("apiserver-kubelet-client.key"),
            kubelet_serving_cert: dir.join("kubelet.crt"),
            kubelet_serving_key: dir.join("kubelet.key"),
            controller_manager_kubeconfig: dir.join("kube-controller-manager.kubeconfig"),
            scheduler_kubeconfig: dir.join("kube-scheduler.kubeconfig"),
            kubelet_kubeconfig: dir.join("kubelet.kubeconfig"),
            proxy_kubeconfig: dir.join("kube-proxy.kubeconfig"),
        };
        write(&files.ca, &pki.ca_pem)?;
        write(&files.service_account_key, &pki.service_account_key_pem)?;
        let (cert, key) =
            pki.client_certificate("kube-apiserver-kubelet-client", &["system:masters"])?;
        write(&files.apiserver_kubelet_client_cert, &cert)?;
        write(&files.apiserver_kubelet_client_key, &key)?;
        let (cert, key) =
            pki.serving_certificate(NODE_NAME, &[node.to_string(), NODE_NAME.to_owned()])?;
        write(&files.kubelet_serving_cert, &cert)?;
        write(&files.kubelet_serving_key, &key)?;
        Ok(files)
    }

    /// Writes a kubeconfig for each component, with its own client
    /// certificate, pointing at `server`.
    pub fn write_kubeconfigs(&self, pki: &Pki, server: &str) -> Result<()> {
        let node_user = format!("system:node:{NODE_NAME}");
        let identities: [(&Path, &str, &[&str]); 4] = [
            (
                &self.controller_manager_kubeconfig,
                "system:kube-controller-manager",
                &[],
            ),
            (&self.scheduler_kubeconfig, "system:kube-scheduler", &[]),
            (&self.kubelet_kubeconfig, &node_user, &["system:nodes"]),
            (&self.proxy_kubeconfig, "system:kube-proxy", &[]),
        ];
        for (path, user, groups) in identities {
            let (cert, key) = pki.client_certificate(user, groups)?;
            let config = kubeconfig::build(
                server,
                &pki.ca_pem,
                Credentials::Certificate {
                    cert_pem: &cert,
                    key_pem: &key,
                },
                None,
            );
            let text = kubeconfig::to_json(&config)
                .map_err(|e| EnvtestError::Kubeconfig(format!("serializing: {e}")))?;
            write(path, &text)?;
        }
        Ok(())
    }
}
