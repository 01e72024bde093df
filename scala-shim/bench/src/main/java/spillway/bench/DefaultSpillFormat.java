package spillway.bench;

import spillway.NativeSpill;

/**
 * The spill format an executor with Spark's default settings gives the library (TaskSpill, from
 * SpillwayConf.spillFormat: lz4, not encrypted), so that the benchmarks' framed files are the ones
 * the product writes. Without it the library frames files uncompressed.
 */
final class DefaultSpillFormat {
  private DefaultSpillFormat() {}

  /** Sets the format for the plans created from now on in this JVM. */
  static void configure() {
    NativeSpill.configureFormat("lz4", 1, false, 128);
  }
}
