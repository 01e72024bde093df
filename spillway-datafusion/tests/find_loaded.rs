//! Finding the library the process already loaded, as in a Spark executor: the JVM loads a copy it
//! extracted under a random name and unlinks it; the crate must bind that copy and never load a
//! second one. Its own test binary: it must run before anything else loads the library.

mod common;

use std::path::{Path, PathBuf};

use spillway_datafusion::{Spillway, SpillwayPlan, LIBRARY_ENV, UNLIMITED};

#[test]
fn binds_the_copy_the_process_loaded_even_unlinked() {
    let library = std::env::var_os(LIBRARY_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../build/libspillway.so"));

    let not_yet = Spillway::loaded().expect_err("nothing loaded the library yet");
    assert!(not_yet.message.contains("not loaded"), "{not_yet}");

    // What NativeLoader does: a fresh copy, System.load (dlopen, RTLD_LAZY | RTLD_LOCAL), unlink.
    let extract_dir = tempfile::tempdir().unwrap();
    let copy = extract_dir.path().join("libspillway-4242424242.so");
    std::fs::copy(&library, &copy).unwrap();
    // SAFETY: loads libspillway; never closed (a Go runtime cannot be unloaded).
    let jvm_handle = unsafe {
        libloading::os::unix::Library::open(Some(&copy), libloading::os::unix::RTLD_LAZY)
    }
    .unwrap();
    std::mem::forget(jvm_handle);
    std::fs::remove_file(&copy).unwrap();

    let found = Spillway::loaded().expect("the loaded copy is found");
    assert_eq!(found.path(), copy.as_path());
    // load() with another path returns the same copy: a second Go runtime is never started.
    let again = Spillway::load(&library).unwrap();
    assert_eq!(again.path(), copy.as_path());
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let mut mapped: Vec<&str> = maps
        .lines()
        .filter(|l| l.contains("libspillway"))
        .filter_map(|l| l.split_whitespace().nth(5))
        .collect();
    mapped.dedup();
    assert_eq!(
        mapped,
        vec![copy.to_str().unwrap()],
        "one copy of the library is mapped"
    );

    let roots = common::Roots::new(1);
    let plan = SpillwayPlan::create(found, &roots.paths, 1 << 20, UNLIMITED)
        .expect("the bound copy works");
    plan.release().unwrap();
    roots.assert_empty("after release");
}
