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
//! longer length, so that an add under the plan checks neither; past that
//! mass, see below. The answers are the
//! function's own, bit for bit (a unit test compares them around the mass
//! where a plan stops, and debug builds check every add), so replicas and
//! older releases agree.
//!
//! Past that mass, where a filter that spends its plan to the full spends
//! most of its adds (at 0.1%, 76-89% of the adds of a filter grown to
//! 200,000-4M items; at 1%, 1-12%), the budget left is the lesser, and the
//! lengths are `lengths_for` of it: five divisions in a chain, 10-13% of an
//! add's time. There [`Plans::past_plan`] works the same answer out from
//! the rate left times a scale kept in the plan, with no division: the
//! budget over the quotient's share is `y = 2^-F*`, so with `y = m 2^e`
//! (`1 <= m < 2`) the longer length is `-e` and the chance of the shorter
//! is `m - 1`. Its product is within a ten-millionth of the exact road's
//! (the scale is an `f32`, so that a plan stays 24 bytes), so wherever the
//! answer could turn on less than a millionth (the budget left against
//! the plan, `m` against a power of two, the place's hash against the
//! chance) it answers nothing and the add computes the lengths as before:
//! one add in about 100,000.

use super::block::MAX_F;

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
/// the level says the rank), the mass (in units) below which they are
/// what the schedule gives and the ceiling takes, and past it the scale
/// that turns the rate left into `2^-F*` ([`Plans::past_plan`]). 24 bytes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Plan {
    p: f64,
    holds_below: u64,
    scale: f32,
    level: u8,
    down: u8,
    up: u8,
}

/// How near a power of two, or the chance of the shorter length, a value
/// [`Plans::past_plan`] works out may fall and still decide: about eight
/// times its largest error on the chance (1.2e-7: the `f32` scale's 2^-24
/// on a mantissa below 2, and a few roundings of `f64`).
const MARGIN: f64 = 1e-6;

impl Plan {
    /// `lengths` for `level` (below 255) while the mass is below
    /// `holds_below` (0: never); past it, `scale` is `1 / (per_quotient x
    /// ranks_left x (k + 1))`, by which the rate left is the budget left
    /// over the quotient's share.
    pub(super) fn new(level: u32, Lengths { p, down, up }: Lengths, holds_below: u64, scale: f64) -> Plan {
        Plan { p, holds_below, scale: scale as f32, level: level as u8, down, up }
    }

    /// [`Plans::past_plan`] of this plan.
    fn past(&self, left: f64, u: f64) -> Option<u32> {
        // The plan's own `2^-F*`, from its lengths: `p + 1` is the exact
        // road's `2^up / x` (an exact subtraction undone), so this is
        // `1 / x` for the planned budget to an ulp. Only where the lengths
        // were not clamped (the shorter one less than the longer).
        if u32::from(self.down) + 1 != u32::from(self.up) {
            return None;
        }
        let planned = (1.0 + self.p) * two_to_minus(u32::from(self.up));
        let y = left * f64::from(self.scale);
        // The budget is the lesser of the plan and what is left; near a
        // tie, the exact road says which.
        if !(y > 0.0 && y < planned * (1.0 - MARGIN)) {
            return None;
        }
        let bits = y.to_bits();
        let up = 1023 - ((bits >> 52) & 0x7ff) as i64;
        let m = f64::from_bits(bits & ((1 << 52) - 1) | 1023 << 52);
        let p = m - 1.0;
        let clear = (MARGIN..1.0 - MARGIN).contains(&p) && (u - p).abs() >= MARGIN;
        // `up - 1` and `up` as they are, unclamped (`1..=MAX_F`).
        (clear && (2..=i64::from(MAX_F)).contains(&up)).then(|| (if u < p { up - 1 } else { up }) as u32)
    }
}

/// `2^-n` for `n` in `0..1023`, exactly.
fn two_to_minus(n: u32) -> f64 {
    f64::from_bits(u64::from(1023 - n) << 52)
}

/// The plans of the two ranks a filter's adds are filling (slot: the
/// rank's parity), kept in the directory, so a filter of one block (most
/// per-user keys) pays no byte for them.
#[derive(Clone, Copy, Debug)]
pub(super) struct Plans([Plan; 2]);

impl Default for Plans {
    fn default() -> Plans {
        Plans([Plan { p: 0.0, holds_below: 0, scale: 0.0, level: u8::MAX, down: 0, up: 0 }; 2])
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

    /// Past where [`Plans::lengths`] holds, the fingerprint length of an
    /// entry at `level` (whose plan [`Plans::lengths`] just made or found)
    /// in a block whose place hashes to `u`, when `left` (the rate less the
    /// mass, a probability) leaves a budget below the plan: `lengths_for`
    /// of that budget, picked by `u`, with no division (the file's doc).
    /// `None` where it cannot vouch for the exact road's answer; the
    /// filter's ceiling is the caller's to check, as on that road.
    #[inline]
    pub(super) fn past_plan(&self, level: u32, left: f64, u: f64) -> Option<u32> {
        let slot = &self.0[(level & 1) as usize];
        // As `lengths`: no plan at 255 and past (an empty slot's level).
        if level >= u32::from(u8::MAX) || u32::from(slot.level) != level {
            return None;
        }
        slot.past(left, u)
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
