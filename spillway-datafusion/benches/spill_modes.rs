//! DataFusion's spill modes side by side, in one run: `Directories` (what Comet does today: a dir
//! in every root per plan, made when the plan's DiskManager is built), the lazy `OsTmpDirectory`
//! (one dir in the OS tmp dir at the first spill file), and `Custom` with Spillway's factory.
//!
//! 1. Per plan, never spilling: build the plan's DiskManager (for Spillway: create the plan in
//!    dirs registered once, or a lazy plan, then the factory and the DiskManager), then drop it
//!    all (Spillway: release).
//! 2. Per plan, spilling once: the same plus one spill file of 256 KiB written, finished, read
//!    back and dropped.
//! 3. A spilling SortExec end to end with each, the modes alternating run by run.
//!
//! Timings are medians over many rounds; ratios are to Directories. With `strace` on the PATH the
//! syscalls per never-spilling plan are counted too (`strace -f -c` on this binary making 0 and N
//! plans: the difference over N). Run with `make bench-datafusion`.

use std::hint::black_box;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use datafusion_execution::config::SessionConfig;
use datafusion_execution::disk_manager::{DiskManager, DiskManagerBuilder, DiskManagerMode};
use datafusion_execution::memory_pool::FairSpillPool;
use datafusion_execution::runtime_env::RuntimeEnvBuilder;
use datafusion_execution::spill_file::{SpillFile, TempFileFactory};
use datafusion_execution::TaskContext;
use datafusion_physical_plan::{collect, ExecutionPlan};
use futures::TryStreamExt;
use spillway_datafusion::{
    Spillway, SpillwayLocalDirs, SpillwayPlan, SpillwayTempFileFactory, UNLIMITED,
};

// The tests' input and SortExec, so that the benchmark sorts what the tests check.
#[path = "../tests/common/mod.rs"]
mod common;

const SPILL_BYTES: usize = 256 << 10;
const PLAN_LIMIT: i64 = 100 << 30; // DataFusion's default max_temp_directory_size

#[derive(Clone, Copy, PartialEq, Debug)]
enum Mode {
    Directories,
    OsTmp,
    Spillway,
    SpillwayLazy,
}

impl Mode {
    const ALL: [Mode; 4] = [
        Mode::Directories,
        Mode::OsTmp,
        Mode::Spillway,
        Mode::SpillwayLazy,
    ];

    fn name(self) -> &'static str {
        match self {
            Mode::Directories => "DataFusion Directories",
            Mode::OsTmp => "DataFusion OsTmpDirectory (lazy)",
            Mode::Spillway => "Spillway factory, plan created with it",
            Mode::SpillwayLazy => "Spillway factory, lazy plan",
        }
    }

    fn parse(s: &str) -> Mode {
        Mode::ALL
            .into_iter()
            .find(|m| format!("{m:?}") == s)
            .unwrap_or_else(|| panic!("no mode {s}"))
    }
}

/// What a mode needs to build a plan's DiskManager: the roots, and Spillway's registration of them.
struct Setup {
    roots: Vec<PathBuf>,
    dirs: Arc<SpillwayLocalDirs>,
}

impl Setup {
    fn new(spillway: &Arc<Spillway>, roots: &[PathBuf]) -> Setup {
        let dirs = Arc::new(SpillwayLocalDirs::register(Arc::clone(spillway), roots).unwrap());
        Setup {
            roots: roots.to_vec(),
            dirs,
        }
    }

    /// The plan's DiskManager, and for Spillway the plan (released when the last Arc goes).
    fn disk_manager_builder(&self, mode: Mode) -> DiskManagerBuilder {
        match mode {
            Mode::Directories => DiskManagerBuilder::default()
                .with_mode(DiskManagerMode::Directories(self.roots.clone())),
            Mode::OsTmp => DiskManagerBuilder::default(),
            Mode::Spillway => {
                let plan = SpillwayPlan::create_in(&self.dirs, PLAN_LIMIT, UNLIMITED).unwrap();
                DiskManagerBuilder::default()
                    .with_temp_file_factory(SpillwayTempFileFactory::new(plan))
            }
            Mode::SpillwayLazy => {
                let plan = SpillwayPlan::lazy_in(&self.dirs, PLAN_LIMIT, UNLIMITED);
                DiskManagerBuilder::default()
                    .with_temp_file_factory(SpillwayTempFileFactory::new(plan))
            }
        }
    }

