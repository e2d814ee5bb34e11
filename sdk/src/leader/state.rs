//! [`LeaderState`]: where this replica stands in the election.

/// Where this replica stands in the election.
///
/// `Standby → Leading → Lost` or `→ Stopped`; `Lost` and `Stopped` are
/// final: an elector that lost its lease does not try again (as client-go's
/// `Run` returns), so the process can exit and be restarted with clean state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LeaderState {
    /// Not leading; trying to acquire the lease every retry period.
    Standby,
    /// This replica holds the lease and may act.
    Leading,
    /// This replica led but could not renew before its renew deadline, or saw
    /// another holder: it stopped acting before the lease could be taken.
    Lost,
    /// The elector was shut down (the lease released if configured).
    Stopped,
}

impl LeaderState {
    /// `true` only in [`Leading`](Self::Leading).
    pub fn is_leading(self) -> bool {
        self == Self::Leading
    }

    /// `true` in [`Lost`](Self::Lost) and [`Stopped`](Self::Stopped): the
    /// elector will not change state again.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Lost | Self::Stopped)
    }
}
