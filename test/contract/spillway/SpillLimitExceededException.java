package spillway;

import java.io.IOException;

/** The contract's exception for a write that would take a plan past its limit. */
public class SpillLimitExceededException extends IOException {
  public SpillLimitExceededException(String message) {
    super(message);
  }
}
