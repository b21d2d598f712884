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
