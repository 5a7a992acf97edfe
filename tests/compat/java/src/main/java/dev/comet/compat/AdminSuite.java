package dev.comet.compat;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.text.ParseException;
import java.text.SimpleDateFormat;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * Runs RocketMQ's own admin CLI (mqadmin, i.e. {@link MQAdminStartup}) against one name server
 * and checks what each command prints.
 *
 * <p>Usage: {@code AdminSuite --namesrv HOST:PORT}. The commands run in this JVM through
 * {@code MQAdminStartup.main0}, the entry point the mqadmin script calls, with standard output
 * captured; that saves a JVM start per command and runs exactly the CLI's code. The data they
 * inspect is made first: a topic created by {@code updateTopic}, messages with known keys sent
 * by the client, and a consumer group (kept online) that consumed them all.
 */
public final class AdminSuite {
  private static final int MESSAGES = 20;

  private final Ctx ctx;
  private final String namesrv;
  private final Steps steps = new Steps();
  private String cluster;
  private String brokerAddr;
  private String topic;
  private String group;
  private String key;
  private final List<SendResult> sends = new ArrayList<>();

  private AdminSuite(Ctx ctx) {
    this.ctx = ctx;
    this.namesrv = ctx.shared.namesrv;
  }

  public static void main(String[] args) {
    if (args.length != 2 || !args[0].equals("--namesrv")) {
      System.err.println("usage: AdminSuite --namesrv HOST:PORT");
      System.exit(2);
    }
    int failed;
    try (Ctx.Shared shared = new Ctx.Shared(args[1]); Ctx ctx = new Ctx(shared, "admin")) {
      failed = new AdminSuite(ctx).runAll();
    } catch (Exception e) {
      System.out.println("FAIL admin_setup: " + e);
      e.printStackTrace(System.out);
      System.out.println("0 passed, 1 failed");
      failed = 1;
    }
    System.exit(failed == 0 ? 0 : 1);
  }

  /** Output of {@code mqadmin cmd args... -n namesrv}. */
  private String mqadmin(String... args) {
    return runMqadmin(namesrv, args);
  }

  /**
   * Output of {@code mqadmin cmd args... -n namesrv}: the CLI's standard output and error,
   * captured while it runs in this JVM.
   */
  static String runMqadmin(String namesrv, String... args) {
    String[] full = new String[args.length + 2];
    System.arraycopy(args, 0, full, 0, args.length);
    full[args.length] = "-n";
    full[args.length + 1] = namesrv;
    // Standard error is captured too: a failing command prints its exception there, and the
    // failure message should say why.
    ByteArrayOutputStream buf = new ByteArrayOutputStream();
    PrintStream originalOut = System.out;
    PrintStream originalErr = System.err;
    synchronized (System.class) {
      PrintStream capture = new PrintStream(buf, true, StandardCharsets.UTF_8);
      System.setOut(capture);
      System.setErr(capture);
      try {
        MQAdminStartup.main0(full, null);
      } finally {
        capture.flush();
        System.setOut(originalOut);
        System.setErr(originalErr);
      }
    }
    String out = buf.toString(StandardCharsets.UTF_8);
    if (System.getenv("COMPAT_DEBUG") != null) {
      System.out.println("---- mqadmin " + String.join(" ", args) + "\n" + out + "----");
    }
    return out;
  }

