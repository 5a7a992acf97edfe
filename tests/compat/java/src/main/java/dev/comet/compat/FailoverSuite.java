package dev.comet.compat;

import java.io.IOException;
import java.io.PrintWriter;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * One phase of the failover suite ({@code tests/compat/failover/run.sh}, which starts a
 * controller and two brokers in controller mode, runs the phases, and kills the master while
 * the producer sends).
 *
 * <p>Usage: {@code FailoverSuite --namesrv HOST:PORT --phase setup|produce|consume --topic T
 * --run-id R [--master HOST:PORT --slave HOST:PORT] [--count N --acks FILE --hold-at I
 * --go-file FILE] [--acks FILE]}.
 *
 * <ul>
 *   <li>{@code setup} ({@code --master}, {@code --slave}): creates the topic (4 queues) on the
 *       master and waits until the name server routes it and the slave's copy of the master's
 *       topics holds it.
 *   <li>{@code produce} ({@code --count}, {@code --acks}, {@code --hold-at},
 *       {@code --go-file}): one producer sends messages {@code 0 .. count-1} one at a time
 *       with {@code send} (sync). Each attempt's outcome is appended to the acks file at once
 *       (the driving script reads it while the phase runs): {@code OK index ack_ms queue
 *       offset store_host} for SEND_OK, {@code ERR index ms reason} for an exception or
 *       another status. A failed message is sent again, with a new message id but the same
 *       body, after a short pause, until it is answered SEND_OK or the phase's deadline
 *       passes. Before message {@code hold-at} the producer waits for the go file, so the
 *       script's kill of the master falls inside the run however fast the sends are.
 *   <li>{@code consume} ({@code --acks}): a push consumer of a new group, from the first
 *       offset, must receive every body answered SEND_OK, intact; a body may arrive more than
 *       once only if it was sent more than once (a failed attempt may still have been
 *       stored). The step waits until it has also seen as many messages as the topic's
 *       queues hold, so a stored duplicate shows before the check.
 * </ul>
 *
 * Step names carry the client generation ({@code failover5_}, {@code failover4_}). Prints
 * {@code PASS}/{@code FAIL} per step and {@code N passed, N failed}; exits 1 when any failed,
 * 2 on bad arguments.
 */
public final class FailoverSuite {
  private static final String[] TAGS = {"TagA", "TagB"};
  private static final int QUEUES = 4;
  /** Read and write permission bits of a topic (PermName.PERM_READ | PERM_WRITE). */
  private static final int PERM_READ_WRITE = 4 | 2;
  /** Bodies above 4 KiB are compressed by the producer: every 25th message is that large. */
  private static final int LARGE_BODY_BYTES = 8 * 1024;
  private static final long WAIT_MS = 60_000;
  /** The whole produce phase, failover included; the failover itself needs seconds. */
  private static final long PRODUCE_DEADLINE_MS = 180_000;
  /** Pause before a failed message is sent again, as an application would back off. */
  private static final long RETRY_PAUSE_MS = 200;
  /**
   * How often the clients ask the name server for routes (30 s by default): an ordinary
   * application setting, here 1 s so the producer learns the new master's address soon
   * after the election instead of at its next half-minute poll.
   */
  private static final int POLL_NAME_SERVER_INTERVAL_MS = 1_000;
  /**
   * The clients' timeout for name server and broker calls other than sends (3 s by default):
   * on a loaded 2-core machine running the brokers and two JVMs, a route look-up once took
   * longer, which says nothing about failover.
   */
  private static final int CLIENT_API_TIMEOUT_MS = 10_000;
  /** At most this many missing bodies are named in a failure; the count is always given. */
  private static final int MISSING_LISTED_MAX = 50;

  private final Map<String, String> args;
  private final String namesrv;
  private final String topic;
  private final String runId;
  private final String prefix = Ctx.client5() ? "failover5_" : "failover4_";
  private final Steps steps = new Steps();

  private FailoverSuite(Map<String, String> args) {
    this.args = args;
    this.namesrv = args.get("namesrv");
    this.topic = args.get("topic");
    this.runId = args.get("run-id");
  }

