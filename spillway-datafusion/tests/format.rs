//! Spillway's file format stays transparent to DataFusion: with lz4 and AES-GCM configured, a
//! sort spills compressed, sealed bytes and reads back what it wrote. Its own test binary: the
//! format is process-wide.

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use datafusion_common::Result;
use datafusion_execution::disk_manager::DiskManagerBuilder;
use datafusion_execution::spill_file::{SpillFile, TempFileFactory};
use datafusion_physical_plan::collect;
use spillway_datafusion::{SpillwayPlan, SpillwayTempFileFactory, UNLIMITED};

/// Keeps every file it creates alive, so the test can look at them after the sort.
struct Keeping {
    inner: Arc<SpillwayTempFileFactory>,
    files: Mutex<Vec<Arc<dyn SpillFile>>>,
}

impl TempFileFactory for Keeping {
    fn create_temp_file(&self, description: &str) -> Result<Arc<dyn SpillFile>> {
        let file = self.inner.create_temp_file(description)?;
        self.files.lock().unwrap().push(Arc::clone(&file));
        Ok(file)
    }
}

/// Sorts the input spilling through a new plan, checks the result, and returns the plan and its
/// spill files, kept alive.
async fn sort_keeping_files(roots: &Roots) -> Result<(Arc<SpillwayPlan>, Vec<Arc<dyn SpillFile>>)> {
    let batches = input(200, 1000, u64::MAX);
    let expected = collect(sort_plan(&batches) as _, task_context(None, no_disk())?).await?;
    let plan = SpillwayPlan::create(spillway(), &roots.paths, 1 << 30, UNLIMITED)?;
    let keeping = Arc::new(Keeping {
        inner: SpillwayTempFileFactory::new(Arc::clone(&plan)),
        files: Mutex::new(vec![]),
    });
    let context = task_context(
        Some(2 << 20),
        DiskManagerBuilder::default().with_temp_file_factory(keeping.clone()),
    )?;
    let actual = collect(sort_plan(&batches) as _, context).await?;
    assert_eq!(concat(&actual), concat(&expected));
    let files = std::mem::take(&mut *keeping.files.lock().unwrap());
    assert!(files.len() >= 2, "the sort spilled {} files", files.len());
    Ok((plan, files))
}

/// The on-disk bytes of each file, and the bytes DataFusion wrote (read back through Spillway).
async fn on_disk_and_logical(files: &[Arc<dyn SpillFile>]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    use futures::TryStreamExt;
    let mut out = vec![];
    for f in files {
        let disk = std::fs::read(f.path().unwrap())?;
        let logical: Vec<bytes::Bytes> = f.read_stream()?.try_collect().await?;
        assert_eq!(f.size(), Some(logical.iter().map(|b| b.len() as u64).sum()));
        out.push((disk, logical.concat()));
    }
    Ok(out)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compressed_and_sealed_spills_read_back_as_written() -> Result<()> {
    let roots = Roots::new(2);

    // The default format: framed, neither compressed nor encrypted; DataFusion's strings show.
    let (plan, files) = sort_keeping_files(&roots).await?;
    for (disk, logical) in on_disk_and_logical(&files).await? {
        assert!(
            contains(&logical, b"value-"),
            "DataFusion's IPC bytes carry the strings"
        );
        assert!(
            contains(&disk, b"value-"),
            "unencrypted, the strings are on disk as they are"
        );
    }
    drop(files);
    drop(plan);

    spillway().configure_format("lz4", 0, true, 256)?;
    let (plan, files) = sort_keeping_files(&roots).await?;
    for (disk, logical) in on_disk_and_logical(&files).await? {
        assert!(
            contains(&logical, b"value-"),
            "DataFusion reads back its own IPC bytes"
        );
        assert!(
            !contains(&disk, b"value-"),
            "sealed, no plaintext is on disk"
        );
        assert!(
            disk.len() < logical.len(),
            "lz4 takes the repeated strings down: {} on disk for {}",
            disk.len(),
            logical.len()
        );
    }
    drop(files);
    drop(plan);
    spillway().configure_format("none", 0, false, 0)?;
    roots.assert_empty("after the plans were dropped");
    Ok(())
}
