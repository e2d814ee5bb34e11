//! Priorities and the per-priority FIFO lanes of ready items.

use std::collections::VecDeque;

/// How urgently a queued item is handed to a worker.
///
/// Ready items of a higher priority are always handed out before ready items
/// of a lower one; within one priority the order is FIFO. When an item that is
/// already waiting is added again with a higher priority, it moves up (the
/// higher priority is kept); adding it with a lower priority never demotes it.
///
/// Event handlers enqueue the objects of an initial list or of a resync with
/// [`Priority::Low`] and fresh events with [`Priority::Normal`], so a startup
/// storm never starves a newly created object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Priority {
    /// Background work: objects from an initial list or a periodic resync.
    Low = 0,
    /// Fresh events and requeues (the default).
    #[default]
    Normal = 1,
    /// Work that should jump ahead of every normal item.
    High = 2,
}

impl Priority {
    /// Number of priority levels.
    pub(crate) const COUNT: usize = 3;

    /// Every level, highest first.
    const HIGHEST_FIRST: [Priority; Priority::COUNT] =
        [Priority::High, Priority::Normal, Priority::Low];

    fn lane(self) -> usize {
        self as usize
    }
}

/// One FIFO lane per priority, of `(slot index, id)` elements. The id is the
/// one the slot was queued under, so that an element left behind by a
/// priority upgrade can be recognised as stale and skipped (lazy deletion
/// keeps every operation O(1)).
pub(crate) struct ReadyLanes {
    lanes: [VecDeque<(u32, u32)>; Priority::COUNT],
}

impl ReadyLanes {
    pub(crate) fn new() -> Self {
        Self {
            lanes: [VecDeque::new(), VecDeque::new(), VecDeque::new()],
        }
    }

    pub(crate) fn push(&mut self, priority: Priority, item: u32, id: u32) {
        if let Some(lane) = self.lanes.get_mut(priority.lane()) {
            lane.push_back((item, id));
        }
    }

    /// Pops the oldest element of the highest non-empty lane.
    pub(crate) fn pop(&mut self) -> Option<(u32, u32, Priority)> {
        for priority in Priority::HIGHEST_FIRST {
            if let Some(lane) = self.lanes.get_mut(priority.lane())
                && let Some((item, id)) = lane.pop_front()
            {
                return Some((item, id, priority));
            }
        }
        None
    }

    /// Number of elements, stale ones included.
    pub(crate) fn raw_len(&self) -> usize {
        self.lanes.iter().map(VecDeque::len).sum()
    }

    /// Drops the stale elements (those `is_live` rejects).
    pub(crate) fn retain(&mut self, mut is_live: impl FnMut(u32, u32) -> bool) {
        for lane in &mut self.lanes {
            lane.retain(|&(item, id)| is_live(item, id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_and_default() {
        assert!(Priority::High > Priority::Normal);
        assert!(Priority::Normal > Priority::Low);
        assert_eq!(Priority::default(), Priority::Normal);
    }

    #[test]
    fn higher_lanes_first_fifo_within() {
        let mut lanes = ReadyLanes::new();
        lanes.push(Priority::Low, 11, 1);
        lanes.push(Priority::Normal, 21, 2);
        lanes.push(Priority::Low, 12, 3);
        lanes.push(Priority::High, 31, 4);
        lanes.push(Priority::Normal, 22, 5);
        let order: Vec<_> = std::iter::from_fn(|| lanes.pop().map(|(i, _, _)| i)).collect();
        assert_eq!(order, [31, 21, 22, 11, 12]);
        assert_eq!(lanes.raw_len(), 0);
    }

    #[test]
    fn retain_drops_stale() {
        let mut lanes = ReadyLanes::new();
        lanes.push(Priority::Low, 7, 1);
        lanes.push(Priority::Normal, 7, 2);
        lanes.retain(|_, id| id == 2);
        assert_eq!(lanes.raw_len(), 1);
        assert_eq!(lanes.pop(), Some((7, 2, Priority::Normal)));
    }

    #[test]
    fn ordering_of_levels() {
        assert!(Priority::Low < Priority::Normal && Priority::Normal < Priority::High);
        assert_eq!(Priority::default(), Priority::Normal);
    }
}