    fn plan(&self, mode: Mode) -> Arc<DiskManager> {
        Arc::new(self.disk_manager_builder(mode).build().unwrap())
    }
}

/// A factory with no state, which cannot spill: what DataFusion's Custom mode costs by itself.
struct EmptyFactory;

impl TempFileFactory for EmptyFactory {
    fn create_temp_file(&self, _: &str) -> datafusion_common::Result<Arc<dyn SpillFile>> {
        unreachable!("the floor's plans never spill")
    }
}

/// One never-spilling plan: its DiskManager built, then dropped.
fn never_spilling(setup: &Setup, mode: Mode) {
    black_box(setup.plan(mode));
}

/// One plan spilling once: a file written, finished, read back, dropped with the plan.
async fn spilling_once(setup: &Setup, mode: Mode, data: &[u8]) {
    let disk = setup.plan(mode);
    let file = disk.create_tmp_file("bench").unwrap();
    let mut writer = file.open_writer().unwrap();
    writer.write_all(data).unwrap();
    writer.finish().unwrap();
    drop(writer);
    let read: Vec<bytes::Bytes> = file.read_stream().unwrap().try_collect().await.unwrap();
    assert_eq!(read.iter().map(|b| b.len()).sum::<usize>(), data.len());
}

/// The median of `rounds` timings of `per_round` calls of f, per call.
fn median_per_call(rounds: usize, per_round: usize, mut f: impl FnMut()) -> Duration {
    for _ in 0..per_round.min(1000) {
        f(); // warm up
    }
    let mut times: Vec<Duration> = (0..rounds)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..per_round {
                f();
            }
            start.elapsed() / per_round as u32
        })
        .collect();
    times.sort();
    times[rounds / 2]
}

fn roots_in(dir: &Path, n: usize) -> Vec<PathBuf> {
    (0..n)
        .map(|i| {
            let root = dir.join(format!("root{i}"));
            std::fs::create_dir_all(&root).unwrap();
            root
        })
        .collect()
}

fn show(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns < 10_000 {
        format!("{ns} ns")
    } else if ns < 10_000_000 {
        format!("{:.1} µs", ns as f64 / 1e3)
    } else {
        format!("{:.1} ms", ns as f64 / 1e6)
    }
}

fn ratio(d: Duration, base: Duration) -> String {
    let r = d.as_secs_f64() / base.as_secs_f64();
    if r >= 0.1 {
        format!("{r:.2}x")
    } else {
        format!("1/{:.0}", 1.0 / r)
    }
}

// ---- the SortExec ----

const SORT_BATCHES: usize = 250;
const SORT_ROWS: usize = 8192;
const SORT_MEMORY: usize = 32 << 20;

/// One spilling sort of the input in SORT_MEMORY bytes, plan creation included; the spill count.
async fn sort_once(setup: &Setup, mode: Mode, input: &[RecordBatch]) -> usize {
    let runtime = RuntimeEnvBuilder::new()
        .with_disk_manager_builder(setup.disk_manager_builder(mode))
        .with_memory_pool(Arc::new(FairSpillPool::new(SORT_MEMORY)))
        .build_arc()
        .unwrap();
    let context = Arc::new(
        TaskContext::default()
            .with_session_config(SessionConfig::new())
            .with_runtime(runtime),
    );
    let sort = common::sort_plan(input);
    let out = collect(Arc::clone(&sort) as _, context).await.unwrap();
    assert_eq!(
        out.iter().map(|b| b.num_rows()).sum::<usize>(),
        SORT_BATCHES * SORT_ROWS
    );
    sort.metrics().unwrap().spill_count().unwrap()
}

// ---- syscalls ----

