package dev.comet.compat.proxy;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import dev.comet.compat.proxy.Expect.Arrivals;
import dev.comet.compat.proxy.Expect.Sent;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

/**
 * The 5.x gRPC Java SDK's scenarios through Apache RocketMQ's proxy.
 *
 * <pre>
 *   Main --namesrv HOST:PORT --endpoint HOST:PORT [--only a,b]      run the scenarios
 *   Main setup --namesrv HOST:PORT [--topic NAME:TYPE]... [--group NAME[:orderly]]...
 * </pre>
 *
 * <p>The name server is only used to create topics and groups at the brokers; every client
 * speaks gRPC to the proxy's endpoint. Prints "PASS name (ms)" or "FAIL name: reason" per
 * scenario and "N passed, N failed"; exits 1 on any failure.
 */
public final class Main {
  private static final long SCENARIO_TIMEOUT_MS = 150_000;
  private static final long ARRIVAL_WAIT_MS = 60_000;
  /** How long a step waits for what must not arrive. */
  private static final long SETTLE_MS = 3_000;
  private static final Duration INVISIBLE = Duration.ofSeconds(20);
  private static final FilterExpression ALL = new FilterExpression("*", FilterExpressionType.TAG);

  private final String namesrv;
  private final ClientServiceProvider provider = ClientServiceProvider.loadService();
  private final ClientConfiguration clientConfig;
  private final String runId = Long.toString(System.currentTimeMillis() % 100_000_000L, 36);

  private Main(String namesrv, String endpoint) {
    this.namesrv = namesrv;
    this.clientConfig = ClientConfiguration.newBuilder().setEndpoints(endpoint).enableSsl(false)
        .setRequestTimeout(Duration.ofSeconds(10)).build();
  }

  private static final long T0 = System.currentTimeMillis();

  /** Progress on stderr (the runner keeps it beside the results), to tell where time went. */
  static void note(String what) {
    System.err.printf("[%7.1f s] %s: %s%n", (System.currentTimeMillis() - T0) / 1000.0,
        Thread.currentThread().getName(), what);
  }

  interface Scenario {
    void run() throws Exception;
  }

  public static void main(String[] args) throws Exception {
    if (args.length > 0 && args[0].equals("setup")) {
      System.exit(setup(args));
    }
    String namesrv = null;
    String endpoint = null;
    Set<String> only = null;
    for (int i = 0; i < args.length; i += 2) {
      String value = i + 1 < args.length ? args[i + 1] : null;
      switch (args[i]) {
        case "--namesrv" -> namesrv = value;
        case "--endpoint" -> endpoint = value;
        case "--only" -> only = Set.of(value.split(","));
        default -> usage("unknown option " + args[i]);
      }
    }
    if (namesrv == null || endpoint == null) {
      usage("--namesrv and --endpoint are required");
    }
    Main m = new Main(namesrv, endpoint);
    Map<String, Scenario> all = new LinkedHashMap<>();
    all.put("grpc_producer_normal", m::producerNormal);
    all.put("grpc_producer_fifo", m::producerFifo);
    all.put("grpc_producer_delay", m::producerDelay);
    all.put("grpc_producer_transaction", m::producerTransaction);
    all.put("grpc_simple_consumer_invisible", m::simpleConsumerInvisible);
    all.put("grpc_push_consumer", m::pushConsumer);
    if (only != null) {
      for (String name : only) {
        if (!all.containsKey(name)) {
          usage("unknown scenario " + name + " (known: " + all.keySet() + ")");
        }
      }
    }
    int passed = 0;
    int failed = 0;
    // The scenarios run side by side (each has its own topic, group and clients): most of
    // their time is spent waiting for the broker (invisible durations, the transaction
    // check interval, delivery timestamps), so one after the other would take minutes.
    ExecutorService pool = Executors.newCachedThreadPool(r -> {
      Thread t = new Thread(r);
      t.setDaemon(true);
      return t;
    });
    Map<String, Future<Long>> running = new LinkedHashMap<>();
    for (Map.Entry<String, Scenario> e : all.entrySet()) {
      if (only != null && !only.contains(e.getKey())) {
        continue;
      }
      running.put(e.getKey(), pool.submit(() -> {
        Thread.currentThread().setName(e.getKey());
        long start = System.currentTimeMillis();
        note("start");
        e.getValue().run();
        note("done");
        return System.currentTimeMillis() - start;
      }));
    }
    long deadline = System.currentTimeMillis() + SCENARIO_TIMEOUT_MS;
    for (Map.Entry<String, Future<Long>> e : running.entrySet()) {
      Future<Long> f = e.getValue();
      String failure = null;
      long ms = 0;
      try {
        ms = f.get(Math.max(1, deadline - System.currentTimeMillis()), TimeUnit.MILLISECONDS);
      } catch (TimeoutException t) {
        f.cancel(true);
        failure = "did not finish within " + SCENARIO_TIMEOUT_MS + " ms";
      } catch (java.util.concurrent.ExecutionException x) {
        Throwable c = x.getCause();
        failure = c instanceof Expect.Failure ? c.getMessage() : c.toString();
        if (!(c instanceof Expect.Failure)) {
          c.printStackTrace();
        }
      }
      if (failure == null) {
        passed++;
        System.out.println("PASS " + e.getKey() + " (" + ms + " ms)");
      } else {
        failed++;
        System.out.println("FAIL " + e.getKey() + ": " + failure.replace('\n', ' '));
      }
      System.out.flush();
    }
    System.out.println(passed + " passed, " + failed + " failed");
    System.out.flush();
    // The SDK's gRPC and scheduler threads are not all daemons.
    System.exit(failed == 0 && passed > 0 ? 0 : 1);
  }

