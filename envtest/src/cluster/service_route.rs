//! Reaching a Service's cluster IP from the host, where the control plane
//! runs: what kube-proxy gives a control-plane node in a real cluster, so
//! the apiserver can call a webhook through its Service.

use std::net::Ipv4Addr;

use super::Cluster;
use super::namespaces::run;
use crate::error::{EnvtestError, Result};

impl Cluster {
    /// Routes `cluster_ip` (a Service's `spec.clusterIP`) from the host into
    /// the node, where kube-proxy forwards it to the Service's endpoints,
    /// as it would on a control-plane node. kube-apiserver resolves a
    /// webhook's `service` reference to the cluster IP (without
    /// `--enable-aggregator-routing`), so with this route it reaches a
    /// webhook served by a pod through its Service.
    ///
    /// The route is a `/32` on the node link, so it goes with the link when
    /// the cluster stops; another cluster on this machine routing the same
    /// IP at the same time is refused (`File exists`). Fails for a cluster
    /// without a node.
    pub fn route_service_ip(&self, cluster_ip: Ipv4Addr) -> Result<()> {
        let (link, node) = self.link_and_node()?;
        run(
            "routing a Service IP into the node",
            "ip",
            &[
                "route".to_owned(),
                "add".to_owned(),
                format!("{cluster_ip}/32"),
                "via".to_owned(),
                node.to_string(),
                "dev".to_owned(),
                link,
            ],
        )?;
        Ok(())
    }

    /// Removes a route made by [`route_service_ip`](Self::route_service_ip):
    /// the host no longer reaches `cluster_ip`.
    pub fn unroute_service_ip(&self, cluster_ip: Ipv4Addr) -> Result<()> {
        let (link, _) = self.link_and_node()?;
        run(
            "removing a Service IP route",
            "ip",
            &[
                "route".to_owned(),
                "del".to_owned(),
                format!("{cluster_ip}/32"),
                "dev".to_owned(),
                link,
            ],
        )?;
        Ok(())
    }

    fn link_and_node(&self) -> Result<(String, Ipv4Addr)> {
        let node = self.node_address.ok_or_else(|| {
            EnvtestError::Unsupported(
                "a cluster started without_node() has no Service network".to_owned(),
            )
        })?;
        let link = self
            .slot
            .lock()
            .ok()
            .and_then(|slot| slot.as_ref().map(|s| s.link_name()))
            .ok_or(EnvtestError::Stopped)?;
        Ok((link, node))
    }
}
