package dev.comet.compat;

import java.util.LinkedHashMap;
import java.util.Map;

/** The named steps of a suite: each is timed and reported as one PASS or FAIL line. */
final class Steps {
  /** A step body: throws (usually {@link Check.Failure}) to fail; returns a detail to print. */
  interface Step {
    String run() throws Exception;
  }

  /** Step name to its failure, null for a step that passed, in the order they ran. */
  private final Map<String, String> failures = new LinkedHashMap<>();

  /** Runs {@code body}, prints its line and records the outcome. */
  void run(String name, Step body) {
    long startNs = System.nanoTime();
    String failure = null;
    String detail = "";
    try {
      detail = body.run();
    } catch (Check.Failure e) {
      failure = e.getMessage();
    } catch (Exception e) {
      failure = e.toString();
    }
    long ms = (System.nanoTime() - startNs) / 1_000_000;
    if (failure == null) {
      System.out.printf("PASS %-28s (%5d ms) %s%n", name, ms, detail);
    } else {
      System.out.printf("FAIL %-28s (%5d ms): %s%n", name, ms, failure);
    }
    System.out.flush();
    failures.put(name, failure);
  }

  /**
   * {@link #run}, and an exception other than a check's failure also leaves its stack trace on
   * stderr (a broken client call needs more than its message).
   */
  void runTraced(String name, Step body) {
    run(name, () -> {
      try {
        return body.run();
      } catch (Check.Failure e) {
        throw e;
      } catch (Exception e) {
        System.err.println(name + " failed:");
        e.printStackTrace(System.err);
        throw e;
      }
    });
  }

  /** Prints {@code N passed, N failed} and returns how many failed. */
  int summarize() {
    long failed = failures.values().stream().filter(v -> v != null).count();
    System.out.println((failures.size() - failed) + " passed, " + failed + " failed");
    return (int) failed;
  }
}
