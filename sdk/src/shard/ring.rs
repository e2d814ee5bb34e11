//! [`Ring`]: which member owns which key, the same on every replica that
//! sees the same member set.
//!
//! A consistent-hash ring with virtual nodes over the 64-bit output of
//! [`hash64`]: each member places [`VNODES`] points on the ring and owns
//! the arc that ends at each of its points. A key is owned by the member of
//! the first point at or after the key's hash (wrapping around).
//!
//! Why a ring and not rendezvous hashing: both move only ~1/N of the keys
//! when one of N members joins or leaves, and both need nothing but the
//! member set. But a ring gives every member a set of *contiguous hash
//! ranges*, which is exactly what a server-side sharded list/watch selects
//! (KEP-5866's `shardRange(field, start, end)`), so one scheme serves both
//! the label-selector mode and the server-side mode. Rendezvous hashing
//! gives every member a scattered set of hashes that no range selector can
//! express. The price is balance: with 128 points per member the keys a
//! join moves are within about ±40 % of the ideal 1/(N+1) (measured in
//! `proptests.rs`), and lookups are a binary search.

use super::hash::hash64;

/// Points each member places on the ring.
pub(crate) const VNODES: u32 = 128;

/// The owner of every key, for one member set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ring {
    /// Members, sorted and deduplicated.
    members: Vec<String>,
    /// `(point, index into members)`, sorted by point.
    points: Vec<(u64, usize)>,
}

impl Ring {
    /// The ring of `members` (order and duplicates do not matter).
    pub(crate) fn new<I, S>(members: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut members: Vec<String> = members.into_iter().map(Into::into).collect();
        members.sort();
        members.dedup();
        let mut points = Vec::with_capacity(members.len() * VNODES as usize);
        for (index, member) in members.iter().enumerate() {
            for vnode in 0..VNODES {
                points.push((hash64(format!("{member}#{vnode}").as_bytes()), index));
            }
        }
        // Ties (astronomically unlikely) break by member name: still the
        // same on every replica.
        points.sort_unstable();
        Self { members, points }
    }

    /// The members, sorted.
    pub(crate) fn members(&self) -> &[String] {
        &self.members
    }

    /// The member owning `key`, or `None` for an empty ring.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn owner(&self, key: &str) -> Option<&str> {
        self.owner_of_hash(hash64(key.as_bytes()))
    }

    /// The member owning the hash `h`.
    pub(crate) fn owner_of_hash(&self, h: u64) -> Option<&str> {
        let at = self.points.partition_point(|(p, _)| *p < h);
        let (_, index) = self.points.get(at).or_else(|| self.points.first())?;
        self.members.get(*index).map(String::as_str)
    }

    /// The inclusive hash ranges `member` owns, in ascending order (what a
    /// server-side range selector would be given).
    pub(crate) fn ranges(&self, member: &str) -> Vec<(u64, u64)> {
        let Some(me) = self.members.iter().position(|m| m == member) else {
            return Vec::new();
        };
        let mut ranges = Vec::new();
        // The arc of point i is (point[i-1], point[i]]; the first point's
        // arc wraps: (last, MAX] ∪ [0, first].
        for (i, (point, owner)) in self.points.iter().enumerate() {
            if *owner != me {
                continue;
            }
            match i.checked_sub(1).and_then(|j| self.points.get(j)) {
                Some((prev, _)) if prev < point => ranges.push((prev + 1, *point)),
                Some(_) => {}
                None => {
                    ranges.push((0, *point));
                    if let Some((last, _)) = self.points.last()
                        && *last < u64::MAX
                    {
                        ranges.push((last + 1, u64::MAX));
                    }
                }
            }
        }
        ranges.sort_unstable();
        ranges
    }

    /// The KEP-5866 shard selector for `member` over `field` (e.g.
    /// `object.metadata.uid`): its ranges, adjacent ones merged, as
    /// `shardRange(field, 'start', 'end')` terms (end exclusive) joined by
    /// ` || `. `None` if the member owns nothing. Valid for server-side
    /// filtering only when keys are hashed as the server hashes them (plain
    /// FNV-1a of the field; see [`super::hash::fnv1a64`]).
    pub(crate) fn shard_selector(&self, member: &str, field: &str) -> Option<String> {
        let mut merged: Vec<(u64, u128)> = Vec::new();
        for (lo, hi) in self.ranges(member) {
            let end = u128::from(hi) + 1;
            match merged.last_mut() {
                Some((_, last_end)) if *last_end == u128::from(lo) => *last_end = end,
                _ => merged.push((lo, end)),
            }
        }
        if merged.is_empty() {
            return None;
        }
        let terms: Vec<String> = merged
            .iter()
            .map(|(lo, end)| format!("shardRange({field}, '0x{lo:016x}', '0x{end:016x}')"))
            .collect();
        Some(terms.join(" || "))
    }
}
