package dev.comet.compat;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * One phase of the master-and-slave suite ({@code tests/compat/ha/run.sh}, which starts the
 * pair, runs the phases in order with both client generations, and stops the master between
 * them).
 *
 * <p>Usage: {@code HaSuite --namesrv HOST:PORT --phase setup|produce|consume --topic T
 * --run-id R --cluster C --broker-name B --master HOST:PORT --slave HOST:PORT [--from I]
 * [--count N]}.
 *
 * <ul>
 *   <li>{@code setup}: creates the topic (4 queues) on the master and waits until the name
 *       server routes it and the slave's copy of the master's topics holds it (a slave serves
 *       pulls only of topics it knows, and it copies them every 10 s).
 *   <li>{@code produce}: a producer sends messages {@code from .. from+count-1} with
 *       {@code send} (sync) to the SYNC_MASTER, each answered SEND_OK; then mqadmin
 *       clusterList lists the broker name with id 0 at the master's address and id 1 at the
 *       slave's.
 *   <li>{@code consume} (master stopped): a push consumer of a new group, from the first
 *       offset, receives messages {@code 0 .. count-1}, every one intact, from the slave.
 * </ul>
 *
 * Step names carry the client generation ({@code ha5_}, {@code ha4_}), as both run in one
 * suite. Prints {@code PASS}/{@code FAIL} per step and {@code N passed, N failed}; exits 1
 * when any failed, 2 on bad arguments.
 */
public final class HaSuite {
  private static final String[] TAGS = {"TagA", "TagB"};
  private static final int QUEUES = 4;
  /** Read and write permission bits of a topic (PermName.PERM_READ | PERM_WRITE). */
  private static final int PERM_READ_WRITE = 4 | 2;
  /** Bodies above 4 KiB are compressed by the producer: every 25th message is that large. */
  private static final int LARGE_BODY_BYTES = 8 * 1024;
  private static final long WAIT_MS = 60_000;
  /**
   * The clients' timeout for name server and broker calls other than sends (3 s by default):
   * on a loaded 2-core machine running the pair and two JVMs, a route look-up once took
   * longer, which says nothing about replication.
   */
  private static final int CLIENT_API_TIMEOUT_MS = 10_000;

  private final Map<String, String> args;
  private final String namesrv;
  private final String topic;
  private final String runId;
  private final String prefix = Ctx.client5() ? "ha5_" : "ha4_";
  private final Steps steps = new Steps();

  private HaSuite(Map<String, String> args) {
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
    for (String required : List.of("namesrv", "phase", "topic", "run-id", "cluster",
        "broker-name", "master", "slave")) {
      if (!args.containsKey(required)) {
        usage("--" + required + " is required");
      }
    }
    HaSuite suite = new HaSuite(args);
    switch (args.get("phase")) {
      case "setup" -> suite.step("ha_create_topic", suite::createTopic);
      case "produce" -> {
        suite.step(suite.prefix + "send_sync_SEND_OK", suite::produce);
        suite.step(suite.prefix + "clusterList_master_slave", suite::clusterList);
      }
      case "consume" -> suite.step(suite.prefix + "push_from_slave", suite::consume);
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
    System.err.println("usage: HaSuite --namesrv HOST:PORT --phase setup|produce|consume"
        + " --topic T --run-id R --cluster C --broker-name B --master HOST:PORT"
        + " --slave HOST:PORT [--from I] [--count N]");
    System.exit(2);
  }

  private int intArg(String name) {
    String value = args.get(name);
    if (value == null) {
      usage("--" + name + " is required in phase " + args.get("phase"));
    }
    return Integer.parseInt(value);
  }

  /** Message {@code i} of the run: the same on the sending and on the receiving side. */
  private Check.Sent message(int i) {
    int bodyBytes = i % 25 == 0 ? LARGE_BODY_BYTES : 100 + i % 300;
    return Check.make(runId, topic, i, TAGS, bodyBytes, 0, i);
  }

  private String createTopic() throws Exception {
    String master = args.get("master");
    String slave = args.get("slave");
    DefaultMQAdminExt admin = new DefaultMQAdminExt(10_000);
    admin.setNamesrvAddr(namesrv);
    admin.setInstanceName("ha-admin-" + runId);
    admin.setAdminExtGroup("ha_admin_" + runId);
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

  private String produce() throws Exception {
    int from = intArg("from");
    int count = intArg("count");
    DefaultMQProducer producer = new DefaultMQProducer(prefix + "pg_" + runId);
    producer.setNamesrvAddr(namesrv);
    producer.setInstanceName(prefix + "producer_" + runId);
    producer.setSendMsgTimeout(10_000);
    producer.setMqClientApiTimeout(CLIENT_API_TIMEOUT_MS);
    // A status other than SEND_OK must show, not be retried on another broker.
    producer.setRetryAnotherBrokerWhenNotStoreOK(false);
    producer.start();
    try {
      for (int i = from; i < from + count; i++) {
        SendResult result = producer.send(message(i).toMessage());
        Check.that(result.getSendStatus() == SendStatus.SEND_OK,
            "message " + i + ": " + result.getSendStatus() + " (" + result + ")");
        String broker = result.getMessageQueue().getBrokerName();
        Check.that(broker.equals(args.get("broker-name")),
            "message " + i + " went to broker " + broker);
      }
    } finally {
      producer.shutdown();
    }
    return count + " sends SEND_OK";
  }

  /** mqadmin clusterList rows: #Cluster Name, #Broker Name, #BID, #Addr, then figures. */
  private String clusterList() {
    String out = AdminSuite.runMqadmin(namesrv, "clusterList");
    String cluster = args.get("cluster");
    String brokerName = args.get("broker-name");
    Map<String, String> addrById = new TreeMap<>();
    for (String line : out.lines().toList()) {
      String[] cells = line.strip().split("\\s+");
      if (cells.length >= 4 && cells[0].equals(cluster) && cells[1].equals(brokerName)) {
        addrById.put(cells[2], cells[3]);
      }
    }
    Map<String, String> expected = new TreeMap<>();
    expected.put("0", args.get("master"));
    expected.put("1", args.get("slave"));
    Check.that(addrById.equals(expected), "rows of " + cluster + "/" + brokerName + " are "
        + addrById + ", expected " + expected + ": " + AdminSuite.firstLines(out));
    return brokerName + " " + addrById;
  }

  private String consume() throws Exception {
    int count = intArg("count");
    List<Check.Sent> expected = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      expected.add(message(i));
    }
    Collector got = new Collector();
    DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(prefix + "cg_" + runId);
    consumer.setNamesrvAddr(namesrv);
    consumer.setInstanceName(prefix + "consumer_" + runId);
    consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
    consumer.setMqClientApiTimeout(CLIENT_API_TIMEOUT_MS);
    consumer.subscribe(topic, "*");
    consumer.registerMessageListener(got.concurrently());
    consumer.start();
    try {
      Check.waitFor(count + " messages from the slave", WAIT_MS,
          () -> got.distinctCount() >= count, () -> got.distinctCount() + " arrived");
    } finally {
      consumer.shutdown();
    }
    // One member and no rebalance: a duplicate would be a fault, as in the client scenarios.
    return Check.verify(expected, got.arrivals(), false) + " from the slave";
  }
}
