//! XF beside the Rust filters that do the same job, in one process (issue 48,
//! DESIGN-NEXT.md 4.2): the baseline every change to XF's blocks is judged by.
//!
//! Why in one process, and why these rows: the server's command overhead hides
//! most of a filter's per-item work, so the work itself is measured here, with
//! the same items, the same `Hash` path (each filter hashes a `u64` its own
//! way, as its users would call it) and the same allocator for every row:
//! - XF with its defaults (no size declared: 100 items, growing);
//! - qfilter 0.3, a rank-select quotient filter, resizeable, told the largest
//!   count of the run as its maximum (its best case: it sizes its remainders
//!   for that count) and starting at the same 100 items as XF;
//! - growable-bloom-filter, a scalable Bloom filter starting at 100 items;
//! - fastbloom sized exactly for the count (the floor: no growth, no deletes).
//!
//! Time is thread CPU time (`CLOCK_THREAD_CPUTIME_ID`: a shared machine's
//! other work does not count), per item, for inserts, lookups of items in
//! (hits) and of items never added (misses); runs are interleaved (every row
//! once, then again) and reported as medians with same-run ratios to qfilter.
//! Memory is what one counting allocator says each filter holds, at 16
//! points per doubling as it grows, with the mean and the worst reported, and
//! the peak during growth (a filter that doubles by copying holds both). The
//! same growth times the inserts between points and a sample of hits and
//! misses at each point: speed over the whole range, mean and worst, beside
//! the one size the first table measures.
//!
//! Batch columns take the items as `XF.MADD` / `XF.MEXISTS` and the client's
//! in-process filter do: XF hashes a chunk at a time in vector lanes
//! (`hash_chunks`), then looks up or adds with later items' loads started
//! early. A second table looks up XF and qfilter given hashes made before the
//! clock starts: a lookup's own work apart from its hash (XF's keyed
//! SipHash-1-3, qfilter's unkeyed foldhash), which says how much of the
//! distance to qfilter any cheaper hash could take (DESIGN-NEXT.md 4.13).

use std::alloc::{GlobalAlloc, Layout, System};
use std::hash::{BuildHasher, Hasher};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

#[path = "../items.rs"]
mod items;
use items::items;

use bloomkit_core::common::memory::Limits;
use bloomkit_core::xf::{Hashing, Seed, XfDefaults, XfFilter, XfParams};

