//! The fingerprint lengths adds take, worked out once per rank rather than
//! once per add.
//!
//! Why: [`fingerprint_bits`](super::filter::fingerprint_bits) is a chain of
//! floating-point divisions (the rank's planned budget, the budget left by
//! the filter's mass, the lengths either side of the exact one and the
//! chance of the shorter), 6-8% of an insert's time in a profile. Its
//! answer changes with the mass only once the mass passes the point where
//! what is left of the rate, shared over the ranks still to come, is less
//! than the plan. Past the first rank (whose plan is what is left at mass
//! 0: a filter laid out large, whose blocks all start at the first level,
//! keeps computing there), an honest filter is far below that point for
//! most of its life. So a filter of more than one block keeps, for the two
//! levels its adds are filling (blocks are at two depths at a time, and the
//! slot is the level's parity; a third depth at once, rare, makes two
//! levels take turns in a slot), the lengths of the planned budget and the mass
//! below which they hold (worked out by `filter.rs`'s `plan_of`), which is
//! also below where the filter's ceiling (its rate as a mass) would take a
//! longer length, so that an add under the plan checks neither; an add
//! past that mass computes the lengths as before. The answers are the
//! function's own, bit for bit (a unit test compares them around the mass
//! where a plan stops, and debug builds check every add), so replicas and
//! older releases agree.

/// A fingerprint length's two candidates for one budget: `down` bits for
/// blocks whose place hashes below `p`, `up` for the others (both the same
/// length when the budget leaves no choice).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Lengths {
    pub p: f64,
    pub down: u8,
    pub up: u8,
}

impl Lengths {
    /// The length for a block whose place hashes to `u`.
    #[inline]
    pub(super) fn pick(&self, u: f64) -> u32 {
        u32::from(if u < self.p { self.down } else { self.up })
    }
}

/// The lengths planned for entries at `level` (`u8::MAX`: no plan yet;
/// the level says the rank), and the mass (in units) below which they are
/// what the schedule gives and the ceiling takes. 24 bytes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Plan {
    p: f64,
    holds_below: u64,
    level: u8,
    down: u8,
    up: u8,
}

impl Plan {
    /// `lengths` for `level` (below 255) while the mass is below
    /// `holds_below` (0: never).
    pub(super) fn new(level: u32, Lengths { p, down, up }: Lengths, holds_below: u64) -> Plan {
        Plan { p, holds_below, level: level as u8, down, up }
    }
}

/// The plans of the two ranks a filter's adds are filling (slot: the
/// rank's parity), kept in the directory, so a filter of one block (most
/// per-user keys) pays no byte for them.
#[derive(Clone, Copy, Debug)]
pub(super) struct Plans([Plan; 2]);

impl Default for Plans {
    fn default() -> Plans {
        Plans([Plan { p: 0.0, holds_below: 0, level: u8::MAX, down: 0, up: 0 }; 2])
    }
}

impl Plans {
    /// The lengths at `level` for a filter whose mass is `mass` units, if
    /// its plan (made by `plan` the first time) holds there; `None`:
    /// compute them.
    #[inline]
    pub(super) fn lengths(&mut self, level: u32, mass: u64, plan: impl FnOnce() -> Plan) -> Option<Lengths> {
        if level >= u32::from(u8::MAX) {
            return None;
        }
        let slot = &mut self.0[(level & 1) as usize];
        if u32::from(slot.level) != level {
            *slot = plan();
        }
        (mass < slot.holds_below).then_some(Lengths { p: slot.p, down: slot.down, up: slot.up })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_small() {
        // Counted in every directory's bytes (`directory_bytes`).
        assert_eq!(std::mem::size_of::<Plans>(), 48);
    }
}