  /**
   * A trace written by comet-client reads with Java's trace reader: comet-admin (which sends
   * through comet-client) sends a message with tracing on, and mqadmin queryMsgTraceById finds
   * and decodes its Pub record in RMQ_SYS_TRACE_TOPIC. The binary is {@code -Dcomet.admin}.
   */
  private String traceOfCometClient() throws Exception {
    String bin = System.getProperty("comet.admin", "");
    Check.that(new File(bin).canExecute(), "comet-admin not found at '" + bin
        + "' (cargo build --release -p comet-tools)");
    Process process = new ProcessBuilder(bin, "sendMessage", "-n", namesrv, "-t", topic, "-p",
        "traced by comet-client", "-k", key + "-traced", "-m", "true", "--json")
        .redirectErrorStream(true).start();
    String sent = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    Check.that(process.waitFor(60, java.util.concurrent.TimeUnit.SECONDS)
        && process.exitValue() == 0, "comet-admin sendMessage -m true failed: " + sent);
    Matcher id = Pattern.compile("\"msgId\"\\s*:\\s*\"([0-9A-Fa-f]+)\"").matcher(sent);
    Check.that(id.find(), "no msgId in comet-admin's answer: " + sent);
    String msgId = id.group(1);
    String[] out = {""};
    Check.waitFor("the Pub trace of " + msgId, 60_000, () -> {
      out[0] = mqadmin("queryMsgTraceById", "-i", msgId);
      return out[0].contains("Pub ") && out[0].contains("DEFAULT_PRODUCER");
    }, () -> firstLines(out[0]));
    contains(out[0], "success", "the trace records a stored send");
    return "Pub record of " + msgId + " read";
  }

  private void step(String name, Steps.Step body) {
    steps.run(name, body);
  }

  /** A short view of a command's output: its "Caused by" line if it failed, else its start. */
  static String firstLines(String out) {
    String cause = out.lines().filter(l -> l.startsWith("Caused by:")).reduce((a, b) -> b)
        .orElse(null);
    String flat = cause != null ? cause : out.strip().replace('\n', '|');
    return flat.length() > 300 ? flat.substring(0, 300) + "..." : flat;
  }

  private static void contains(String out, String what, String why) {
    Check.that(out.contains(what), why + ": output lacks '" + what + "': " + firstLines(out));
  }

  private int runAll() throws Exception {
    var info = ctx.shared.admin.examineBrokerClusterInfo();
    cluster = info.getClusterAddrTable().keySet().iterator().next();
    brokerAddr = ctx.shared.masterAddrs.get(0);
    topic = ctx.name("t");
    group = ctx.name("cg");
    key = "adminkey-" + ctx.runId();

    step("admin_updateTopic", this::updateTopic);
    step("admin_topicList", () -> {
      String out = mqadmin("topicList");
      Check.that(out.lines().anyMatch(l -> l.strip().equals(topic)),
          "topic not listed: " + firstLines(out));
      return "topic listed";
    });
    step("admin_topicRoute", () -> {
      String out = mqadmin("topicRoute", "-t", topic);
      contains(out, "\"queueDatas\"", "route");
      contains(out, "\"readQueueNums\":4", "route");
      contains(out, "\"writeQueueNums\":4", "route");
      contains(out, brokerAddr, "route");
      return "4/4 queues on " + brokerAddr;
    });
    step("admin_clusterList", () -> {
      String out = mqadmin("clusterList");
      Check.that(out.lines().anyMatch(l -> l.startsWith(cluster) && l.contains(brokerAddr)),
          "no row for " + cluster + " / " + brokerAddr + ": " + firstLines(out));
      return cluster + " " + brokerAddr;
    });
    seed();
    step("admin_topicStatus", this::topicStatus);
    step("admin_brokerStatus", this::brokerStatus);
    step("admin_updateBrokerConfig", this::updateBrokerConfig);
    step("admin_consumerProgress", this::consumerProgress);
    step("admin_consumerStatus", this::consumerStatus);
    step("admin_consumeMessage", this::consumeMessage);
    step("admin_getConsumeStatus", this::consumeStatusFromClients);
    step("admin_statsAll", this::statsAll);
    step("admin_queryCq", this::queryCq);
    step("admin_brokerConsumeStats", this::brokerConsumeStats);
    step("admin_queryConsumeTimeSpan_api", this::queryConsumeTimeSpan);
    step("admin_cloneGroupOffset", this::cloneGroupOffset);
    step("admin_cloneGroupOffset_api", this::cloneGroupOffsetApi);
    step("admin_queryMsgById_offsetId", () -> queryById(sends.get(0).getOffsetMsgId()));
    if (tools5()) {
      // The 4.9.x tool first decodes any id as an offset id (a client's unique id has the same
      // length as an offset id of the same address family), so only the 5.x tool, given the
      // topic, looks a unique id up in the index.
      step("admin_queryMsgById_uniqId", () -> queryById(sends.get(1).getMsgId()));
    }
    step("admin_queryMsgByKey", this::queryByKey);
    step("admin_queryMsgTraceById_of_comet_client", this::traceOfCometClient);

    return steps.summarize();
  }