// ---- the counting allocator ----

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let now = LIVE.fetch_add(by, Relaxed) + by;
    PEAK.fetch_max(now, Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        System.dealloc(p, layout);
        LIVE.fetch_sub(layout.size(), Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let q = System.realloc(p, layout, new_size);
        if !q.is_null() {
            LIVE.fetch_sub(layout.size(), Relaxed);
            grew(new_size);
        }
        q
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> usize {
    LIVE.load(Relaxed)
}

fn cpu_seconds() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid clock id and a pointer to a timespec we own.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

// ---- the filters, behind one small trait ----

/// One filter under test. Static dispatch: each row is monomorphised.
trait Subject {
    fn insert(&mut self, item: u64);
    fn contains(&self, item: u64) -> bool;
    /// How many of `items` are (probably) in, as a batch command asks
    /// (XF.MEXISTS): one by one unless the filter has a batch path.
    fn count_in(&self, items: &[u64]) -> usize {
        items.iter().filter(|&&x| self.contains(black_box(x))).count()
    }
    /// Adds `items` as a batch command does (XF.MADD).
    fn insert_batch(&mut self, items: &[u64]) {
        items.iter().for_each(|&x| self.insert(x));
    }
    /// Hits and misses (ns per item) with every item's hash computed
    /// before the clock starts, for the filters whose API takes a hash:
    /// the lookup's own work, apart from the hash (which for XF is a keyed
    /// SipHash-1-3 and for qfilter an unkeyed foldhash). `false_hits`: how
    /// many of `absent` the item API found, which the hashes must find too.
    fn lookups_hashed(&self, _added: &[u64], _absent: &[u64], _false_hits: usize) -> Option<(f64, f64)> {
        None
    }
}

/// [`Subject::lookups_hashed`] over hashes made by `hash`: ns per item for
/// `added`'s hits and `absent`'s misses, checked against the item API's
/// answers (every hit, and its `false_hits`), so that both roads look up
/// the same positions.
fn time_hashed<H: Copy>(
    (added, absent, false_hits): (&[u64], &[u64], usize),
    hash: impl Fn(u64) -> H,
    contains: impl Fn(H) -> bool,
) -> (f64, f64) {
    let (hits, misses): (Vec<H>, Vec<H>) =
        (added.iter().map(|&x| hash(x)).collect(), absent.iter().map(|&x| hash(x)).collect());
    let t0 = cpu_seconds();
    let found = hits.iter().filter(|&&h| contains(black_box(h))).count();
    let t1 = cpu_seconds();
    let false_found = misses.iter().filter(|&&h| contains(black_box(h))).count();
    let t2 = cpu_seconds();
    assert_eq!(found, added.len(), "a filter lost an item given its hash");
    assert_eq!(false_found, false_hits, "hashes answered otherwise than the items");
    ((t1 - t0) * 1e9 / added.len() as f64, (t2 - t1) * 1e9 / absent.len() as f64)
}

struct Xf(XfFilter);

/// An item's bytes as `Hash` writes a `u64` (in native order: SipHash's
/// `write_u64` reads `to_le` of it as bytes), so that a batch's hashes are
/// `hash_of`'s (the answers' check in [`time_subject`] would say if not).
fn item_bytes(x: &u64) -> &[u8] {
    // SAFETY: a `u64` is 8 initialised bytes, borrowed for as long as `x`.
    unsafe { std::slice::from_raw_parts((x as *const u64).cast::<u8>(), 8) }
}
impl Subject for Xf {
    fn insert(&mut self, item: u64) {
        let h = self.0.hash_of(&item);
        self.0.insert_hash(h, Limits::NONE).expect("XF refused an insert without limits");
    }
    fn contains(&self, item: u64) -> bool {
        self.0.contains_hash(self.0.hash_of(&item))
    }
    /// As XF.MEXISTS runs a batch: the items hashed a chunk at a time
    /// (`hash_chunks`: SipHash-1-3 in vector lanes, the same hashes as
    /// `hash_of`, which the answers' check below relies on), then looked
    /// up with later items' loads started early.
    fn count_in(&self, items: &[u64]) -> usize {
        let mut n = 0;
        let hashing = self.0.hashing();
        let looked: Result<(), ()> = hashing.hash_chunks(black_box(items), item_bytes, |_, _, hashes| {
            self.0.contains_each(hashes, |found| n += usize::from(found));
            Ok(())
        });
        looked.expect("lookups do not fail");
        n
    }
    /// As XF.MADD runs a batch: hashed as [`Subject::count_in`] does, then
    /// all or nothing, through an undo log, each add asking for the block
    /// of an item a few places on.
    fn insert_batch(&mut self, items: &[u64]) {
        let hashing = self.0.hashing();
        let mut batch = self.0.batch();
        let added: Result<(), ()> = hashing.hash_chunks(black_box(items), item_bytes, |_, _, hashes| {
            for (i, &h) in hashes.iter().enumerate() {
                batch.filter().prefetch_for(hashes, i);
                batch.add_occurrence(h, Limits::NONE).expect("XF refused an insert without limits");
            }
            Ok(())
        });
        added.expect("adds without limits do not fail");
        batch.commit();
    }
    fn lookups_hashed(&self, added: &[u64], absent: &[u64], false_hits: usize) -> Option<(f64, f64)> {
        let f = &self.0;
        Some(time_hashed((added, absent, false_hits), |x| f.hash_of(&x), |h| f.contains_hash(h)))
    }
}

/// qfilter, hashing with `S` (its own foldhash, or [`XfKeyed`]); the
/// second field hashes for [`Subject::lookups_hashed`] as the filter does.
struct Quotient<S = qfilter::StableBuildHasher>(qfilter::Filter<Box<[u8]>, S>, S);
impl<S: BuildHasher + Clone> Subject for Quotient<S> {
    fn insert(&mut self, item: u64) {
        self.0.insert(item).expect("qfilter refused an insert below its maximum");
    }
    fn contains(&self, item: u64) -> bool {
        self.0.contains(item)
    }
    fn lookups_hashed(&self, added: &[u64], absent: &[u64], false_hits: usize) -> Option<(f64, f64)> {
        let f = &self.0;
        let hash = |x: u64| self.1.hash_one(x);
        Some(time_hashed((added, absent, false_hits), hash, |h| f.contains_fingerprint(h)))
    }
}

/// Hashes as XF does an item: SipHash-1-3 with 128 bits out, keyed by a
/// random secret (`Hashing::hash`, the road of `XF.EXISTS`), of which qfilter
/// takes the low 64 bits. qfilter with it is what qfilter's lookups cost
/// under XF's keyed hash: the hash's share of the distance, measured
/// rather than added up (DESIGN-NEXT.md 4.13).
#[derive(Clone, Copy)]
struct XfKeyed(Hashing);

/// [`XfKeyed`]'s hasher: the bytes `Hash` writes (a `u64`'s eight), hashed
/// at `finish`.
struct XfKeyedHasher {
    hashing: Hashing,
    bytes: [u8; 16],
    len: usize,
}

impl BuildHasher for XfKeyed {
    type Hasher = XfKeyedHasher;
    fn build_hasher(&self) -> XfKeyedHasher {
        XfKeyedHasher { hashing: self.0, bytes: [0; 16], len: 0 }
    }
}

impl Hasher for XfKeyedHasher {
    fn write(&mut self, bytes: &[u8]) {
        let end = self.len + bytes.len();
        self.bytes.get_mut(self.len..end).expect("items of at most 16 bytes").copy_from_slice(bytes);
        self.len = end;
    }
    fn finish(&self) -> u64 {
        self.hashing.hash(&self.bytes[..self.len]).0 as u64
    }
}

struct Growable(growable_bloom_filter::GrowableBloom);
impl Subject for Growable {
    fn insert(&mut self, item: u64) {
        self.0.insert(item);
    }
    fn contains(&self, item: u64) -> bool {
        self.0.contains(item)
    }
}

struct Sized(fastbloom::BloomFilter);
impl Subject for Sized {
    fn insert(&mut self, item: u64) {
        self.0.insert(&item);
    }
    fn contains(&self, item: u64) -> bool {
        self.0.contains(&item)
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Row {
    Xf,
    Qfilter,
    QfilterKeyed,
    Growable,
    Fastbloom,
}

const ROWS: [Row; 5] = [Row::Xf, Row::Qfilter, Row::QfilterKeyed, Row::Growable, Row::Fastbloom];
/// Where the growing filters start: XF's default capacity.
const START: u64 = 100;

impl Row {
    fn name(self) -> &'static str {
        match self {
            Row::Xf => "XF (defaults, growing)",
            Row::Qfilter => "qfilter 0.3 (resizeable, told the maximum)",
            Row::QfilterKeyed => "qfilter-keyed: qfilter hashing as XF (keyed SipHash-1-3, 128 bits)",
            Row::Growable => "growable-bloom-filter 2.1",
            Row::Fastbloom => "fastbloom 0.17 (sized exactly)",
        }
    }
}

fn xf(rate: f64) -> Xf {
    xf_seeded(rate, Seed::random())
}

/// [`xf`] hashing with `seed` (the secrets `--secrets` grows XF under).
fn xf_seeded(rate: f64, seed: Seed) -> Xf {
    let params = XfParams { error_rate: rate, ..XfDefaults::BLOOMKIT.params() };
    Xf(XfFilter::with_seed(params, seed, Limits::NONE).expect("XF with its defaults"))
}

fn quotient(rate: f64, max: u64) -> Quotient {
    Quotient(
        qfilter::Filter::new_resizeable(START, max, rate).expect("qfilter parameters"),
        qfilter::StableBuildHasher,
    )
}

fn quotient_keyed(rate: f64, max: u64) -> Quotient<XfKeyed> {
    let keyed = XfKeyed(Hashing::Keyed(Seed::random()));
    let f = qfilter::Filter::new_resizeable_with_hasher(START, max, rate, keyed).expect("qfilter parameters");
    Quotient(f, keyed)
}

fn growable(rate: f64) -> Growable {
    Growable(growable_bloom_filter::GrowableBloom::new(rate, START as usize))
}

fn sized(rate: f64, n: u64) -> Sized {
    Sized(fastbloom::BloomFilter::with_false_pos(rate).expected_items(n as usize))
}

// ---- time ----

/// One row's run: nanoseconds per item for inserts, hits and misses, and
/// the share of misses answered "present".
#[derive(Clone, Copy, Default)]
struct Timing {
    insert: f64,
    hit: f64,
    miss: f64,
    /// Inserts, hits and misses in batches of [`BATCH`].
    batch_insert: f64,
    batch_hit: f64,
    batch_miss: f64,
    fpr: f64,
    /// [`Subject::lookups_hashed`], where the filter has it.
    hashed: Option<(f64, f64)>,
}

/// Items per batch lookup (a typical XF.MEXISTS).
const BATCH: usize = 100;

/// `s` takes the items one by one, `b` (a filter made alike) in batches.
fn time_subject<S: Subject>(mut s: S, mut b: S, added: &[u64], absent: &[u64]) -> Timing {
    let per_item = |t: f64, n: usize| t * 1e9 / n as f64;
    let t = cpu_seconds();
    added.chunks(BATCH).for_each(|c| b.insert_batch(c));
    let batch_insert = per_item(cpu_seconds() - t, added.len());
    drop(b);
    let t0 = cpu_seconds();
    for &x in added {
        s.insert(x);
    }
    let t1 = cpu_seconds();
    let hits = added.iter().filter(|&&x| s.contains(black_box(x))).count();
    let t2 = cpu_seconds();
    let false_hits = absent.iter().filter(|&&x| s.contains(black_box(x))).count();
    let t3 = cpu_seconds();
    let batch_hits: usize = added.chunks(BATCH).map(|c| s.count_in(c)).sum();
    let t4 = cpu_seconds();
    let batch_false: usize = absent.chunks(BATCH).map(|c| s.count_in(c)).sum();
    let t5 = cpu_seconds();
    assert_eq!(hits, added.len(), "a filter lost an item it was given");
    assert_eq!((batch_hits, batch_false), (hits, false_hits), "batches answered otherwise");
    let hashed = s.lookups_hashed(added, absent, false_hits);
    Timing {
        insert: per_item(t1 - t0, added.len()),
        hit: per_item(t2 - t1, added.len()),
        miss: per_item(t3 - t2, absent.len()),
        batch_insert,
        batch_hit: per_item(t4 - t3, added.len()),
        batch_miss: per_item(t5 - t4, absent.len()),
        fpr: false_hits as f64 / absent.len() as f64,
        hashed,
    }
}

fn time_row(row: Row, rate: f64, added: &[u64], absent: &[u64]) -> Timing {
    let n = added.len() as u64;
    match row {
        Row::Xf => time_subject(xf(rate), xf(rate), added, absent),
        Row::Qfilter => time_subject(quotient(rate, n), quotient(rate, n), added, absent),
        Row::QfilterKeyed => time_subject(quotient_keyed(rate, n), quotient_keyed(rate, n), added, absent),
        Row::Growable => time_subject(growable(rate), growable(rate), added, absent),
        Row::Fastbloom => time_subject(sized(rate, n), sized(rate, n), added, absent),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// Every row `runs` times, interleaved, with fresh items each run.
fn timings(rows: &[Row], rate: f64, n: u64, runs: u64) -> Vec<Vec<Timing>> {
    let mut by_row = vec![Vec::new(); rows.len()];
    for run in 0..runs {
        let added = items(2 * run + 1, n);
        let absent = items(2 * run + 2, n);
        for (i, &row) in rows.iter().enumerate() {
            by_row[i].push(time_row(row, rate, &added, &absent));
        }
    }
    by_row
}

fn print_timings(rows: &[Row], rate: f64, n: u64, runs: u64) {
    let by_row = timings(rows, rate, n, runs);
    let q = rows.iter().position(|&r| r == Row::Qfilter).expect("qfilter row");
    println!("\n### {n} items at {rate}: thread CPU ns per item, median of {runs} runs\n");
    println!(
        "| filter | insert | hit | miss | insert x{BATCH} | hit x{BATCH} | miss x{BATCH} | insert / qfilter | hit / qfilter \
         | miss / qfilter | insert x{BATCH} / qfilter | hit x{BATCH} / qfilter | miss x{BATCH} / qfilter | measured rate |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (i, row) in rows.iter().enumerate() {
        let pick = |f: fn(&Timing) -> f64| median(by_row[i].iter().map(f).collect());
        // Same-run ratios: each run's figure over qfilter's in that run.
        let ratio = |f: fn(&Timing) -> f64| {
            median(by_row[i].iter().zip(&by_row[q]).map(|(a, b)| f(a) / f(b)).collect())
        };
        let times: [fn(&Timing) -> f64; 6] =
            [|t| t.insert, |t| t.hit, |t| t.miss, |t| t.batch_insert, |t| t.batch_hit, |t| t.batch_miss];
        let ns: Vec<String> = times.iter().map(|&f| format!("{:.0}", pick(f))).collect();
        let ratios: Vec<String> = times.iter().map(|&f| format!("{:.2}", ratio(f))).collect();
        println!(
            "| {} | {} | {} | {:.3}% |",
            row.name(),
            ns.join(" | "),
            ratios.join(" | "),
            100.0 * pick(|t| t.fpr),
        );
    }
    print_hashed(rows, &by_row, q);
}

/// The rows that take a hash, looked up with their hashes made before the
/// clock starts ([`Subject::lookups_hashed`]): how much of a lookup is the
/// filter's own work, and how much the item's hash adds (the item API's
/// time less the hashed one's: what the hash costs beside the lookup's
/// waits, not alone).
fn print_hashed(rows: &[Row], by_row: &[Vec<Timing>], q: usize) {
    println!(
        "\nGiven their hashes (made before the clock starts and read from an array; XF's is keyed SipHash-1-3, \
         qfilter's unkeyed foldhash): the lookups without the hash, same runs. The hash's cost: the first \
         table's time less this one's.\n"
    );
    println!(
        "| filter | hit | miss | hit / qfilter | miss / qfilter | the hash's cost, hit | the hash's cost, miss |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (i, row) in rows.iter().enumerate() {
        // Per run: the hashed hit and miss, their ratios to qfilter's, and
        // what the item API's lookups took beyond them.
        let runs: Option<Vec<[f64; 6]>> = by_row[i]
            .iter()
            .zip(&by_row[q])
            .map(|(a, b)| {
                let ((hit, miss), (q_hit, q_miss)) = (a.hashed?, b.hashed?);
                Some([hit, miss, hit / q_hit, miss / q_miss, a.hit - hit, a.miss - miss])
            })
            .collect();
        let Some(runs) = runs else { continue };
        let col = |k: usize| median(runs.iter().map(|r| r[k]).collect());
        println!(
            "| {} | {:.0} | {:.0} | {:.2} | {:.2} | {:.0} | {:.0} |",
            row.name(),
            col(0),
            col(1),
            col(2),
            col(3),
            col(4),
            col(5)
        );
    }
}

// ---- growth: memory, and speed at every size ----

/// 16 points per doubling from 10,000 to `max`.
fn points(max: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..)
        .map(|k| (10_000.0 * 2f64.powf(f64::from(k) / 16.0)).round() as u64)
        .take_while(|&n| n <= max)
        .collect();
    v.dedup();
    v
}

/// Lookups timed at each point of a growth, hits and misses alike.
const SAMPLE: usize = 8192;

/// One filter grown through the points: bits per item at each, thread CPU
/// ns per item at each (inserts since the point before, [`SAMPLE`] hits and
/// misses at the point; none for a filter sized per point, which does not
/// grow), and the peak bytes held during growth over the bytes held at the
/// end.
struct Growth {
    bits: Vec<f64>,
    speed: Vec<[f64; 3]>,
    peak_over_final: f64,
}

/// Why speed is sampled while growing, as memory is: a filter that grows is
/// as fast as it is at every size it passes, not at the one size the table
/// above measures (a block about to split, a directory just doubled, a
/// table half full).
fn grow_subject<S: Subject>(make: impl FnOnce() -> S, at: &[u64]) -> Growth {
    // Everything but the filter is allocated before the count starts.
    let stream = items(99, *at.last().unwrap_or(&0));
    let absent = items(98, SAMPLE as u64);
    let mut hits = vec![0u64; SAMPLE];
    let (mut bits, mut speed) = (Vec::with_capacity(at.len()), Vec::with_capacity(at.len()));
    let mut next = 0u64;
    let before = live();
    PEAK.store(before, Relaxed);
    let mut s = make();
    for &n in at {
        let t = cpu_seconds();
        for &x in &stream[next as usize..n as usize] {
            s.insert(x);
        }
        let insert = (cpu_seconds() - t) * 1e9 / (n - next) as f64;
        next = n;
        bits.push((live() - before) as f64 * 8.0 / n as f64);
        // Hits of every age, the first items added to the last.
        for (i, h) in hits.iter_mut().enumerate() {
            *h = stream[(i as u64 * n / SAMPLE as u64) as usize];
        }
        speed.push([insert, lookups(&s, &hits, true), lookups(&s, &absent, false)]);
    }
    let peak = (PEAK.load(Relaxed) - before) as f64;
    let peak_over_final = peak / (live() - before) as f64;
    drop(s);
    Growth { bits, speed, peak_over_final }
}

/// Thread CPU ns per lookup of `items`, all of which are in when `all_in`.
fn lookups<S: Subject>(s: &S, items: &[u64], all_in: bool) -> f64 {
    let t = cpu_seconds();
    let found = items.iter().filter(|&&x| s.contains(black_box(x))).count();
    let ns = (cpu_seconds() - t) * 1e9 / items.len() as f64;
    assert!(!all_in || found == items.len(), "a filter lost an item it was given");
    ns
}

/// A Bloom filter sized for each point, empty (its size does not change).
fn sized_growth(rate: f64, at: &[u64]) -> Growth {
    let bits = at
        .iter()
        .map(|&n| {
            let before = live();
            let s = sized(rate, n);
            let b = (live() - before) as f64 * 8.0 / n as f64;
            drop(s);
            b
        })
        .collect();
    Growth { bits, speed: Vec::new(), peak_over_final: 1.0 }
}

fn growth(row: Row, rate: f64, at: &[u64]) -> Growth {
    let max = *at.last().expect("at least one point");
    match row {
        Row::Xf => grow_subject(|| xf(rate), at),
        Row::Qfilter => grow_subject(|| quotient(rate, max), at),
        Row::QfilterKeyed => grow_subject(|| quotient_keyed(rate, max), at),
        Row::Growable => grow_subject(|| growable(rate), at),
        Row::Fastbloom => sized_growth(rate, at),
    }
}

/// Every row grown once through 16 points per doubling: the memory table,
/// then the speed table from the same growths.
fn print_growth(rows: &[Row], rate: f64, max: u64) {
    let at = points(max);
    let grown: Vec<Growth> = rows.iter().map(|&row| growth(row, rate, &at)).collect();
    println!(
        "\n### Memory at {rate}: bits per item at {} points (16 per doubling, 10,000 to {max})\n",
        at.len()
    );
    println!("| filter | mean | min | max | max / min | peak while growing / final |");
    println!("|---|---|---|---|---|---|");
    for (row, g) in rows.iter().zip(&grown) {
        let mean = g.bits.iter().sum::<f64>() / g.bits.len() as f64;
        // Where each extreme is, as the speed table says of its worst: a
        // figure is read with the size it was made at.
        let at_most = |better: fn(f64, f64) -> bool| {
            let i = (0..g.bits.len()).reduce(|a, b| if better(g.bits[b], g.bits[a]) { b } else { a });
            i.map_or((f64::NAN, 0), |i| (g.bits[i], at[i]))
        };
        let ((lo, lo_at), (hi, hi_at)) = (at_most(|a, b| a < b), at_most(|a, b| a > b));
        println!(
            "| {} | {mean:.2} | {lo:.2} (at {lo_at}) | {hi:.2} (at {hi_at}) | {:.3} | {:.2} |",
            row.name(),
            hi / lo,
            g.peak_over_final
        );
    }
    let q = rows.iter().position(|&r| r == Row::Qfilter).expect("qfilter row");
    print_speed(rows, &grown, q, rate, &at);
}

/// Why more secrets: where a filter is a few dozen blocks, its bits per
/// item depend on how its blocks happen to fill, which the secret decides,
/// so one run's max / min is one draw; the bound is a claim about all.
fn print_secrets(rate: f64, max: u64, secrets: u64) {
    let at = points(max);
    let mut spans: Vec<(f64, u64)> = Vec::new();
    let mut means = 0.0;
    for s in 0..secrets {
        let seed = Seed::from_text(format!("xf-inproc-{s}").as_bytes());
        let bits = grow_subject(|| xf_seeded(rate, seed), &at).bits;
        let (lo, hi) = bits.iter().fold((f64::MAX, 0f64), |(lo, hi), &b| (lo.min(b), hi.max(b)));
        means += bits.iter().sum::<f64>() / bits.len() as f64;
        spans.push((hi / lo, s));
    }
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (best, worst) = (spans[0], spans[spans.len() - 1]);
    println!(
        "\nXF over {secrets} more secrets (`BLOOMKIT_HASH_SEED=xf-inproc-K`), the same points: mean bits per \
         item {:.2}; max / min at best {:.3} (K = {}), median {:.3}, at worst {:.3} (K = {}).",
        means / secrets as f64,
        best.0,
        best.1,
        spans[spans.len() / 2].0,
        worst.0,
        worst.1
    );
}

/// The speed table: per row and operation, the mean ns over the points and
/// the mean and worst (highest, with the point where it was) of the
/// per-point ratios to qfilter.
fn print_speed(rows: &[Row], grown: &[Growth], q: usize, rate: f64, at: &[u64]) {
    println!(
        "\n### Speed while growing at {rate}: thread CPU ns per item at the same {} points, one growth each\n",
        at.len()
    );
    println!(
        "Inserts: those since the point before (from 0 at the first point); hits and misses: {SAMPLE} lookups \
         at each point, the hits drawn from every age of the items in. One pass, so each point is noisier than \
         the medians above: read the mean and the worst, over every point."
    );
    println!();
    println!(
        "| filter | insert | hit | miss | insert / qfilter, mean | worst | hit / qfilter, mean | worst \
         | miss / qfilter, mean | worst |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (i, (row, g)) in rows.iter().zip(grown).enumerate().filter(|(_, (_, g))| !g.speed.is_empty()) {
        let mut cells: Vec<String> = (0..3)
            .map(|op| format!("{:.0}", g.speed.iter().map(|s| s[op]).sum::<f64>() / g.speed.len() as f64))
            .collect();
        for op in 0..3 {
            if i == q {
                // The reference: its ratios are 1 by definition.
                cells.extend(["1".to_string(), String::new()]);
                continue;
            }
            let ratios: Vec<f64> = g.speed.iter().zip(&grown[q].speed).map(|(a, b)| a[op] / b[op]).collect();
            let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
            let (at_worst, worst) =
                ratios
                    .iter()
                    .copied()
                    .enumerate()
                    .fold((0, 0.0), |w, (i, r)| if r > w.1 { (i, r) } else { w });
            cells.extend([format!("{mean:.2}"), format!("{worst:.2} (at {})", at[at_worst])]);
        }
        println!("| {} | {} |", row.name(), cells.join(" | "));
    }
}

// ---- arguments ----

struct Args {
    items: u64,
    runs: u64,
    rates: Vec<f64>,
    rows: Vec<Row>,
    memory: bool,
    /// XF's memory over this many secrets besides the run's own.
    secrets: u64,
    /// Items per source of the merges timed (`--merges`), none by default.
    merges: Vec<u64>,
}

const USAGE: &str = "usage: xf-inproc [--items N (4000000)] [--runs N (3)] [--rates R,R (0.01,0.001)]
                 [--rows xf,qfilter,qfilter-keyed,growable,fastbloom (all; qfilter is always in)] [--memory yes|no (yes)]
                 [--secrets N (8: XF's memory over N more secrets)]
                 [--merges N,N (none: items per source of XF merges timed)]";

fn row_named(name: &str) -> Option<Row> {
    ROWS.into_iter().find(|r| r.name().to_lowercase().starts_with(name) && !name.is_empty())
}

fn args() -> Args {
    let mut a = Args {
        items: 4_000_000,
        runs: 3,
        rates: vec![0.01, 0.001],
        rows: ROWS.to_vec(),
        memory: true,
        secrets: 8,
        merges: vec![],
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| die(&format!("{flag} needs a value")));
        let bad = |what: &str| -> ! { die(&format!("{flag} {value}: {what}")) };
        match flag.as_str() {
            "--items" => {
                a.items = value
                    .parse::<u64>()
                    .ok()
                    .filter(|&n| n >= 10_000)
                    .unwrap_or_else(|| bad("a count of at least 10000"))
            }
            "--runs" => {
                a.runs = value.parse::<u64>().ok().filter(|&n| n >= 1).unwrap_or_else(|| bad("at least 1"))
            }
            "--rates" => {
                let rate = |r: &str| r.parse::<f64>().ok().filter(|r| (1e-9..0.5).contains(r));
                a.rates =
                    value.split(',').map(|r| rate(r).unwrap_or_else(|| bad("rates in [1e-9, 0.5)"))).collect()
            }
            "--rows" => {
                let mut rows: Vec<Row> = value
                    .split(',')
                    .map(|r| {
                        row_named(r).unwrap_or_else(|| {
                            bad("rows among xf, qfilter, qfilter-keyed, growable, fastbloom")
                        })
                    })
                    .collect();
                if !rows.contains(&Row::Qfilter) {
                    rows.push(Row::Qfilter);
                }
                a.rows = rows;
            }
            "--memory" => a.memory = value == "yes",
            "--secrets" => a.secrets = value.parse::<u64>().unwrap_or_else(|_| bad("a count")),
            "--merges" => {
                let n = |v: &str| v.parse::<u64>().ok().filter(|&n| n >= 1000);
                a.merges =
                    value.split(',').map(|v| n(v).unwrap_or_else(|| bad("counts of at least 1000"))).collect()
            }
            _ => die(&format!("unknown argument {flag}")),
        }
    }
    a
}

fn die(message: &str) -> ! {
    eprintln!("xf-inproc: {message}\n{USAGE}");
    std::process::exit(2)
}

fn main() {
    let a = args();
    for &rate in &a.rates {
        print_timings(&a.rows, rate, a.items, a.runs);
    }
    for &rate in a.rates.iter().filter(|_| a.memory) {
        print_growth(&a.rows, rate, a.items);
        if a.secrets > 0 && a.rows.contains(&Row::Xf) {
            print_secrets(rate, a.items, a.secrets);
        }
    }
    if !a.merges.is_empty() {
        print_merges(&a.merges, a.rates[0], a.runs);
    }
}

// ---- merges ----

/// Thread CPU ns per input entry of `XF.MERGE`'s work in process: two
/// filters of `n` items each (one seed, distinct items) merged into a new
/// one with `RAISERATE` (two full filters' entries spend twice the rate), the median of `runs`; the ratio to the first size shows whether
/// the work grows with the entries alone (issue 47: at most 1.3x from
/// 1M+1M to 6M+6M).
fn print_merges(sizes: &[u64], rate: f64, runs: u64) {
    println!("\n### XF merges at {rate}: thread CPU ns per input entry, median of {runs} runs\n");
    println!("| items per source | input entries | ns per entry | / first size |");
    println!("|---:|---:|---:|---:|");
    let mut first = None;
    for &n in sizes {
        let params = XfParams { error_rate: rate, ..XfDefaults::BLOOMKIT.params() };
        let make = |stream: u64| {
            let mut f =
                XfFilter::with_seed(params, bloomkit_core::xf::Seed([1, 2]), Limits::NONE).expect("XF");
            for item in items(stream, n) {
                f.insert_hash(f.hash_of(&item), Limits::NONE).expect("an insert");
            }
            f
        };
        let (a, b) = (make(7), make(8));
        let entries = XfFilter::merge_entries(None, &[&a, &b]);
        let ns = median(
            (0..runs)
                .map(|_| {
                    let start = cpu_seconds();
                    let merged = XfFilter::merged(None, &[&a, &b], true, Limits::NONE).expect("a merge");
                    let took = cpu_seconds() - start;
                    drop(merged);
                    took * 1e9 / entries as f64
                })
                .collect(),
        );
        let base = *first.get_or_insert(ns);
        println!("| {n} | {entries} | {ns:.1} | {:.2} |", ns / base);
    }
}
