//! The node's name: what its kubelet registers, its serving certificate
//! names and its client identity (`system:node:<name>`) carries.

/// The node's name.
pub const NODE_NAME: &str = "opkit-node";
