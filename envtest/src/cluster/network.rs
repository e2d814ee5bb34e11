//! The cluster's address ranges: each cluster gets its own Service and pod
//! range from its slot, so clusters running side by side never share an IP.

use std::fmt;
use std::net::Ipv4Addr;

/// An IPv4 range: a network address and a prefix length, e.g. `10.96.1.0/24`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Cidr {
    network: Ipv4Addr,
    prefix: u8,
}

impl Ipv4Cidr {
    /// The range of `prefix` bits around `address` (host bits cleared;
    /// prefixes above 32 are taken as 32).
    pub fn new(address: Ipv4Addr, prefix: u8) -> Self {
        let prefix = prefix.min(32);
        Self {
            network: Ipv4Addr::from(u32::from(address) & Self::mask(prefix)),
            prefix,
        }
    }

    fn mask(prefix: u8) -> u32 {
        u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0)
    }

    /// The network address (the range's first address).
    pub fn network(&self) -> Ipv4Addr {
        self.network
    }

    /// The prefix length.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// Whether `ip` is inside the range.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & Self::mask(self.prefix) == u32::from(self.network)
    }

    /// The address `offset` places after the network address (`1` is the
    /// first host); `None` past the end of the range.
    pub fn nth(&self, offset: u32) -> Option<Ipv4Addr> {
        let size = 1u64 << (32 - u32::from(self.prefix));
        (u64::from(offset) < size).then(|| Ipv4Addr::from(u32::from(self.network) + offset))
    }
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// A cluster's Service and pod ranges, picked from its slot (1–250):
/// Services in `10.96.<slot>.0/24` (the `kubernetes` Service at `.1`, cluster
/// DNS at `.10`), pods in `10.244.<slot>.0/24` (the node's bridge at `.1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClusterNetwork {
    pub service: Ipv4Cidr,
    pub pod: Ipv4Cidr,
}

impl ClusterNetwork {
    /// The ranges of slot `index`.
    pub fn for_slot(index: u8) -> Self {
        Self {
            service: Ipv4Cidr::new(Ipv4Addr::new(10, 96, index, 0), 24),
            pod: Ipv4Cidr::new(Ipv4Addr::new(10, 244, index, 0), 24),
        }
    }

    /// The `kubernetes` Service's cluster IP: the range's first host, which
    /// kube-apiserver takes for itself.
    pub fn kubernetes_service_ip(&self) -> Ipv4Addr {
        self.service.nth(1).unwrap_or(self.service.network())
    }

    /// The cluster DNS Service's (`kube-system/kube-dns`) cluster IP: the
    /// tenth address, as kubeadm picks it.
    pub fn dns_service_ip(&self) -> Ipv4Addr {
        self.service.nth(10).unwrap_or(self.service.network())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cidr_clears_host_bits_and_knows_its_members() {
        let cidr = Ipv4Cidr::new(Ipv4Addr::new(10, 96, 7, 33), 24);
        assert_eq!(cidr.to_string(), "10.96.7.0/24");
        assert!(cidr.contains(Ipv4Addr::new(10, 96, 7, 255)));
        assert!(!cidr.contains(Ipv4Addr::new(10, 96, 8, 0)));
        assert_eq!(cidr.nth(255), Some(Ipv4Addr::new(10, 96, 7, 255)));
        assert_eq!(cidr.nth(256), None);
        let all = Ipv4Cidr::new(Ipv4Addr::new(1, 2, 3, 4), 0);
        assert_eq!(all.to_string(), "0.0.0.0/0");
        assert!(all.contains(Ipv4Addr::new(203, 0, 113, 1)));
        assert_eq!(Ipv4Cidr::new(Ipv4Addr::new(1, 2, 3, 4), 40).prefix(), 32);
    }

    #[test]
    fn slots_get_disjoint_ranges() {
        let one = ClusterNetwork::for_slot(1);
        let two = ClusterNetwork::for_slot(2);
        assert_eq!(one.service.to_string(), "10.96.1.0/24");
        assert_eq!(one.pod.to_string(), "10.244.1.0/24");
        assert_eq!(one.kubernetes_service_ip(), Ipv4Addr::new(10, 96, 1, 1));
        assert_eq!(one.dns_service_ip(), Ipv4Addr::new(10, 96, 1, 10));
        for a in [one.service, one.pod] {
            for b in [two.service, two.pod] {
                assert!(!a.contains(b.network()) && !b.contains(a.network()));
            }
        }
    }
}