  private String updateTopic() throws Exception {
    String out = mqadmin("updateTopic", "-c", cluster, "-t", topic, "-r", "4", "-w", "4");
    contains(out, "create topic to " + brokerAddr + " success", "updateTopic");
    Check.waitFor("route of " + topic, 30_000, () -> {
      try {
        return !ctx.shared.admin.examineTopicRouteInfo(topic).getQueueDatas().isEmpty();
      } catch (Exception notYet) {
        return false;
      }
    });
    return "created on " + brokerAddr;
  }

  /** Sends the messages the later commands inspect, and consumes them all in {@link #group}. */
  private void seed() throws Exception {
    DefaultMQProducer p = ctx.producer();
    for (int i = 0; i < MESSAGES; i++) {
      Check.Sent s = Check.make(ctx.runId(), topic, i, new String[] {"TagA"}, 64, 0, i);
      var m = s.toMessage();
      m.setKeys(List.of(key, "k" + i + "-" + ctx.runId()));
      sends.add(p.send(m));
    }
    Collector got = new Collector();
    DefaultMQPushConsumer c = ctx.pushConsumer(group);
    c.subscribe(topic, "*");
    c.registerMessageListener(got.concurrently());
    c.start();
    Check.waitFor(MESSAGES + " messages consumed", 45_000,
        () -> got.distinctCount() >= MESSAGES);
    pushed = c;
  }

  private DefaultMQPushConsumer pushed;

  private String topicStatus() {
    String out = mqadmin("topicStatus", "-t", topic);
    // Rows: #Broker Name  #QID  #Min Offset  #Max Offset  #Last Updated
    Pattern row = Pattern.compile("^\\S+\\s+(\\d+)\\s+(\\d+)\\s+(\\d+)", Pattern.MULTILINE);
    Matcher m = row.matcher(out);
    long total = 0;
    int rows = 0;
    while (m.find()) {
      rows++;
      total += Long.parseLong(m.group(3)) - Long.parseLong(m.group(2));
      int end = out.indexOf('\n', m.end());
      String line = out.substring(m.start(), end < 0 ? out.length() : end);
      // Every queue holds messages, so each has a last-updated time: the store time of its
      // last message (a zero timestamp prints blank or as 1970).
      Check.that(recentDate(line), "queue without a recent Last Updated: " + line.strip());
    }
    Check.that(rows == 4, "expected 4 queue rows, got " + rows + ": " + firstLines(out));
    Check.that(total == MESSAGES, "max-min offsets add up to " + total + ", sent " + MESSAGES);
    return rows + " queues, " + total + " msgs";
  }

  private String brokerStatus() {
    String out = mqadmin("brokerStatus", "-b", brokerAddr);
    Map<String, String> kv = new LinkedHashMap<>();
    for (String line : out.lines().toList()) {
      int colon = line.indexOf(':');
      if (colon > 0) {
        kv.put(line.substring(0, colon).strip(), line.substring(colon + 1).strip());
      }
    }
    for (String k : List.of("brokerVersionDesc", "bootTimestamp", "msgPutTotalTodayNow",
        "msgGetTotalTodayNow", "putTps", "commitLogMaxOffset")) {
      Check.that(kv.containsKey(k), "brokerStatus lacks " + k + ": " + firstLines(out));
    }
    long put = Long.parseLong(kv.get("msgPutTotalTodayNow").split("\\s+")[0]);
    Check.that(put >= MESSAGES, "msgPutTotalTodayNow " + put + " < " + MESSAGES);
    long got = Long.parseLong(kv.get("msgGetTotalTodayNow").split("\\s+")[0]);
    Check.that(got >= MESSAGES, "msgGetTotalTodayNow " + got + " < " + MESSAGES);
    return kv.size() + " keys, version " + kv.get("brokerVersionDesc");
  }