  private static void usage(String why) {
    System.err.println("proxy scenarios: " + why);
    System.err.println("usage: Main --namesrv HOST:PORT --endpoint HOST:PORT [--only a,b] | "
        + "Main setup --namesrv HOST:PORT [--topic NAME:TYPE]... [--group NAME[:orderly]]...");
    System.exit(2);
  }

  /** Creates topics and groups for the other SDKs' scenarios. */
  private static int setup(String[] args) throws Exception {
    String namesrv = null;
    List<String[]> topics = new ArrayList<>();
    List<String[]> groups = new ArrayList<>();
    for (int i = 1; i + 1 < args.length; i += 2) {
      switch (args[i]) {
        case "--namesrv" -> namesrv = args[i + 1];
        case "--topic" -> topics.add(args[i + 1].split(":", 2));
        case "--group" -> groups.add(args[i + 1].split(":", 2));
        default -> usage("unknown setup option " + args[i]);
      }
    }
    if (namesrv == null) {
      usage("setup needs --namesrv");
    }
    try (Admin admin = new Admin(namesrv)) {
      for (String[] t : topics) {
        admin.createTopic(t[0], t.length > 1 ? t[1] : "NORMAL");
      }
      for (String[] g : groups) {
        admin.createGroup(g[0], g.length > 1 && g[1].equals("orderly"));
      }
    }
    return 0;
  }

  // ---------------------------------------------------------------- helpers

  private String topic(String what, String type) throws Exception {
    String name = "compat_proxy_" + what + "_" + runId;
    note("creating topic " + name + " (" + type + ")");
    try (Admin admin = new Admin(namesrv)) {
      admin.createTopic(name, type);
      String reported = admin.topicMessageType(name);
      Expect.that(reported.equals(type), "the broker reports " + name + " as message type "
          + reported + " after it was created with +message.type=" + type
          + " (GET_TOPIC_CONFIG)");
    }
    return name;
  }

  private String group(String what, boolean orderly) throws Exception {
    String name = "compat_proxy_" + what + "_" + runId;
    try (Admin admin = new Admin(namesrv)) {
      admin.createGroup(name, orderly);
    }
    return name;
  }

  private Producer producer(String topic) throws Exception {
    note("producer for " + topic);
    return provider.newProducerBuilder().setClientConfiguration(clientConfig).setTopics(topic)
        .build();
  }

