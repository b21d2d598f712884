//! What the CPU runs, looked up once per process: the kernels that use a
//! newer instruction set than the build's baseline (x86-64) ask here before
//! they run (`xf/kernel.rs` keeps the XF lookups' own choice, which a
//! variable can lower).

/// Whether the CPU runs AVX2 (`cpuid` once: it traps to the hypervisor in
/// a virtual machine).
#[cfg(target_arch = "x86_64")]
#[inline]
pub fn has_avx2() -> bool {
    static AVX2: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVX2.get_or_init(|| std::arch::is_x86_feature_detected!("avx2"))
}

/// Who made the CPU and which family and model it is (`cpuid` leaves 0 and
/// 1, read once): what a kernel that some CPUs run badly asks.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signature {
    /// The vendor string's three words (`ebx`, `edx`, `ecx`): [`AMD`],
    /// [`HYGON`], [`INTEL`] or another.
    pub vendor: (u32, u32, u32),
    /// The family, the extended family added when the base is 0xf.
    pub family: u32,
    /// The model, the extended model on top.
    pub model: u32,
}

/// "AuthenticAMD".
#[cfg(target_arch = "x86_64")]
pub const AMD: (u32, u32, u32) = (0x6874_7541, 0x6974_6e65, 0x444d_4163);
/// "HygonGenuine".
#[cfg(target_arch = "x86_64")]
pub const HYGON: (u32, u32, u32) = (0x6f67_7948, 0x6e65_476e, 0x656e_6975);
/// "GenuineIntel".
#[cfg(target_arch = "x86_64")]
pub const INTEL: (u32, u32, u32) = (0x756e_6547, 0x4965_6e69, 0x6c65_746e);

/// This CPU's [`Signature`].
#[cfg(target_arch = "x86_64")]
pub fn signature() -> Signature {
    static SIGNATURE: std::sync::OnceLock<Signature> = std::sync::OnceLock::new();
    *SIGNATURE.get_or_init(|| {
        use std::arch::x86_64::__cpuid;
        // `__cpuid` is safe from Rust 1.94 on, `unsafe` before (the MSRV).
        // SAFETY: leaves 0 (vendor) and 1 (family, model) exist on every x86-64.
        #[allow(unused_unsafe)]
        let (vendor, leaf1) = unsafe { (__cpuid(0), __cpuid(1)) };
        let base = (leaf1.eax >> 8) & 0xf;
        Signature {
            vendor: (vendor.ebx, vendor.edx, vendor.ecx),
            family: if base == 0xf { base + ((leaf1.eax >> 20) & 0xff) } else { base },
            model: ((leaf1.eax >> 4) & 0xf) | ((leaf1.eax >> 12) & 0xf0),
        }
    })
}
