//! One spill file through the factory, as DataFusion's SpillManager uses it: create, write,
//! finish, read back, drop; and plans adopted from another owner.

mod common;

use std::io::Write;
use std::sync::Arc;

use bytes::Bytes;
use common::*;
use datafusion_common::{DataFusionError, Result};
use datafusion_execution::spill_file::{SpillFile, TempFileFactory};
use futures::{StreamExt, TryStreamExt};
use spillway_datafusion::{
    SpillwayLocalDirs, SpillwayPlan, SpillwayTempFileFactory, Status, READ_CHUNK_BYTES, UNLIMITED,
};

/// Bytes that tell one offset from another.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 % 251) as u8).collect()
}

async fn read_all(file: &dyn SpillFile) -> Result<(Vec<u8>, Vec<usize>)> {
    let chunks: Vec<Bytes> = file.read_stream()?.try_collect().await?;
    let sizes = chunks.iter().map(Bytes::len).collect();
    Ok((chunks.concat(), sizes))
}

#[tokio::test]
async fn what_is_written_in_pieces_of_any_size_is_read_back() -> Result<()> {
    let roots = Roots::new(3);
    let plan = SpillwayPlan::create(spillway(), &roots.paths, 1 << 30, UNLIMITED)?;
    let factory = SpillwayTempFileFactory::new(Arc::clone(&plan));
    roots.assert_empty("before the first file");

    let file = factory.create_temp_file("test")?;
    let path = file.path().unwrap().to_path_buf();
    assert!(path.is_file());
    assert!(roots.paths.iter().any(|r| path.starts_with(r)));
    assert_eq!(
        roots.plan_dirs().iter().filter(|p| p.is_dir()).count(),
        1,
        "one plan dir, in one root"
    );

    // Small writes as Arrow's IPC writer makes them, and some larger than the write buffer.
    let data = pattern(7 << 20);
    let mut writer = file.open_writer()?;
    let mut at = 0;
    for (i, len) in [1usize, 7, 8, 100, 4096, 3 << 20, 13, 65536, 1 << 20, 5]
        .iter()
        .cycle()
        .enumerate()
    {
        if at == data.len() {
            break;
        }
        let end = (at + len + i % 3).min(data.len());
        writer
            .write_all(&data[at..end])
            .map_err(DataFusionError::IoError)?;
        at = end;
    }
    writer.flush().map_err(DataFusionError::IoError)?;
    writer.finish()?;
    drop(writer);

    assert_eq!(file.size(), Some(data.len() as u64));
    assert!(plan.used_disk_space()? > 0);
    let (read, sizes) = read_all(file.as_ref()).await?;
    assert!(
        read == data,
        "the bytes read back differ from those written"
    );
    assert!(
        sizes.iter().all(|&n| n > 0 && n <= READ_CHUNK_BYTES),
        "chunk sizes {sizes:?}"
    );
    assert_eq!(sizes.len(), data.len().div_ceil(READ_CHUNK_BYTES));

    // Read twice, and without a tokio runtime (the read then runs inline).
    let again = futures::executor::block_on(async { read_all(file.as_ref()).await })?;
    assert!(again.0 == data);

    drop(file);
    assert!(!path.exists(), "the file outlived its SpillFile");
    assert_eq!(plan.used_disk_space()?, 0);
    drop(factory);
    drop(plan);
    roots.assert_empty("after the plan was dropped");
    Ok(())
}

#[tokio::test]
async fn an_empty_file_reads_as_no_chunks() -> Result<()> {
    let roots = Roots::new(1);
    let plan = SpillwayPlan::create(spillway(), &roots.paths, 1 << 30, UNLIMITED)?;
    let file = SpillwayTempFileFactory::new(Arc::clone(&plan)).create_temp_file("empty")?;
    file.open_writer()?.finish()?;
    assert_eq!(file.size(), Some(0));
    assert_eq!(read_all(file.as_ref()).await?.1, Vec::<usize>::new());
    drop(file);
    drop(plan);
    roots.assert_empty("after the plan was dropped");
    Ok(())
}

