//! The host's routes for a cluster's Service and pod ranges: into the node
//! (where kube-proxy serves ClusterIPs, as on a control-plane node, and the
//! pod bridge holds pod IPs), or `unreachable` where no node serves them.
//! Either way a packet for the ranges never takes the host's default route.

use std::net::Ipv4Addr;
use std::process::Command;

use super::namespaces::run;
use super::network::Ipv4Cidr;
use crate::error::Result;

/// Where the host sends a cluster's ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// Via the node's address on the node link.
    Node { link: String, node: Ipv4Addr },
    /// Nowhere: the kernel refuses at once (`EHOSTUNREACH`).
    Unreachable,
}

/// Host routes for a cluster's ranges, removed on drop. Routes into the
/// node also go with the node link (when the node's namespaces die, even if
/// the process that made them crashed); `unreachable` routes a crashed
/// holder left are replaced by the next cluster in the same slot.
#[derive(Debug)]
pub(crate) struct HostRoutes {
    ranges: Vec<Ipv4Cidr>,
    target: Target,
}

impl HostRoutes {
    /// Routes every range via `node` on the host's end of the node link.
    pub fn into_node(link: &str, node: Ipv4Addr, ranges: &[Ipv4Cidr]) -> Result<Self> {
        Self::add(
            ranges,
            Target::Node {
                link: link.to_owned(),
                node,
            },
        )
    }

    /// Makes every range `unreachable` on the host.
    pub fn unreachable(ranges: &[Ipv4Cidr]) -> Result<Self> {
        Self::add(ranges, Target::Unreachable)
    }

    fn add(ranges: &[Ipv4Cidr], target: Target) -> Result<Self> {
        let mut routes = Self {
            ranges: Vec::with_capacity(ranges.len()),
            target,
        };
        for &range in ranges {
            // `replace`: a route a crashed holder of the slot left is taken over.
            run(
                "routing a cluster range on the host",
                "ip",
                &routes.args("replace", range),
            )?;
            routes.ranges.push(range);
            tracing::debug!(%range, target = ?routes.target, "host route added");
        }
        Ok(routes)
    }

    fn args(&self, verb: &str, range: Ipv4Cidr) -> Vec<String> {
        let mut args = vec!["-4".to_owned(), "route".to_owned(), verb.to_owned()];
        match &self.target {
            Target::Node { link, node } => args.extend([
                range.to_string(),
                "via".to_owned(),
                node.to_string(),
                "dev".to_owned(),
                link.clone(),
            ]),
            Target::Unreachable => args.extend(["unreachable".to_owned(), range.to_string()]),
        }
        args
    }

    /// The ranges routed.
    pub fn ranges(&self) -> &[Ipv4Cidr] {
        &self.ranges
    }
}

impl Drop for HostRoutes {
    fn drop(&mut self) {
        for &range in &self.ranges {
            // Routes into the node are already gone if the link went first.
            let _ = Command::new("ip").args(self.args("del", range)).output();
        }
    }
}

/// Whether the host's main table still holds a route for exactly `range`.
pub(crate) fn route_exists(range: Ipv4Cidr) -> bool {
    Command::new("ip")
        .args(["-4", "route", "show", "exact", &range.to_string()])
        .output()
        .is_ok_and(|o| !o.stdout.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routes(target: Target) -> HostRoutes {
        HostRoutes {
            ranges: Vec::new(),
            target,
        }
    }

    #[test]
    fn node_routes_name_the_link_and_the_node() {
        let range = Ipv4Cidr::new(Ipv4Addr::new(10, 96, 3, 0), 24);
        let r = routes(Target::Node {
            link: "opkit-node3".to_owned(),
            node: Ipv4Addr::new(198, 18, 3, 2),
        });
        assert_eq!(
            r.args("replace", range).join(" "),
            "-4 route replace 10.96.3.0/24 via 198.18.3.2 dev opkit-node3"
        );
        assert_eq!(
            routes(Target::Unreachable).args("del", range).join(" "),
            "-4 route del unreachable 10.96.3.0/24"
        );
    }
}