/// Runs this binary under `strace -f -c` making `plans` never-spilling plans of mode; the
/// syscalls counted (all, and those on files).
fn strace_count(mode: Mode, roots: usize, plans: usize) -> Option<(u64, u64)> {
    let exe = std::env::current_exe().ok()?;
    let count = |filter: &[&str]| -> Option<u64> {
        let out = tempfile::NamedTempFile::new().ok()?;
        let status = Command::new("strace")
            .args(["-f", "-c", "-o"])
            .arg(out.path())
            .args(filter)
            .arg(&exe)
            .args([
                "--plans",
                &format!("{mode:?}"),
                &roots.to_string(),
                &plans.to_string(),
            ])
            .status()
            .ok()?;
        if !status.success() {
            return None;
        }
        // The summary's last line: "100.00 <seconds> <usecs/call> <calls> [<errors>] total".
        let summary = std::fs::read_to_string(out.path()).ok()?;
        let total = summary
            .lines()
            .rev()
            .find(|l| l.trim_end().ends_with("total"))?;
        total.split_whitespace().nth(3)?.parse().ok()
    };
    Some((count(&[])?, count(&["-e", "trace=%file,%desc"])?))
}

/// `--plans <mode> <roots> <n>`: make n never-spilling plans and exit (run under strace).
fn plans_only(args: &[String]) {
    let (mode, roots, n) = (
        Mode::parse(&args[0]),
        args[1].parse().unwrap(),
        args[2].parse::<usize>().unwrap(),
    );
    let spillway = Spillway::from_env().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let setup = Setup::new(&spillway, &roots_in(dir.path(), roots));
    for _ in 0..n {
        never_spilling(&setup, mode);
    }
}