  private SimpleConsumer simpleConsumer(String group, String topic) throws Exception {
    note("simple consumer " + group);
    return provider.newSimpleConsumerBuilder().setClientConfiguration(clientConfig)
        .setConsumerGroup(group).setAwaitDuration(Duration.ofSeconds(5))
        .setSubscriptionExpressions(Map.of(topic, ALL)).build();
  }

  private static void send(Producer p, ClientServiceProvider provider, Sent s) throws Exception {
    SendReceipt r = p.send(s.toMessage(provider));
    s.messageId = r.getMessageId().toString();
  }

  /**
   * Receives (and acks) until {@code done} holds or {@code timeoutMs} passes; each batch is
   * recorded before its acks, so an arrival's time is when receive returned it.
   */
  private static void receiveUntil(SimpleConsumer c, Arrivals a, long timeoutMs,
                                   java.util.function.BooleanSupplier done) throws Exception {
    long deadline = System.currentTimeMillis() + timeoutMs;
    while (!done.getAsBoolean()) {
      Expect.that(System.currentTimeMillis() < deadline, "timed out after " + timeoutMs
          + " ms receiving (" + a.state() + ")");
      List<MessageView> views = c.receive(16, INVISIBLE);
      note("received " + views.size() + " (" + a.state() + ")");
      for (MessageView v : views) {
        a.record(v);
      }
      for (MessageView v : views) {
        c.ack(v);
      }
    }
  }

  /**
   * One receive before anything is sent, so the group has a position on every queue when the
   * messages arrive: the proxy pops with ConsumeInitMode.MAX, and where a new group starts on
   * a queue that already holds messages is what the producer_normal scenarios check, not
   * this one. The topic is new, so nothing may arrive.
   */
  private static void prime(SimpleConsumer c, Arrivals a) throws Exception {
    List<MessageView> views = c.receive(16, INVISIBLE);
    for (MessageView v : views) {
      a.record(v);
    }
    Expect.that(views.isEmpty(), views.size() + " messages arrived from a topic nothing was "
        + "sent to yet");
  }

  /** Receives for {@code ms} more and fails on anything arriving (nothing more is due). */
  private static void receiveNothingFor(SimpleConsumer c, Arrivals a, long ms, String why)
      throws Exception {
    long end = System.currentTimeMillis() + ms;
    while (System.currentTimeMillis() < end) {
      List<MessageView> views = c.receive(16, INVISIBLE);
      for (MessageView v : views) {
        String cid = a.record(v);
        c.ack(v);
        throw new Expect.Failure(why + ": " + cid + " (attempt " + v.getDeliveryAttempt()
            + ") arrived");
      }
    }
  }

  // ---------------------------------------------------------------- scenarios

  /**
   * 100 normal messages (50 sync, 50 async sends), each received once and acked. The group's
   * first receive comes after the sends, as an application's first one often does: the
   * proxy pops with ConsumeInitMode.MAX, and Apache RocketMQ's broker then starts a new group
   * at a queue's first message while that is still in memory (BrokerConfig
   * initPopOffsetByCheckMsgInMem, on by default), so all 100 arrive.
   */
  private void producerNormal() throws Exception {
    String topic = topic("normal", "NORMAL");
    String group = group("normal", false);
    Arrivals a = new Arrivals();
    List<Sent> sent = new ArrayList<>();
    try (SimpleConsumer c = simpleConsumer(group, topic); Producer p = producer(topic)) {
      List<CompletableFuture<SendReceipt>> async = new ArrayList<>();
      for (int i = 0; i < 100; i++) {
        Sent s = Expect.make(runId, topic, i, i % 2 == 0 ? "TagA" : "TagB", null, null);
        sent.add(s);
        a.expect(s);
        if (i < 50) {
          send(p, provider, s);
        } else {
          async.add(p.sendAsync(s.toMessage(provider)));
        }
      }
      for (int i = 0; i < async.size(); i++) {
        sent.get(50 + i).messageId = async.get(i).get(30, TimeUnit.SECONDS).getMessageId()
            .toString();
      }
      Expect.that(sent.stream().map(s -> s.messageId).distinct().count() == 100,
          "the 100 send receipts do not carry 100 distinct message ids");
      receiveUntil(c, a, ARRIVAL_WAIT_MS, () -> a.distinct() == 100);
      a.checkExactlyOnce(sent);
    }
  }

