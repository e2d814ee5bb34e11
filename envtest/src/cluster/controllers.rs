//! kube-controller-manager and kube-scheduler: run on the host next to the
//! control plane, each with its own client certificate.

use std::path::Path;

use crate::error::Result;
use crate::process::ChildProcess;

use super::assets::NodeAssets;
use super::files::ClusterFiles;

/// How long the node controller waits for a silent kubelet before it marks
/// the node NotReady (the kubelet renews its lease every 2.5 s).
pub(crate) const NODE_MONITOR_GRACE_PERIOD: &str = "16s";

/// The running controllers.
#[derive(Debug)]
pub(crate) struct Controllers {
    pub scheduler: ChildProcess,
    pub controller_manager: ChildProcess,
}

impl Controllers {
    /// Starts kube-controller-manager and kube-scheduler.
    pub fn start(assets: &NodeAssets, files: &ClusterFiles, dir: &Path) -> Result<Self> {
        let controller_manager = ChildProcess::spawn(
            "kube-controller-manager",
            &assets.bin("kube-controller-manager"),
            &controller_manager_args(files),
            dir.join("kube-controller-manager.log"),
        )?;
        let scheduler = ChildProcess::spawn(
            "kube-scheduler",
            &assets.bin("kube-scheduler"),
            &[
                format!("--kubeconfig={}", files.scheduler_kubeconfig.display()),
                "--leader-elect=false".to_owned(),
                "--secure-port=0".to_owned(),
                "--v=1".to_owned(),
            ],
            dir.join("kube-scheduler.log"),
        )?;
        Ok(Self {
            scheduler,
            controller_manager,
        })
    }
}

fn controller_manager_args(files: &ClusterFiles) -> Vec<String> {
    vec![
        format!(
            "--kubeconfig={}",
            files.controller_manager_kubeconfig.display()
        ),
        "--leader-elect=false".to_owned(),
        "--secure-port=0".to_owned(),
        // Each controller acts as its own service account, as in a real cluster.
        "--use-service-account-credentials=true".to_owned(),
        format!(
            "--service-account-private-key-file={}",
            files.service_account_key.display()
        ),
        format!("--root-ca-file={}", files.ca.display()),
        "--cluster-name=opkit".to_owned(),
        "--allocate-node-cidrs=false".to_owned(),
        "--node-monitor-period=2s".to_owned(),
        format!("--node-monitor-grace-period={NODE_MONITOR_GRACE_PERIOD}"),
        "--v=1".to_owned(),
    ]
}
