//! The timer heap behind `add_after` and the per-key throttle.
//!
//! A min-heap keyed by deadline. An entry names a slot of the queue and
//! carries an id; the slot records which id is current, so superseded
//! entries (an earlier `add_after` won, or the slot was reused) are
//! recognised as stale when they surface and are skipped. Nothing polls: the
//! queue's getters sleep until [`TimerHeap::next_deadline`].

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use tokio::time::Instant;

/// One scheduled wake-up for `item`.
pub(crate) struct Timer<T> {
    pub(crate) at: Instant,
    pub(crate) id: u32,
    pub(crate) item: T,
}

impl<T> PartialEq for Timer<T> {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at && self.id == other.id
    }
}

impl<T> Eq for Timer<T> {}

impl<T> PartialOrd for Timer<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for Timer<T> {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest deadline;
    /// ties are broken by id, i.e. by insertion order.
    fn cmp(&self, other: &Self) -> Ordering {
        other.at.cmp(&self.at).then_with(|| other.id.cmp(&self.id))
    }
}

/// Min-heap of timers, earliest deadline first.
pub(crate) struct TimerHeap<T> {
    heap: BinaryHeap<Timer<T>>,
}

impl<T> TimerHeap<T> {
    pub(crate) fn new() -> Self {
        Self {
            heap: BinaryHeap::new(),
        }
    }

    pub(crate) fn push(&mut self, at: Instant, id: u32, item: T) {
        self.heap.push(Timer { at, id, item });
    }

    /// The earliest deadline (possibly of a stale entry: waking for it is harmless).
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.heap.peek().map(|t| t.at)
    }

    /// Pops the earliest timer if it is due at `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<Timer<T>> {
        if self.heap.peek()?.at <= now {
            self.heap.pop()
        } else {
            None
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    /// Keeps only the timers `is_live` accepts (used to drop stale entries).
    pub(crate) fn retain(&mut self, is_live: impl FnMut(&Timer<T>) -> bool) {
        self.heap.retain(is_live);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn pops_earliest_first_then_by_insertion() {
        let t0 = Instant::now();
        let mut heap = TimerHeap::new();
        heap.push(t0 + Duration::from_millis(30), 1, "c");
        heap.push(t0 + Duration::from_millis(10), 2, "a");
        heap.push(t0 + Duration::from_millis(10), 3, "b");
        heap.push(t0 + Duration::from_millis(20), 4, "x");
        assert_eq!(heap.next_deadline(), Some(t0 + Duration::from_millis(10)));
        assert!(heap.pop_due(t0).is_none());
        let now = t0 + Duration::from_millis(20);
        let due: Vec<_> = std::iter::from_fn(|| heap.pop_due(now).map(|t| t.item)).collect();
        assert_eq!(due, ["a", "b", "x"]);
        assert_eq!(heap.len(), 1);
        heap.retain(|t| t.item != "c");
        assert!(heap.is_empty());
        assert_eq!(heap.next_deadline(), None);
    }
}