  /**
   * FIFO topic: 4 message groups × 20 interleaved; a push consumer of an orderly group gets
   * every group's messages in send order, each once.
   */
  private void producerFifo() throws Exception {
    String topic = topic("fifo", "FIFO");
    String group = group("fifo", true);
    Arrivals a = new Arrivals();
    Map<String, List<Integer>> order = new ConcurrentHashMap<>();
    List<Sent> sent = new ArrayList<>();
    for (int i = 0; i < 80; i++) {
      Sent s = Expect.make(runId, topic, i, "TagF", "order-" + (i % 4), null);
      sent.add(s);
      a.expect(s);
    }
    try (Producer p = producer(topic)) {
      for (Sent s : sent) {
        send(p, provider, s);
      }
    }
    try (PushConsumer c = provider.newPushConsumerBuilder().setClientConfiguration(clientConfig)
        .setConsumerGroup(group).setSubscriptionExpressions(Map.of(topic, ALL))
        .setMessageListener(v -> {
          String cid = a.record(v);
          if (cid != null) {
            order.computeIfAbsent(v.getMessageGroup().orElse("?"),
                k -> Collections.synchronizedList(new ArrayList<>()))
                .add(Integer.parseInt(a.sent(cid).props.get("idx")));
          }
          return ConsumeResult.SUCCESS;
        }).build()) {
      Expect.waitFor("80 FIFO messages", ARRIVAL_WAIT_MS, () -> a.distinct() == 80, a::state);
      a.checkExactlyOnce(sent);
      for (int g = 0; g < 4; g++) {
        List<Integer> want = new ArrayList<>();
        for (int i = g; i < 80; i += 4) {
          want.add(i);
        }
        List<Integer> got = order.get("order-" + g);
        Expect.that(want.equals(got), "message group order-" + g + " arrived in order " + got
            + ", sent " + want);
      }
    }
  }

  /**
   * DELAY topic: 10 messages with delivery timestamps 4–6 s ahead; none arrives before its
   * timestamp (the timer's 1 s precision allowed), all within 20 s of it.
   */
  private void producerDelay() throws Exception {
    String topic = topic("delay", "DELAY");
    String group = group("delay", false);
    Arrivals a = new Arrivals();
    List<Sent> sent = new ArrayList<>();
    try (SimpleConsumer c = simpleConsumer(group, topic); Producer p = producer(topic)) {
      prime(c, a);
      long base = System.currentTimeMillis() + 4_000;
      for (int i = 0; i < 10; i++) {
        Sent s = Expect.make(runId, topic, i, "TagD", null, base + i * 200L);
        sent.add(s);
        a.expect(s);
        send(p, provider, s);
      }
      receiveUntil(c, a, ARRIVAL_WAIT_MS, () -> a.distinct() == 10);
      a.checkExactlyOnce(sent);
      for (Sent s : sent) {
        long at = a.firstAtMs.get(s.cid);
        Expect.that(at >= s.deliveryTimestamp - 1_000, s.cid + " arrived "
            + (s.deliveryTimestamp - at) + " ms before its delivery timestamp");
        Expect.that(at <= s.deliveryTimestamp + 20_000, s.cid + " arrived "
            + (at - s.deliveryTimestamp) + " ms after its delivery timestamp");
      }
    }
  }

