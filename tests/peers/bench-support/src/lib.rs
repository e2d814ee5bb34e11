//! What the benchmark drivers and Rust peers under `tests/peers` share.
//!
//! ```
//! let args: Vec<String> = ["bench", "--reps", "3", "--peer", "a=/bin/a --x"]
//!     .map(String::from)
//!     .to_vec();
//! assert_eq!(bench_support::parsed(&args, "--reps", 1usize), 3);
//! let peers = bench_support::peers(&args);
//! assert_eq!((peers[0].label.as_str(), peers[0].args.as_slice()), ("a", ["--x".to_string()].as_slice()));
//! assert_eq!(bench_support::median(vec![3.0, 1.0, 2.0]), 2.0);
//! ```

mod args;
mod proc;
mod stats;

pub use args::{Peer, arg, parsed, peers};
pub use proc::{Pid, cpu_secs, now_ns, status_kib};
pub use stats::{median, percentile};
