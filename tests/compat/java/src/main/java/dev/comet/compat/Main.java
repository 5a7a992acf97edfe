package dev.comet.compat;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Runs the compatibility scenarios of the classic RocketMQ Java client against one name server.
 *
 * <p>Usage: {@code Main --namesrv HOST:PORT [--only a,b] [--scenario-timeout-s N]}. Prints one
 * {@code PASS name (ms)} or {@code FAIL name (ms): reason} line per scenario, then
 * {@code N passed, N failed}; exits 1 when any scenario failed, 2 on bad arguments.
 */
public final class Main {
  private Main() {}

  /** A scenario body: throws (usually {@link Check.Failure}) to fail. */
  interface Scenario {
    String run(Ctx ctx) throws Exception;
  }

  public static void main(String[] args) {
    // The failover suite's phases come through java/run.sh's "--" as "--suite failover".
    int suite = Arrays.asList(args).indexOf("--suite");
    if (suite >= 0 && suite + 1 < args.length && args[suite + 1].equals("failover")) {
      List<String> rest = new ArrayList<>(Arrays.asList(args));
      rest.subList(suite, suite + 2).clear();
      FailoverSuite.main(rest.toArray(new String[0]));
      return;
    }
    String namesrv = null;
    List<String> only = null;
    long scenarioTimeoutS = 150;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--namesrv" -> namesrv = args[++i];
        case "--only" -> only = Arrays.asList(args[++i].split(","));
        case "--scenario-timeout-s" -> scenarioTimeoutS = Long.parseLong(args[++i]);
        default -> usage("unknown argument " + args[i]);
      }
    }
    if (namesrv == null) {
      usage("--namesrv is required");
    }
    Map<String, Scenario> all = Scenarios.all();
    if (only != null) {
      for (String name : only) {
        if (!all.containsKey(name)) {
          usage("unknown scenario " + name + "; known: " + all.keySet());
        }
      }
      Map<String, Scenario> picked = new LinkedHashMap<>();
      for (String name : only) {
        picked.put(name, all.get(name));
      }
      all = picked;
    }
    System.exit(runAll(namesrv, all, scenarioTimeoutS));
  }

  private static void usage(String why) {
    System.err.println("error: " + why);
    System.err.println(
        "usage: Main --namesrv HOST:PORT [--only scenario,...] [--scenario-timeout-s N]");
    System.exit(2);
  }

  private static int runAll(String namesrv, Map<String, Scenario> scenarios, long timeoutS) {
    String version = org.apache.rocketmq.common.MQVersion.getVersionDesc(
        org.apache.rocketmq.common.MQVersion.CURRENT_VERSION);
    System.out.println("rocketmq-client " + version + " against name server " + namesrv);
    List<String> failed = new ArrayList<>();
    int passed = 0;
    ExecutorService pool = Executors.newCachedThreadPool(r -> {
      Thread t = new Thread(r, "scenario");
      t.setDaemon(true);
      return t;
    });
    Ctx.Shared shared;
    try {
      shared = new Ctx.Shared(namesrv);
    } catch (Exception e) {
      System.out.println("FAIL setup: cannot reach the name server / broker: " + e);
      System.out.println("0 passed, " + scenarios.size() + " failed");
      return 1;
    }
    for (Map.Entry<String, Scenario> entry : scenarios.entrySet()) {
      String name = entry.getKey();
      long startNs = System.nanoTime();
      Ctx ctx = new Ctx(shared, name);
      Future<String> f = pool.submit(() -> entry.getValue().run(ctx));
      String outcome;
      try {
        String detail = f.get(timeoutS, TimeUnit.SECONDS);
        outcome = null;
        System.out.printf("PASS %-28s (%5d ms) %s%n", name, elapsedMs(startNs),
            detail == null ? "" : detail);
        passed++;
      } catch (TimeoutException e) {
        f.cancel(true);
        outcome = "timed out after " + timeoutS + " s";
      } catch (ExecutionException e) {
        Throwable cause = e.getCause();
        outcome = cause instanceof Check.Failure ? cause.getMessage() : cause.toString();
        if (!(cause instanceof Check.Failure)) {
          cause.printStackTrace(System.out);
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        outcome = "interrupted";
      } finally {
        ctx.close();
      }
      if (outcome != null) {
        System.out.printf("FAIL %-28s (%5d ms): %s%n", name, elapsedMs(startNs), outcome);
        failed.add(name);
      }
      System.out.flush();
    }
    shared.close();
    pool.shutdownNow();
    if (!failed.isEmpty()) {
      System.out.println("failed scenarios: " + String.join(", ", failed));
    }
    System.out.println(passed + " passed, " + failed.size() + " failed");
    return failed.isEmpty() ? 0 : 1;
  }

  private static long elapsedMs(long startNs) {
    return (System.nanoTime() - startNs) / 1_000_000;
  }
}
