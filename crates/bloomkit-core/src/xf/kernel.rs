//! The bit instructions a block's rank and select run on, chosen once per
//! process from what the CPU has.
//!
//! Why: the release build targets baseline x86-64, which has no `popcnt`,
//! so every rank is a dozen instructions of software popcount and every
//! select a broadword sequence of two dozen; a lookup does two ranks and a
//! select or two (`block.rs`'s `run_of`). Building for a newer CPU would
//! lock out older servers, so the lookups are compiled twice more, inside
//! functions with `#[target_feature]`, and the one the CPU can run is
//! picked here. `pdep` (BMI2) makes a select two instructions, but AMD
//! before Zen 3 (family 0x17 and older) and Hygon (0x18) run it in
//! microcode, some 250 cycles, slower than the broadword select: those CPUs
//! get `popcnt` alone.
//!
//! `BLOOMKIT_XF_KERNEL=portable` or `=popcnt` asks for less than the CPU
//! has (for benchmarks: every kernel answers the same); anything more than
//! the CPU has is never chosen.

use std::sync::OnceLock;

/// What a block's lookups are compiled for, from least to most.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kernel {
    /// Baseline instructions: software popcounts, the broadword select.
    Portable,
    /// `popcnt`, `lzcnt`, `tzcnt` (x86-64 since about 2013), the
    /// broadword select.
    Popcnt,
    /// And BMI2's `pdep`: a select is `tzcnt(pdep(1 << k, x))`.
    Pdep,
}

impl Kernel {
    /// The kernel this process uses: the CPU's best unless the
    /// environment asked for less, decided on the first call.
    #[inline]
    pub fn get() -> Kernel {
        static CHOSEN: OnceLock<Kernel> = OnceLock::new();
        *CHOSEN.get_or_init(|| Kernel::chosen(std::env::var("BLOOMKIT_XF_KERNEL").ok().as_deref()))
    }

    /// Its name, as `BLOOMKIT_XF_KERNEL` takes it and `INFO bf` says it.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Portable => "portable",
            Kernel::Popcnt => "popcnt",
            Kernel::Pdep => "pdep",
        }
    }

    /// What the environment's `BLOOMKIT_XF_KERNEL` makes of the CPU's best.
    fn chosen(asked: Option<&str>) -> Kernel {
        let best = Kernel::detected();
        match asked {
            Some("portable") => Kernel::Portable,
            Some("popcnt") => best.min(Kernel::Popcnt),
            _ => best,
        }
    }

    /// The most this CPU runs well, found on the first call (`cpuid`
    /// traps to the hypervisor in a virtual machine: microseconds).
    pub fn detected() -> Kernel {
        static DETECTED: OnceLock<Kernel> = OnceLock::new();
        *DETECTED.get_or_init(Kernel::detect)
    }

    fn detect() -> Kernel {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if has!("popcnt") && has!("lzcnt") && has!("bmi1") {
                return if has!("bmi2") && !slow_pdep() { Kernel::Pdep } else { Kernel::Popcnt };
            }
        }
        Kernel::Portable
    }
}

/// AMD before Zen 3 (family 0x19), and Hygon's Dhyana (Zen 1, family
/// 0x18), run `pdep` in microcode.
#[cfg(target_arch = "x86_64")]
fn slow_pdep() -> bool {
    use crate::common::cpu::{signature, AMD, HYGON};
    let s = signature();
    (s.vendor == AMD || s.vendor == HYGON) && s.family < 0x19
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_asks_for_less_never_more() {
        let best = Kernel::detected();
        assert_eq!(Kernel::chosen(None), best);
        assert_eq!(Kernel::chosen(Some("pdep")), best);
        assert_eq!(Kernel::chosen(Some("portable")), Kernel::Portable);
        assert_eq!(Kernel::chosen(Some("popcnt")), best.min(Kernel::Popcnt));
        assert!(Kernel::get() <= best);
        for k in [Kernel::Portable, Kernel::Popcnt, Kernel::Pdep] {
            assert_eq!(Kernel::chosen(Some(k.name())), best.min(k), "{k:?} by its name");
        }
    }
}