  /** The value getBrokerConfig prints for {@code key} ("key  =  value" lines), or null. */
  private String brokerConfigValue(String key) {
    String out = mqadmin("getBrokerConfig", "-b", brokerAddr);
    Pattern line = Pattern.compile("^" + key + "\\s*=\\s*(\\S*)\\s*$", Pattern.MULTILINE);
    Matcher m = line.matcher(out);
    return m.find() ? m.group(1) : null;
  }

  /** updateBrokerConfig changes a value getBrokerConfig then shows; the default is restored. */
  private String updateBrokerConfig() {
    String before = brokerConfigValue("maxMessageSize");
    Check.that(before != null, "getBrokerConfig lacks maxMessageSize");
    String changed = String.valueOf(Long.parseLong(before) + 1);
    mqadmin("updateBrokerConfig", "-b", brokerAddr, "-k", "maxMessageSize", "-v", changed);
    String after = brokerConfigValue("maxMessageSize");
    mqadmin("updateBrokerConfig", "-b", brokerAddr, "-k", "maxMessageSize", "-v", before);
    Check.that(changed.equals(after), "maxMessageSize is " + after + " after setting " + changed);
    String restored = brokerConfigValue("maxMessageSize");
    Check.that(before.equals(restored), "maxMessageSize not restored: " + restored);
    return "maxMessageSize " + before + " -> " + changed + " -> " + before;
  }

  private String consumerProgress() throws Exception {
    String[] out = new String[1];
    // The consumer's offsets may lag what it consumed by a moment: poll briefly.
    Check.waitFor("consumerProgress to show no lag", 20_000, () -> {
      // What the client's periodic task does (first run 10 s after start), done now.
      pushed.getDefaultMQPushConsumerImpl().persistConsumerOffset();
      out[0] = mqadmin("consumerProgress", "-g", group);
      return Pattern.compile("Diff Total:\\s*0\\b").matcher(out[0]).find();
    }, () -> "last output: " + firstLines(out[0]));
    List<String> rows = out[0].lines().filter(l -> l.startsWith(topic)).toList();
    Check.that(rows.size() == 4, "expected 4 rows for " + topic + ", got " + rows.size() + ": "
        + firstLines(out[0]));
    // Every queue was consumed, so LastTime is the store time of its last consumed message
    // (a zero timestamp prints N/A or a 1970 date).
    for (String row : rows) {
      Check.that(recentDate(row), "row without a recent LastTime: " + row.strip());
    }
    return "4 queues, diff 0, LastTime set";
  }

  private static final Pattern DATE =
      Pattern.compile("(\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}:\\d{2})");

  /**
   * True when {@code line} holds a local date-time (as the tools print them) within an hour
   * of now: the messages this suite inspects were all stored during the run.
   */
  private static boolean recentDate(String line) {
    Matcher m = DATE.matcher(line);
    if (!m.find()) {
      return false;
    }
    try {
      long at = new SimpleDateFormat("yyyy-MM-dd HH:mm:ss").parse(m.group(1)).getTime();
      return Math.abs(System.currentTimeMillis() - at) < 3_600_000L;
    } catch (ParseException e) {
      return false;
    }
  }

  /**
   * queryCq lists queue 0's consume-queue entries: as many as max - min, each with a
   * distinct commit-log offset, a size and TagA's hash code; with -g, the group's live
   * subscription.
   */
  private String queryCq() {
    String out = mqadmin("queryCq", "-t", topic, "-q", "0", "-i", "0", "-c", "100", "-b",
        brokerAddr, "-g", group);
    Matcher bounds = Pattern.compile("max: (\\d+), min: (\\d+)").matcher(out);
    Check.that(bounds.find(), "queryCq printed no bounds: " + firstLines(out));
    long max = Long.parseLong(bounds.group(1));
    long min = Long.parseLong(bounds.group(2));
    Check.that(max > min, "queue 0 is empty: max " + max + ", min " + min);
    Matcher entry = Pattern.compile(
        "physicOffset=(\\d+), physicSize=(\\d+), tagsCode=(-?\\d+)").matcher(out);
    Set<Long> offsets = new HashSet<>();
    while (entry.find()) {
      offsets.add(Long.parseLong(entry.group(1)));
      Check.that(Long.parseLong(entry.group(2)) > 0, "entry of size 0: " + entry.group());
      Check.that(Long.parseLong(entry.group(3)) == "TagA".hashCode(),
          "tagsCode is not TagA's: " + entry.group());
    }
    Check.that(offsets.size() == max - min, offsets.size() + " distinct entries for max "
        + max + " min " + min + ": " + firstLines(out));
    contains(out, "Subscription data", "queryCq -g of an online group");
    return offsets.size() + " entries of queue 0";
  }