/// `--sorts <mode> <n>`: run the spilling sort n times in one mode and exit (to profile one mode,
/// e.g. under `perf record`).
fn sorts_only(args: &[String]) {
    let (mode, n) = (Mode::parse(&args[0]), args[1].parse::<usize>().unwrap());
    let spillway = Spillway::from_env().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let setup = Setup::new(&spillway, &roots_in(dir.path(), 4));
    let input = common::input(SORT_BATCHES, SORT_ROWS, u64::MAX);
    for _ in 0..n {
        let start = Instant::now();
        let spills = runtime.block_on(sort_once(&setup, mode, &input));
        println!(
            "{}: {spills} spills, {}",
            mode.name(),
            show(start.elapsed())
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if args.first().map(String::as_str) == Some("--plans") {
        return plans_only(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("--sorts") {
        return sorts_only(&args[1..]);
    }
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let spillway = Spillway::from_env()
        .expect("set SPILLWAY_LIBRARY to build/libspillway.so (make bench-datafusion does)");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..SPILL_BYTES).map(|i| (i * 31 % 251) as u8).collect();
    let rounds = if quick { 3 } else { 11 };

    println!("Per plan (median of {rounds} rounds; ratio to Directories)\n");
    println!("| roots | mode | never spilling | ratio | spilling once (256 KiB) | ratio |");
    println!("|---|---|---|---|---|---|");
    for n in [1usize, 4, 8] {
        let setup = Setup::new(&spillway, &roots_in(&dir.path().join(format!("r{n}")), n));
        let mut base = (Duration::ZERO, Duration::ZERO);
        for mode in Mode::ALL {
            let per_round = match (mode, quick) {
                (_, true) => 10,
                (Mode::Directories, _) => 200,
                _ => 20_000,
            };
            let idle = median_per_call(rounds, per_round, || never_spilling(&setup, mode));
            let spill_rounds = if quick { 10 } else { 50 };
            let once = median_per_call(rounds, spill_rounds, || {
                runtime.block_on(spilling_once(&setup, mode, &data))
            });
            if mode == Mode::Directories {
                base = (idle, once);
            }
            println!(
                "| {n} | {} | {} | {} | {} | {} |",
                mode.name(),
                show(idle),
                ratio(idle, base.0),
                show(once),
                ratio(once, base.1)
            );
        }
    }

    // A plan a JVM task already has, adopted: no call into the library per plan at all.
    let owner = SpillwayPlan::create(
        Arc::clone(&spillway),
        &[dir.path().to_path_buf()],
        PLAN_LIMIT,
        UNLIMITED,
    )
    .unwrap();
    let adopted = median_per_call(rounds, if quick { 10 } else { 20_000 }, || {
        let plan = SpillwayPlan::adopt(Arc::clone(&spillway), owner.handle().unwrap());
        black_box(Arc::new(
            DiskManagerBuilder::default()
                .with_temp_file_factory(SpillwayTempFileFactory::new(plan))
                .build()
                .unwrap(),
        ));
    });
    println!(
        "\nSpillway factory over an adopted plan (the JVM task's), never spilling: {}",
        show(adopted)
    );
    drop(owner);
    // The least any Custom factory can cost per plan: DataFusion's own build plus one Arc.
    let floor = median_per_call(rounds, if quick { 10 } else { 20_000 }, || {
        black_box(Arc::new(
            DiskManagerBuilder::default()
                .with_temp_file_factory(Arc::new(EmptyFactory))
                .build()
                .unwrap(),
        ));
    });
    println!(
        "A Custom factory holding nothing (the floor of any factory), never spilling: {}",
        show(floor)
    );

    let input = common::input(SORT_BATCHES, SORT_ROWS, u64::MAX);
    let bytes: usize = input.iter().map(|b| b.get_array_memory_size()).sum();
    // BENCH_SORT_ROUNDS=<n> for more alternating runs of the sort than the default 5.
    let sort_rounds = match std::env::var("BENCH_SORT_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
    {
        Some(n) if n > 0 => n,
        _ if quick => 1,
        _ => 5,
    };
    let setup = Setup::new(&spillway, &roots_in(&dir.path().join("sort"), 4));
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); Mode::ALL.len()];
    let mut spills = vec![0; Mode::ALL.len()];
    runtime.block_on(sort_once(&setup, Mode::Directories, &input)); // warm up
    for _ in 0..sort_rounds {
        for (i, mode) in Mode::ALL.into_iter().enumerate() {
            let start = Instant::now();
            spills[i] = runtime.block_on(sort_once(&setup, mode, &input));
            times[i].push(start.elapsed());
        }
    }
    println!(
        "\nSortExec of {} rows ({} MiB in memory) in a {} MiB pool, 4 roots, median of {sort_rounds} alternating runs\n",
        SORT_BATCHES * SORT_ROWS,
        bytes >> 20,
        SORT_MEMORY >> 20
    );
    println!("| mode | spills | time | rows/s | ratio |");
    println!("|---|---|---|---|---|");
    let medians: Vec<Duration> = times
        .iter_mut()
        .map(|t| {
            t.sort();
            t[t.len() / 2]
        })
        .collect();
    for (i, mode) in Mode::ALL.into_iter().enumerate() {
        let rows_per_s = (SORT_BATCHES * SORT_ROWS) as f64 / medians[i].as_secs_f64();
        println!(
            "| {} | {} | {} | {:.2} M | {} |",
            mode.name(),
            spills[i],
            show(medians[i]),
            rows_per_s / 1e6,
            ratio(medians[i], medians[0])
        );
    }

    // Directories makes ~11 calls per root and plan, slow under strace: fewer plans suffice.
    let plans = |mode: Mode| match (mode, quick) {
        (_, true) => 100,
        (Mode::Directories, _) => 1_000,
        _ => 10_000,
    };
    match Command::new("strace").arg("-V").output() {
        Ok(_) => {
            println!("\nSyscalls per never-spilling plan (strace -f -c: N plans minus 0 plans, over N; N = {} for Directories, {} for the others; all / on files and descriptors)\n", plans(Mode::Directories), plans(Mode::OsTmp));
            println!("| roots | mode | syscalls | file/fd syscalls |");
            println!("|---|---|---|---|");
            for n in [1usize, 4, 8] {
                for mode in Mode::ALL {
                    let (Some(none), Some(many)) =
                        (strace_count(mode, n, 0), strace_count(mode, n, plans(mode)))
                    else {
                        println!("| {n} | {} | strace failed | |", mode.name());
                        continue;
                    };
                    let per = |a: u64, b: u64| (b as f64 - a as f64) / plans(mode) as f64;
                    println!(
                        "| {n} | {} | {:.2} | {:.2} |",
                        mode.name(),
                        per(none.0, many.0),
                        per(none.1, many.1)
                    );
                }
            }
        }
        Err(_) => println!("\n(strace not found: no syscall counts)"),
    }
}