  public static void main(String[] argv) {
    Map<String, String> args = new TreeMap<>();
    for (int i = 0; i + 1 < argv.length; i += 2) {
      if (!argv[i].startsWith("--")) {
        usage("unexpected argument " + argv[i]);
      }
      args.put(argv[i].substring(2), argv[i + 1]);
    }
    if (argv.length % 2 != 0) {
      usage("option " + argv[argv.length - 1] + " needs a value");
    }
    for (String required : List.of("namesrv", "phase", "topic", "run-id")) {
      if (!args.containsKey(required)) {
        usage("--" + required + " is required");
      }
    }
    FailoverSuite suite = new FailoverSuite(args);
    switch (args.get("phase")) {
      case "setup" -> suite.step("failover_create_topic", suite::createTopic);
      case "produce" -> suite.step(suite.prefix + "send_through_failover", suite::produce);
      case "consume" -> suite.step(suite.prefix + "push_every_SEND_OK", suite::consume);
      default -> usage("--phase must be setup, produce or consume");
    }
    System.exit(suite.steps.summarize() == 0 ? 0 : 1);
  }

  /** Runs a step; an exception other than a check's failure leaves its trace on stderr. */
  private void step(String name, Steps.Step body) {
    steps.runTraced(name, body);
  }

  private static void usage(String why) {
    System.err.println("error: " + why);
    System.err.println("usage: FailoverSuite --namesrv HOST:PORT --phase setup|produce|consume"
        + " --topic T --run-id R [--master HOST:PORT --slave HOST:PORT]"
        + " [--count N --acks FILE --hold-at I --go-file FILE] [--acks FILE]");
    System.exit(2);
  }

  private String arg(String name) {
    String value = args.get(name);
    if (value == null) {
      usage("--" + name + " is required in phase " + args.get("phase"));
    }
    return value;
  }

  private int intArg(String name) {
    String value = arg(name);
    try {
      return Integer.parseInt(value);
    } catch (NumberFormatException e) {
      usage("--" + name + " must be a number, not " + value);
      return 0;
    }
  }

  /** Message {@code i} of the run: the same on the sending and on the receiving side. */
  private Check.Sent message(int i) {
    int bodyBytes = i % 25 == 0 ? LARGE_BODY_BYTES : 100 + i % 300;
    return Check.make(runId, topic, i, TAGS, bodyBytes, 0, i);
  }

  private String createTopic() throws Exception {
    String master = arg("master");
    String slave = arg("slave");
    DefaultMQAdminExt admin = new DefaultMQAdminExt(10_000);
    admin.setNamesrvAddr(namesrv);
    admin.setInstanceName("failover-admin-" + runId);
    admin.setAdminExtGroup("failover_admin_" + runId);
    admin.start();
    try {
      admin.createAndUpdateTopicConfig(master,
          new TopicConfig(topic, QUEUES, QUEUES, PERM_READ_WRITE));
      Check.waitFor("the name server's route of " + topic, WAIT_MS, () -> {
        try {
          return !admin.examineTopicRouteInfo(topic).getQueueDatas().isEmpty();
        } catch (Exception notYet) {
          return false;
        }
      });
      // The slave copies its master's topics every 10 s; once it holds the topic, a
      // promotion keeps it with its four queues whatever the kill interrupts.
      Check.waitFor("the slave's copy of the master's topics to hold " + topic, WAIT_MS, () -> {
        try {
          return admin.getAllTopicConfig(slave, 10_000).getTopicConfigTable()
              .containsKey(topic);
        } catch (Exception notYet) {
          return false;
        }
      });
    } finally {
      admin.shutdown();
    }
    return topic + " on " + master + ", copied by " + slave;
  }

  /** {@code host:port} of the broker that stored a message, read from its offset msgId. */
  private static String storeHost(SendResult result) {
    try {
      SocketAddress address = MessageDecoder.decodeMessageId(result.getOffsetMsgId())
          .getAddress();
      if (address instanceof InetSocketAddress inet) {
        return inet.getAddress().getHostAddress() + ":" + inet.getPort();
      }
      return String.valueOf(address);
    } catch (Exception undecodable) {
      return "unknown(" + result.getOffsetMsgId() + ")";
    }
  }