  /**
   * TRANSACTION topic, one message per transaction: 4 committed, 4 rolled back, 4 left open
   * that the checker commits and 4 it rolls back. Exactly the 8 committed arrive; the checker
   * is asked about every open one.
   */
  private void producerTransaction() throws Exception {
    String topic = topic("tx", "TRANSACTION");
    String group = group("tx", false);
    Arrivals a = new Arrivals();
    Map<String, String> decision = new HashMap<>();
    Map<String, Integer> checked = new ConcurrentHashMap<>();
    List<Sent> committed = new ArrayList<>();
    List<Sent> all = new ArrayList<>();
    String[] kinds = {"commit", "rollback", "check-commit", "check-rollback"};
    for (int i = 0; i < 16; i++) {
      String kind = kinds[i % 4];
      Sent s = Expect.make(runId, topic, i, "TagT", null, null);
      s.props.put("decide", kind);
      decision.put(s.cid, kind);
      all.add(s);
      a.expect(s);
      if (kind.endsWith("commit")) {
        committed.add(s);
      }
    }
    try (SimpleConsumer c = simpleConsumer(group, topic);
         Producer p = provider.newProducerBuilder().setClientConfiguration(clientConfig)
             .setTopics(topic).setTransactionChecker(v -> {
               String cid = v.getProperties().get("cid");
               String kind = cid == null ? null : decision.get(cid);
               if (kind == null || !kind.startsWith("check-")) {
                 a.errors.add("the checker was asked about " + cid + " (" + kind + ")");
                 return TransactionResolution.UNKNOWN;
               }
               checked.merge(cid, 1, Integer::sum);
               return kind.equals("check-commit") ? TransactionResolution.COMMIT
                   : TransactionResolution.ROLLBACK;
             }).build()) {
      prime(c, a);
      for (Sent s : all) {
        Transaction tx = p.beginTransaction();
        s.messageId = p.send(s.toMessage(provider), tx).getMessageId().toString();
        switch (decision.get(s.cid)) {
          case "commit" -> tx.commit();
          case "rollback" -> tx.rollback();
          default -> { } // left open: the broker asks the checker
        }
      }
      // The broker checks open half messages every transactionCheckInterval (30 s in Apache
      // RocketMQ 5.x) once they are older than transactionTimeOut.
      receiveUntil(c, a, 100_000, () -> a.distinct() == 8 && checked.size() == 8);
      receiveNothingFor(c, a, 3_000, "a rolled-back message arrived");
      a.checkExactlyOnce(committed);
    }
  }

  /**
   * 10 messages received with a 10 s invisible duration (the proxy's minimum); the 5 acked
   * never come back, the 5 not acked come back (delivery attempt 2) after their invisible
   * duration, and once acked do not come back again.
   */
  private void simpleConsumerInvisible() throws Exception {
    String topic = topic("invisible", "NORMAL");
    String group = group("invisible", false);
    Arrivals a = new Arrivals();
    List<Sent> sent = new ArrayList<>();
    Duration invisible = Duration.ofSeconds(10);
    try (SimpleConsumer c = simpleConsumer(group, topic); Producer p = producer(topic)) {
      prime(c, a);
      for (int i = 0; i < 10; i++) {
        Sent s = Expect.make(runId, topic, i, "TagI", null, null);
        sent.add(s);
        a.expect(s);
        send(p, provider, s);
      }
      Map<String, Long> leftAtMs = new HashMap<>();
      long deadline = System.currentTimeMillis() + ARRIVAL_WAIT_MS;
      while (a.distinct() < 10) {
        Expect.that(System.currentTimeMillis() < deadline, "first receipt: " + a.state());
        for (MessageView v : c.receive(16, invisible)) {
          String cid = a.record(v);
          Expect.that(cid != null && v.getDeliveryAttempt() == 1, "first receipt of " + cid
              + " has delivery attempt " + v.getDeliveryAttempt());
          Expect.that(!leftAtMs.containsKey(cid), cid + " came back within its invisible time");
          if (Integer.parseInt(a.sent(cid).props.get("idx")) % 2 == 1) {
            c.ack(v);
          } else {
            leftAtMs.put(cid, System.currentTimeMillis());
          }
        }
      }
      a.checkErrors();
      Map<String, MessageView> back = new HashMap<>();
      deadline = System.currentTimeMillis() + ARRIVAL_WAIT_MS;
      while (back.size() < 5) {
        Expect.that(System.currentTimeMillis() < deadline, "only " + back.keySet()
            + " of the 5 unacked messages came back");
        for (MessageView v : c.receive(16, invisible)) {
          String cid = a.record(v);
          Expect.that(leftAtMs.containsKey(cid), "acked message " + cid + " came back");
          Expect.that(!back.containsKey(cid), cid + " came back twice");
          long after = System.currentTimeMillis() - leftAtMs.get(cid);
          Expect.that(after >= invisible.toMillis() - 1_000, cid + " came back after " + after
              + " ms, before its 10 s invisible duration");
          Expect.that(v.getDeliveryAttempt() == 2, cid + " came back with delivery attempt "
              + v.getDeliveryAttempt());
          back.put(cid, v);
          c.ack(v);
        }
      }
      a.checkErrors();
      receiveNothingFor(c, a, invisible.toMillis() + 3_000, "a message acked came back");
    }
  }