  /**
   * brokerConsumeStats prints a row per queue of the suite's group with a real LastTime
   * (rows whose timestamp is 0 are not printed), no lag, and the broker's total.
   */
  private String brokerConsumeStats() {
    String out = mqadmin("brokerConsumeStats", "-b", brokerAddr);
    Pattern row = Pattern.compile("^" + Pattern.quote(topic) + "\\s+" + Pattern.quote(group)
        + "\\s+\\S+\\s+(\\d+)\\s+(\\d+)\\s+(\\d+)\\s+(-?\\d+)\\s+(.*)$", Pattern.MULTILINE);
    Matcher m = row.matcher(out);
    int rows = 0;
    long consumed = 0;
    while (m.find()) {
      rows++;
      consumed += Long.parseLong(m.group(3));
      Check.that(Long.parseLong(m.group(4)) == 0, "lag in " + m.group().strip());
      Check.that(recentDate(m.group(5)), "no recent LastTime: " + m.group().strip());
    }
    Check.that(rows == 4, "expected 4 rows for " + group + ", got " + rows + ": "
        + firstLines(out));
    Check.that(consumed == MESSAGES, "consumer offsets add up to " + consumed);
    contains(out, "Diff Total:", "brokerConsumeStats");
    return rows + " queues, " + consumed + " consumed";
  }

  /**
   * The admin API's queryConsumeTimeSpan (QUERY_CONSUME_TIME_SPAN, what RocketMQ Dashboard
   * calls): per queue, store times of the first and last message that are recent and
   * ordered, the last consumed message's time equal to the last message's (everything was
   * consumed) and so no delay.
   */
  private String queryConsumeTimeSpan() throws Exception {
    long now = System.currentTimeMillis();
    int queues = 0;
    for (var span : ctx.shared.admin.queryConsumeTimeSpan(topic, group)) {
      String where = "queue " + span.getMessageQueue().getQueueId() + ": ";
      long min = span.getMinTimeStamp();
      long max = span.getMaxTimeStamp();
      Check.that(Math.abs(now - min) < 3_600_000L, where + "min time " + min);
      Check.that(max >= min && max <= now + 60_000L, where + "max time " + max + " < " + min);
      Check.that(span.getConsumeTimeStamp() == max,
          where + "consume time " + span.getConsumeTimeStamp() + " != last " + max);
      Check.that(span.getDelayTime() == 0, where + "delay " + span.getDelayTime());
      queues++;
    }
    Check.that(queues == 4, "expected 4 queue spans, got " + queues);
    return queues + " queue spans";
  }

  /**
   * consumerProgress of {@code dest} shows the offsets cloned from the suite's group: every
   * message consumed on every queue. The tools find a group's brokers through its retry
   * topic's route, which a group that never ran lacks, so it is created first.
   */
  private String clonedProgress(String dest) throws Exception {
    String retry = "%RETRY%" + dest;
    String made = mqadmin("updateTopic", "-c", cluster, "-t", retry, "-r", "1", "-w", "1");
    contains(made, "success", "updateTopic " + retry);
    Check.waitFor("route of " + retry, 30_000, () -> {
      try {
        return !ctx.shared.admin.examineTopicRouteInfo(retry).getQueueDatas().isEmpty();
      } catch (Exception notYet) {
        return false;
      }
    });
    String out = mqadmin("consumerProgress", "-g", dest);
    Pattern row = Pattern.compile("^" + Pattern.quote(topic)
        + "\\s+\\S+\\s+(\\d+)\\s+(\\d+)\\s+(\\d+)", Pattern.MULTILINE);
    Matcher m = row.matcher(out);
    int rows = 0;
    long consumed = 0;
    while (m.find()) {
      rows++;
      Check.that(m.group(2).equals(m.group(3)), "queue not caught up: " + m.group().strip());
      consumed += Long.parseLong(m.group(3));
    }
    Check.that(rows == 4, "expected 4 rows for " + dest + ", got " + rows + ": "
        + firstLines(out));
    Check.that(consumed == MESSAGES, dest + " offsets add up to " + consumed);
    return dest + " at " + consumed;
  }