#[tokio::test]
async fn reading_an_unfinished_file_fails_at_read_stream() -> Result<()> {
    let roots = Roots::new(1);
    let plan = SpillwayPlan::create(spillway(), &roots.paths, 1 << 30, UNLIMITED)?;
    let file = SpillwayTempFileFactory::new(Arc::clone(&plan)).create_temp_file("unfinished")?;
    let mut writer = file.open_writer()?;
    writer
        .write_all(b"not finished")
        .map_err(DataFusionError::IoError)?;
    let err = file
        .read_stream()
        .err()
        .expect("an unfinished file cannot be read");
    assert!(
        err.to_string().contains("still being written")
            && err.to_string().contains("RepartitionExec"),
        "{err}"
    );
    drop(writer);
    drop(file);
    drop(plan);
    roots.assert_empty("after the plan was dropped");
    Ok(())
}

#[tokio::test]
async fn an_adopted_plan_is_left_to_its_owner() -> Result<()> {
    let roots = Roots::new(2);
    let owner = SpillwayPlan::create(spillway(), &roots.paths, 1 << 30, UNLIMITED)?;
    let adopted = SpillwayPlan::adopt(spillway(), owner.handle().unwrap());
    assert!(!adopted.is_owned());
    let factory = SpillwayTempFileFactory::new(Arc::clone(&adopted));
    let file = factory.create_temp_file("adopted")?;
    let mut writer = file.open_writer()?;
    writer
        .write_all(&pattern(1000))
        .map_err(DataFusionError::IoError)?;
    writer.finish()?;
    drop(writer);

    // Rust's last reference to the adopted plan goes, with the file still live: nothing released.
    let path = file.path().unwrap().to_path_buf();
    drop(factory);
    drop(adopted);
    assert!(path.exists());
    assert!(owner.used_disk_space()? > 0);
    let (read, _) = read_all(file.as_ref()).await?;
    assert!(read == pattern(1000));

    // The owner releases the plan (the Spark task ends) while DataFusion still holds the file.
    owner.release()?;
    roots.assert_empty("after the owner released the plan");
    assert_eq!(file.size(), None, "the file went with its plan");
    let err = file
        .read_stream()
        .err()
        .expect("the file went with its plan");
    match err.find_root() {
        DataFusionError::External(e) => {
            let e = e
                .downcast_ref::<spillway_datafusion::SpillwayError>()
                .expect("a SpillwayError");
            assert_eq!(e.status, Status::InvalidHandle);
        }
        other => panic!("not an invalid handle: {other:?}"),
    }
    drop(file); // releasing a file whose plan is gone is not an error anyone sees
    Ok(())
}

#[test]
fn bad_plan_arguments_are_invalid_argument_errors() {
    let roots = Roots::new(1);
    let no_dirs = SpillwayPlan::create(spillway(), &[], 1 << 30, UNLIMITED)
        .err()
        .expect("no dirs");
    assert_eq!(no_dirs.status, Status::InvalidArgument, "{no_dirs}");
    let negative = SpillwayPlan::create(spillway(), &roots.paths, -1, UNLIMITED)
        .err()
        .expect("a negative limit");
    assert_eq!(negative.status, Status::InvalidArgument, "{negative}");
    roots.assert_empty("after refused plans");
}

#[tokio::test]
async fn the_stream_ends_after_the_last_chunk_and_stays_ended() -> Result<()> {
    let roots = Roots::new(1);
    let plan = SpillwayPlan::create(spillway(), &roots.paths, 1 << 30, UNLIMITED)?;
    let file = SpillwayTempFileFactory::new(Arc::clone(&plan)).create_temp_file("ends")?;
    let mut writer = file.open_writer()?;
    writer
        .write_all(&pattern(READ_CHUNK_BYTES + 1))
        .map_err(DataFusionError::IoError)?;
    writer.finish()?;
    let mut stream = file.read_stream()?;
    assert_eq!(
        stream.next().await.transpose()?.map(|b| b.len()),
        Some(READ_CHUNK_BYTES)
    );
    assert_eq!(stream.next().await.transpose()?.map(|b| b.len()), Some(1));
    assert!(stream.next().await.is_none());
    assert!(stream.next().await.is_none());
    drop(stream);
    drop(writer);
    drop(file);
    drop(plan);
    roots.assert_empty("after the plan was dropped");
    Ok(())
}