  private String produce() throws Exception {
    int count = intArg("count");
    int holdAt = intArg("hold-at");
    Path acks = Path.of(arg("acks"));
    Path goFile = Path.of(arg("go-file"));
    DefaultMQProducer producer = new DefaultMQProducer(prefix + "pg_" + runId);
    producer.setNamesrvAddr(namesrv);
    producer.setInstanceName(prefix + "producer_" + runId);
    producer.setPollNameServerInterval(POLL_NAME_SERVER_INTERVAL_MS);
    producer.setMqClientApiTimeout(CLIENT_API_TIMEOUT_MS);
    // One broker name: a status other than SEND_OK is this loop's to retry, not the client's.
    producer.setRetryAnotherBrokerWhenNotStoreOK(false);
    producer.start();
    long deadline = System.currentTimeMillis() + PRODUCE_DEADLINE_MS;
    int failedAttempts = 0;
    Set<Integer> retried = new TreeSet<>();
    Map<String, Integer> failureKinds = new TreeMap<>();
    try (PrintWriter out = new PrintWriter(Files.newBufferedWriter(acks,
        StandardCharsets.UTF_8))) {
      for (int i = 0; i < count; i++) {
        if (i == holdAt) {
          Check.waitFor("the go file " + goFile + " before message " + i, WAIT_MS,
              () -> Files.exists(goFile));
        }
        while (true) {
          Check.that(System.currentTimeMillis() < deadline, "message " + i
              + " not answered SEND_OK within " + PRODUCE_DEADLINE_MS + " ms of the start ("
              + failedAttempts + " failed attempts: " + failureKinds + ")");
          String failure;
          try {
            SendResult result = producer.send(message(i).toMessage());
            if (result.getSendStatus() == SendStatus.SEND_OK) {
              out.printf("OK %d %d %d %d %s%n", i, System.currentTimeMillis(),
                  result.getMessageQueue().getQueueId(), result.getQueueOffset(),
                  storeHost(result));
              out.flush();
              break;
            }
            failure = result.getSendStatus().toString();
          } catch (Exception e) {
            failure = e.getClass().getSimpleName() + ": " + e.getMessage();
          }
          failedAttempts++;
          retried.add(i);
          String kind = failure.replaceAll("[\\s,:(\\[].*", "");
          failureKinds.merge(kind, 1, Integer::sum);
          out.printf("ERR %d %d %s%n", i, System.currentTimeMillis(),
              failure.replaceAll("\\s+", " "));
          out.flush();
          Thread.sleep(RETRY_PAUSE_MS);
        }
      }
    } finally {
      producer.shutdown();
    }
    Check.that(Files.exists(goFile), "the run ended without the go file " + goFile);
    return count + " SEND_OK; " + failedAttempts + " failed attempts " + failureKinds
        + ", " + retried.size() + " message(s) sent more than once";
  }

  /** What the acks file says: bodies answered SEND_OK, and those sent more than once. */
  private record Acks(Set<Integer> acked, Set<Integer> retried) {}