  /**
   * mqadmin cloneGroupOffset (it reads the source's stats and updates each offset). Apache
   * RocketMQ 5.x refuses offset updates of a group it does not know, so the target group is
   * created first, as an operator would.
   */
  private String cloneGroupOffset() throws Exception {
    String dest = ctx.name("cgclone");
    String made = mqadmin("updateSubGroup", "-c", cluster, "-g", dest);
    contains(made, "success", "updateSubGroup " + dest);
    String out = mqadmin("cloneGroupOffset", "-s", group, "-d", dest, "-t", topic);
    contains(out, "clone group offset success", "cloneGroupOffset");
    return clonedProgress(dest);
  }

  /** The admin API's cloneGroupOffset: CLONE_GROUP_OFFSET (314) on the broker. */
  private String cloneGroupOffsetApi() throws Exception {
    String dest = ctx.name("cgcloneapi");
    ctx.shared.admin.cloneGroupOffset(group, dest, topic, false);
    return clonedProgress(dest);
  }

  /**
   * statsAll's row for the seeded topic and group counts every seeded message in (TOPIC_PUT_NUMS)
   * and at least as many out (GROUP_GET_NUMS; redeliveries may add).
   */
  private String statsAll() throws Exception {
    // #Topic #Consumer Group #Accumulation #InTPS #OutTPS #InMsg24Hour #OutMsg24Hour
    Pattern row = Pattern.compile("^" + Pattern.quote(topic) + "\\s+" + Pattern.quote(group)
        + "\\s+(\\d+)\\s+([\\d.,]+)\\s+([\\d.,]+)\\s+(\\d+)\\s+(\\d+)\\s*$",
        Pattern.MULTILINE);
    String[] out = new String[1];
    long[] counts = new long[2];
    Check.waitFor("statsAll to count the seeded messages", 20_000, () -> {
      out[0] = mqadmin("statsAll", "-t", topic);
      Matcher m = row.matcher(out[0]);
      if (!m.find()) {
        return false;
      }
      counts[0] = Long.parseLong(m.group(4));
      counts[1] = Long.parseLong(m.group(5));
      return counts[0] == MESSAGES && counts[1] >= MESSAGES;
    }, () -> "last output: " + firstLines(out[0]));
    return "in " + counts[0] + ", out " + counts[1];
  }

  /** The client id of the seeded push consumer, as the broker lists it. */
  private String pushedClientId() throws Exception {
    var connections = ctx.shared.admin.examineConsumerConnectionInfo(group).getConnectionSet();
    Check.that(connections.size() == 1, "expected one connection of " + group + ", got "
        + connections.size());
    return connections.iterator().next().getClientId();
  }

  /**
   * consumerStatus: without -i it lists each client of the group and writes each one's running
   * info to {@code <now>/<clientId>} under the working directory (removed here); with -i it
   * prints the running info, which the broker fetched from the client with
   * GET_CONSUMER_RUNNING_INFO.
   */
  private String consumerStatus() throws Exception {
    String clientId = pushedClientId();
    long before = System.currentTimeMillis();
    String table;
    try {
      table = mqadmin("consumerStatus", "-g", group);
    } finally {
      removeRunningInfoFiles(before, System.currentTimeMillis());
    }
    Check.that(table.lines().anyMatch(l -> l.startsWith("1 ") && l.contains(clientId)),
        "no row for " + clientId + ": " + firstLines(table));
    contains(table, "Same subscription in the same group of consumer", "consumerStatus");
    String info = mqadmin("consumerStatus", "-g", group, "-i", clientId);
    contains(info, "#Consumer Subscription#", "consumerStatus -i");
    Check.that(Pattern.compile("Topic: " + Pattern.quote(topic) + "\\s").matcher(info).find(),
        "running info lacks the subscription to " + topic + ": " + firstLines(info));
    contains(info, "CONSUME_PASSIVELY", "consumerStatus -i properties");
    return "running info of " + clientId;
  }