#[tokio::test]
async fn a_lazy_plan_exists_in_the_library_from_its_first_file_on() -> Result<()> {
    let roots = Roots::new(2);
    let dirs = Arc::new(SpillwayLocalDirs::register(spillway(), &roots.paths)?);

    // Never spilling: never created, nothing to release.
    let idle = SpillwayPlan::lazy_in(&dirs, 1 << 30, UNLIMITED);
    assert_eq!((idle.handle(), idle.used_disk_space()?), (None, 0));
    drop(idle);

    let plan = SpillwayPlan::lazy_in(&dirs, 1000, UNLIMITED);
    let factory = SpillwayTempFileFactory::new(Arc::clone(&plan));
    let file = factory.create_temp_file("first")?;
    assert!(plan.handle().is_some());
    // The limits given to lazy_in hold: 1000 bytes.
    let mut writer = file.open_writer()?;
    // The library frames writes into chunks, so the refusal may come at finish (the last chunk).
    let refused = match writer
        .write_all(&pattern(100_000))
        .and_then(|_| writer.flush())
    {
        Err(e) => DataFusionError::from(e),
        Ok(()) => writer.finish().err().expect("past the plan's limit"),
    };
    assert!(
        matches!(refused.find_root(), DataFusionError::ResourcesExhausted(m) if m.contains("spark.spillway.maxTempDirectorySize")),
        "{refused:?}"
    );
    drop(writer);
    plan.release()?;
    roots.assert_empty("after release");
    let after = factory
        .create_temp_file("after release")
        .err()
        .expect("a released plan makes no file");
    assert!(after.to_string().contains("released"), "{after}");
    drop(file);
    Ok(())
}

#[tokio::test]
async fn the_factory_is_the_plan_and_files_outlive_both() -> Result<()> {
    let roots = Roots::new(1);
    let dirs = Arc::new(SpillwayLocalDirs::register(spillway(), &roots.paths)?);
    let plan = SpillwayPlan::lazy_in(&dirs, 1 << 30, UNLIMITED);
    let factory = SpillwayTempFileFactory::new(Arc::clone(&plan));
    assert_eq!(
        Arc::strong_count(&plan),
        2,
        "the factory shares the plan's count"
    );
    assert!(std::ptr::eq(factory.plan(), Arc::as_ptr(&plan)));
    drop(plan); // the factory alone keeps the plan
    let file = factory.create_temp_file("after the plan's Arc went")?;
    let mut writer = file.open_writer()?;
    writer
        .write_all(&pattern(100))
        .map_err(DataFusionError::IoError)?;
    writer.finish()?;
    drop(writer);
    drop(factory); // the file now keeps the plan (its state in the library)
    assert_eq!(read_all(file.as_ref()).await?.0, pattern(100));
    drop(file);
    roots.assert_empty("after the file, the last holder of the plan, was dropped");

    // A factory moved out of its Arc works as well: files hold the plan's state in the library,
    // which outlives the factory and the plan.
    let plan = SpillwayPlan::lazy_in(&dirs, 1 << 30, UNLIMITED);
    let moved = Arc::try_unwrap(SpillwayTempFileFactory::new(plan)).expect("the only Arc");
    let file = moved.create_temp_file("moved")?;
    drop(moved);
    let mut writer = file.open_writer()?;
    writer
        .write_all(&pattern(10))
        .map_err(DataFusionError::IoError)?;
    writer.finish()?;
    drop(writer);
    assert_eq!(read_all(file.as_ref()).await?.0, pattern(10));
    drop(file);
    roots.assert_empty("after the moved factory was dropped");
    Ok(())
}