  /**
   * Push consumer with "TagA || TagB": of 60 messages tagged A, B, C in turn exactly the 40 A/B
   * arrive; 4 of them fail their first consumption and come back with delivery attempt 2.
   */
  private void pushConsumer() throws Exception {
    String topic = topic("push", "NORMAL");
    String group = group("push", false);
    Arrivals a = new Arrivals();
    List<Sent> sent = new ArrayList<>();
    List<Sent> wanted = new ArrayList<>();
    String[] tags = {"TagA", "TagB", "TagC"};
    for (int i = 0; i < 60; i++) {
      Sent s = Expect.make(runId, topic, i, tags[i % 3], null, null);
      sent.add(s);
      a.expect(s);
      if (!s.tag.equals("TagC")) {
        wanted.add(s);
      }
    }
    Set<String> failFirst = ConcurrentHashMap.newKeySet();
    for (int i = 0; i < 4; i++) {
      failFirst.add(wanted.get(i * 9).cid);
    }
    Map<String, List<Integer>> attempts = new ConcurrentHashMap<>();
    try (PushConsumer c = provider.newPushConsumerBuilder().setClientConfiguration(clientConfig)
        .setConsumerGroup(group)
        .setSubscriptionExpressions(Map.of(topic,
            new FilterExpression("TagA || TagB", FilterExpressionType.TAG)))
        .setMessageListener(v -> {
          String cid = a.record(v);
          if (cid == null) {
            return ConsumeResult.SUCCESS;
          }
          attempts.computeIfAbsent(cid, k -> Collections.synchronizedList(new ArrayList<>()))
              .add(v.getDeliveryAttempt());
          return failFirst.contains(cid) && v.getDeliveryAttempt() == 1 ? ConsumeResult.FAILURE
              : ConsumeResult.SUCCESS;
        }).build(); Producer p = producer(topic)) {
      for (Sent s : sent) {
        send(p, provider, s);
      }
      Expect.waitFor("the 40 TagA/TagB messages and 4 redeliveries", ARRIVAL_WAIT_MS,
          () -> a.distinct() == 40 && failFirst.stream().allMatch(
              cid -> attempts.getOrDefault(cid, List.of()).size() >= 2),
          () -> a.state() + ", attempts of the failed ones: " + failFirst.stream()
              .map(cid -> cid + "=" + attempts.get(cid)).toList());
      // Anything filtered or redelivered by mistake would arrive within this settle time (an
      // absence cannot be polled for).
      Thread.sleep(SETTLE_MS);
      a.checkErrors();
      for (Sent s : sent) {
        List<Integer> got = attempts.get(s.cid);
        if (s.tag.equals("TagC")) {
          Expect.that(got == null, s.cid + " (TagC) passed the filter TagA || TagB");
        } else if (failFirst.contains(s.cid)) {
          Expect.that(List.of(1, 2).equals(got), s.cid + " failed once; delivery attempts "
              + got + ", expected [1, 2]");
        } else {
          Expect.that(List.of(1).equals(got), s.cid + " delivery attempts " + got);
        }
      }
    }
  }
}