  /** Removes the {@code <millis>/} folders consumerStatus wrote between the two times. */
  private static void removeRunningInfoFiles(long fromMs, long toMs) {
    File[] entries = new File(System.getProperty("user.dir")).listFiles();
    for (File entry : entries == null ? new File[0] : entries) {
      String name = entry.getName();
      if (entry.isDirectory() && name.matches("\\d{13}")
          && Long.parseLong(name) >= fromMs && Long.parseLong(name) <= toMs) {
        File[] files = entry.listFiles();
        for (File file : files == null ? new File[0] : files) {
          file.delete();
        }
        entry.delete();
      }
    }
  }

  /**
   * The message-to-one-consumer path (CONSUME_MESSAGE_DIRECTLY) as mqadmin drives it:
   * {@code queryMsgById -g GROUP -d CLIENTID} (mqadmin's consumeMessage command pulls instead).
   * The broker reads the message by its offset id and the client's listener consumes it; the
   * tool prints the ConsumeMessageDirectlyResult. The 5.x tool is given the client's unique id
   * and the topic (it looks the offset id up itself); the 4.9.x tool only takes offset ids.
   */
  private String consumeMessage() throws Exception {
    String clientId = pushedClientId();
    SendResult sent = sends.get(2);
    String out = tools5()
        ? mqadmin("queryMsgById", "-i", sent.getMsgId(), "-t", topic, "-g", group, "-d", clientId)
        : mqadmin("queryMsgById", "-i", sent.getOffsetMsgId(), "-g", group, "-d", clientId);
    contains(out, "consumeResult=CR_SUCCESS", "queryMsgById -g -d");
    return "CR_SUCCESS from " + clientId;
  }

  /**
   * The offsets the broker gathers from every client of the group
   * (INVOKE_BROKER_TO_GET_CONSUMER_STATUS). mqadmin has a getConsumerStatus command but
   * registers it in neither version, so this calls the admin API that command uses.
   */
  private String consumeStatusFromClients() throws Exception {
    String clientId = pushedClientId();
    Map<String, Map<MessageQueue, Long>> table =
        ctx.shared.admin.getConsumeStatus(topic, group, "");
    Check.that(table.containsKey(clientId), "no entry for " + clientId + ": " + table);
    long total = table.get(clientId).entrySet().stream()
        .filter(e -> e.getKey().getTopic().equals(topic))
        .mapToLong(Map.Entry::getValue).sum();
    Check.that(total == MESSAGES, "the client's offsets add up to " + total + ", consumed "
        + MESSAGES + ": " + table);
    return clientId + " at " + total;
  }

  /** True for the 5.x tools, whose queryMsgById requires -t (4.9.x rejects it). */
  private static boolean tools5() {
    return Ctx.client5();
  }

  private String queryById(String id) {
    String out = tools5() ? mqadmin("queryMsgById", "-i", id, "-t", topic)
        : mqadmin("queryMsgById", "-i", id);
    contains(out, topic, "queryMsgById " + id);
    contains(out, key, "queryMsgById keys");
    contains(out, "TagA", "queryMsgById tags");
    return "found " + id;
  }

  private String queryByKey() {
    String out = mqadmin("queryMsgByKey", "-t", topic, "-k", key);
    List<String> missing = new ArrayList<>();
    for (SendResult r : sends) {
      if (!out.contains(r.getMsgId())) {
        missing.add(r.getMsgId());
      }
    }
    if (!missing.isEmpty()) {
      throw new Check.Failure(missing.size() + " of " + MESSAGES + " ids not listed, e.g. "
          + missing.get(0) + ": " + firstLines(out));
    }
    return MESSAGES + " ids listed";
  }
}
