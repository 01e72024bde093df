package spillway;

import java.io.IOException;

/**
 * Thrown by {@link NativeSpill#write} when a write would take a plan over its
 * {@code spark.spillway.maxTempDirectorySize} limit, or all plans of the JVM over the plan's
 * {@code spark.spillway.maxExecutorTempDirectorySize} limit; the message names the one hit. Nothing
 * of the refused write is kept: the usage is unchanged. The native library constructs it through the public {@code (String)}
 * constructor, so that constructor is part of the JNI contract.
 */
public class SpillLimitExceededException extends IOException {
  private static final long serialVersionUID = 1L;

  public SpillLimitExceededException(String message) {
    super(message);
  }
}
