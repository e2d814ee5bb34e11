//! [`Liveness`]: which member Leases are fresh, judged as leader election
//! judges its Lease: by when *this* replica last saw a Lease change, never
//! by the timestamps written in it, so clock skew between nodes does not
//! matter.

use std::time::Duration;

use hashbrown::HashMap;
use tokio::time::Instant;

/// Per Lease name: the last resourceVersion seen and when it was first seen.
#[derive(Debug, Default)]
pub(crate) struct Liveness {
    seen: HashMap<String, (String, Instant)>,
}

impl Liveness {
    /// Records the Leases of one list at `now`; Leases no longer listed
    /// are forgotten.
    pub(crate) fn observe<'a>(
        &mut self,
        now: Instant,
        leases: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) {
        let mut next = HashMap::new();
        for (name, version) in leases {
            let at = match self.seen.get(name) {
                Some((seen, at)) if seen == version => *at,
                _ => now,
            };
            next.insert(name.to_owned(), (version.to_owned(), at));
        }
        self.seen = next;
    }

    /// Whether `name` changed within `lease_duration` before `now`. A Lease
    /// seen for the first time counts as fresh for a whole lease duration.
    pub(crate) fn is_fresh(&self, name: &str, now: Instant, lease_duration: Duration) -> bool {
        self.seen
            .get(name)
            .is_some_and(|(_, at)| now.saturating_duration_since(*at) < lease_duration)
    }
}