  private static Acks readAcks(Path file) throws IOException {
    Set<Integer> acked = new TreeSet<>();
    Set<Integer> retried = new TreeSet<>();
    for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
      String[] cells = line.split(" ", 3);
      if (cells.length < 2) {
        continue;
      }
      int index = Integer.parseInt(cells[1]);
      switch (cells[0]) {
        case "OK" -> {
          // A second SEND_OK for one body would be the producer's fault, not a broker's.
          Check.that(acked.add(index), "message " + index + " acked twice in " + file);
        }
        case "ERR" -> retried.add(index);
        default -> throw new Check.Failure("unreadable line in " + file + ": " + line);
      }
    }
    return new Acks(acked, retried);
  }

  /** How many messages the topic's queues hold now (max minus min offset, summed). */
  private static long storedCount(DefaultMQAdminExt admin, String topic) throws Exception {
    // The stats classes moved package between 4.9.x and 5.x: named by var only.
    var stats = admin.examineTopicStats(topic);
    long stored = 0;
    for (var offsets : stats.getOffsetTable().values()) {
      stored += offsets.getMaxOffset() - offsets.getMinOffset();
    }
    return stored;
  }

  private String consume() throws Exception {
    Acks acks = readAcks(Path.of(arg("acks")));
    Check.that(!acks.acked().isEmpty(), "no message was answered SEND_OK");
    List<Check.Sent> expected = new ArrayList<>();
    Map<String, Integer> indexByCid = new HashMap<>();
    for (int i : acks.acked()) {
      Check.Sent sent = message(i);
      expected.add(sent);
      indexByCid.put(sent.cid(), i);
    }
    Collector got = new Collector();
    DefaultMQAdminExt admin = new DefaultMQAdminExt(10_000);
    admin.setNamesrvAddr(namesrv);
    admin.setInstanceName(prefix + "admin_" + runId);
    admin.setAdminExtGroup(prefix + "admin_" + runId);
    DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(prefix + "cg_" + runId);
    consumer.setNamesrvAddr(namesrv);
    consumer.setInstanceName(prefix + "consumer_" + runId);
    consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
    consumer.setPollNameServerInterval(POLL_NAME_SERVER_INTERVAL_MS);
    consumer.setMqClientApiTimeout(CLIENT_API_TIMEOUT_MS);
    consumer.subscribe(topic, "*");
    consumer.registerMessageListener(got.concurrently());
    admin.start();
    long stored;
    try {
      stored = storedCount(admin, topic);
      consumer.start();
      try {
        Check.waitFor("every body answered SEND_OK", WAIT_MS, () -> {
          Set<String> distinct = new LinkedHashSet<>();
          for (MessageExt m : got.arrivals()) {
            distinct.add(m.getUserProperty("cid"));
          }
          return distinct.containsAll(indexByCid.keySet());
        }, () -> missingReport(indexByCid, got.arrivals()));
        // Messages stored by an attempt whose answer was lost are in the queues too; waiting
        // for them makes a duplicate of a body sent once show before the check.
        Check.waitFor(stored + " stored messages", WAIT_MS,
            () -> got.arrivals().size() >= stored,
            () -> got.arrivals().size() + " arrived");
      } finally {
        consumer.shutdown();
      }
    } finally {
      admin.shutdown();
    }
    List<MessageExt> arrivals = got.arrivals();
    Map<String, Integer> times = new HashMap<>();
    List<MessageExt> ofAcked = new ArrayList<>();
    List<String> problems = new ArrayList<>();
    for (MessageExt m : arrivals) {
      String cid = m.getUserProperty("cid");
      int index = indexOf(m);
      boolean sentAgain = acks.retried().contains(index) && message(index).cid().equals(cid);
      if (!indexByCid.containsKey(cid) && !sentAgain) {
        problems.add("message " + index + " arrived but was never sent: cid=" + cid
            + " id=" + m.getMsgId());
        continue;
      }
      if (times.merge(cid, 1, Integer::sum) == 2 && !sentAgain) {
        problems.add("message " + index + " was sent once but arrived twice");
      }
      if (indexByCid.containsKey(cid)) {
        ofAcked.add(m);
      }
    }
    Check.that(problems.isEmpty(), problems.size() + " problem(s): "
        + String.join("; ", problems.subList(0, Math.min(8, problems.size()))));
    // Every arrival's topic, body, tags, keys and properties against what was sent.
    String intact = Check.verify(expected, Check.firstArrivals(ofAcked), false);
    int duplicates = arrivals.size() - times.size();
    return intact + " (every SEND_OK body), " + arrivals.size() + " deliveries of " + stored
        + " stored, " + duplicates + " duplicate(s); " + acks.retried().size()
        + " body(ies) sent more than once";
  }

  /** The message index an arrival carries ({@code idx}), -1 when it has none. */
  private static int indexOf(MessageExt m) {
    try {
      return Integer.parseInt(m.getUserProperty("idx"));
    } catch (NumberFormatException missing) {
      return -1;
    }
  }

  /** The indexes of the bodies answered SEND_OK that did not arrive. */
  private static String missingReport(Map<String, Integer> indexByCid,
                                      List<MessageExt> arrivals) {
    Set<String> seen = new LinkedHashSet<>();
    for (MessageExt m : arrivals) {
      seen.add(m.getUserProperty("cid"));
    }
    Set<Integer> missing = new TreeSet<>();
    indexByCid.forEach((cid, index) -> {
      if (!seen.contains(cid)) {
        missing.add(index);
      }
    });
    List<Integer> listed = new ArrayList<>(missing).subList(0,
        Math.min(MISSING_LISTED_MAX, missing.size()));
    return missing.size() + " of " + indexByCid.size() + " SEND_OK bodies missing, messages "
        + listed + (missing.size() > listed.size() ? " ..." : "");
  }
}
