package dev.comet.compat;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.MessageQueueSelector;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * The scenarios of issue 8 point 1. Message counts are modest (hundreds) so the whole suite runs
 * in a minute or two; every wait is bounded.
 */
final class Scenarios {
  private Scenarios() {}

  private static final String[] TAGS_AB = {"TagA", "TagB"};
  private static final String[] TAGS_ABC = {"TagA", "TagB", "TagC"};
  /** Bodies above 4 KiB are compressed by the producer: every 25th message is that large. */
  private static final int LARGE_BODY_BYTES = 8 * 1024;
  private static final long ARRIVAL_TIMEOUT_MS = 60_000;
  private static final long SETTLE_TIMEOUT_MS = 60_000;
  /** Longest wait for a broker to check back every undecided transaction. */
  private static final long TRANSACTION_CHECK_TIMEOUT_MS = 100_000;
  /** How long the transaction scenario watches for rolled-back arrivals at its end. */
  private static final long ROLLED_BACK_WATCH_MS = 3_000;
  /** Puts each order id on one queue, as applications do with a business key. */
  private static final MessageQueueSelector BY_ORDER_ID =
      (mqs, msg, arg) -> mqs.get((Integer) arg % mqs.size());

  static Map<String, Main.Scenario> all() {
    Map<String, Main.Scenario> s = new LinkedHashMap<>();
    s.put("producer_sync", Scenarios::producerSync);
    s.put("producer_async", Scenarios::producerAsync);
    s.put("producer_oneway", Scenarios::producerOneway);
    s.put("producer_batch", Scenarios::producerBatch);
    s.put("producer_ordered_selector", Scenarios::producerOrdered);
    s.put("producer_request_reply", Scenarios::requestReply);
    s.put("delay_level_1", Scenarios::delayLevel);
    s.put("push_clustering_concurrently", c -> pushClustering(c, false));
    s.put("push_clustering_orderly", c -> pushClustering(c, true));
    s.put("push_broadcasting_concurrently", c -> pushBroadcasting(c, false));
    s.put("push_broadcasting_orderly", c -> pushBroadcasting(c, true));
    s.put("lite_pull_subscribe", Scenarios::litePullSubscribe);
    s.put("lite_pull_assign", Scenarios::litePullAssign);
    s.put("push_sql92_selector", Scenarios::pushSql92Selector);
    s.put("sql92_bad_selector_refused", Scenarios::sql92BadSelectorRefused);
    s.put("transaction_check_back", Scenarios::transactionCheckBack);
    if (Ctx.client5()) {
      addClient5Only(s);
    }
    return s;
  }

  /**
   * The scenarios of classes built for 5.x clients only (left out of the 4.9.x build by
   * pom.xml), found by name so that this file compiles against both clients.
   */
  private static void addClient5Only(Map<String, Main.Scenario> s) {
    try {
      for (String name : new String[] {"ServerAssignment", "TimerRecall", "Compression"}) {
        Class.forName("dev.comet.compat." + name)
            .getDeclaredMethod("register", Map.class)
            .invoke(null, s);
      }
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("5.x scenarios missing from a 5.x build", e);
    }
  }

  private static List<Check.Sent> plain(Ctx ctx, String topic, int count, String[] tags) {
    List<Check.Sent> sent = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      int bodyBytes = i % 25 == 0 ? LARGE_BODY_BYTES : 100 + i % 300;
      sent.add(Check.make(ctx.runId(), topic, i, tags, bodyBytes, 0, i));
    }
    return sent;
  }

  /** {@code orders} order ids with {@code perOrder} messages each, interleaved as sent. */
  private static List<Check.Sent> ordered(Ctx ctx, String topic, int orders, int perOrder) {
    List<Check.Sent> sent = new ArrayList<>();
    for (int i = 0; i < orders * perOrder; i++) {
      sent.add(Check.make(ctx.runId(), topic, i, TAGS_AB, 120, i % orders, i / orders));
    }
    return sent;
  }

  private static void checkSendOk(SendResult r, Check.Sent s) {
    Check.that(r != null && r.getSendStatus() == SendStatus.SEND_OK,
        "send of " + s.cid() + " returned " + r);
    Check.that(r.getMsgId() != null && r.getOffsetMsgId() != null && r.getQueueOffset() >= 0,
        "send result lacks ids/offset: " + r);
  }

  /** Starts one push consumer reading the whole topic and waits until it got every message. */
  private static String consumeAll(Ctx ctx, String topic, List<Check.Sent> sent)
      throws Exception {
    Collector got = new Collector();
    DefaultMQPushConsumer c = ctx.pushConsumer(ctx.name("cg"));
    c.subscribe(topic, "*");
    c.registerMessageListener(got.concurrently());
    c.start();
    Check.waitFor(sent.size() + " messages", ARRIVAL_TIMEOUT_MS,
        () -> got.distinctCount() >= sent.size());
    return Check.verify(sent, got.arrivals(), false);
  }

  /**
   * MessageSelector.bySql with a push consumer (the broker needs enablePropertyFilter=true):
   * exactly the messages whose properties match arrive, intact, and none of the others. The
   * selector mixes a system property (TAGS), a numeric comparison on a user property, IN,
   * BETWEEN and IS NULL.
   */
  private static String pushSql92Selector(Ctx ctx) throws Exception {
    String topic = ctx.createTopic(ctx.name("t"));
    DefaultMQProducer p = ctx.producer();
    List<Check.Sent> sent = plain(ctx, topic, 200, TAGS_AB);
    List<Check.Sent> wanted = new ArrayList<>();
    for (Check.Sent s : sent) {
      checkSendOk(p.send(s.toMessage()), s);
      int idx = Integer.parseInt(s.props().get("idx"));
      boolean tagged = s.tags().equals("TagA") && idx >= 50 && !(idx >= 100 && idx <= 119);
      if (tagged || idx == 3 || idx == 7) {
        wanted.add(s);
      }
    }
    String sql = "(TAGS = 'TagA' AND idx >= 50 AND idx NOT BETWEEN 100 AND 119)"
        + " OR idx IN ('3', '7') OR missing IS NOT NULL";
    Collector got = new Collector();
    DefaultMQPushConsumer c = ctx.pushConsumer(ctx.name("cg"));
    c.subscribe(topic, MessageSelector.bySql(sql));
    c.registerMessageListener(got.concurrently());
    c.start();
    Check.waitFor(wanted.size() + " selected messages", ARRIVAL_TIMEOUT_MS,
        () -> got.distinctCount() >= wanted.size());
    return Check.verify(wanted, got.arrivals(), false) + " of " + sent.size() + " sent";
  }

  /**
   * A selector that does not compile stops the push consumer's start: CHECK_CLIENT_CONFIG
   * answers SUBSCRIPTION_PARSE_FAILED (23) with the Java parser's exception text, for a type
   * error and for a syntax error.
   */
  private static String sql92BadSelectorRefused(Ctx ctx) throws Exception {
    String topic = ctx.createTopic(ctx.name("t"));
    String[][] cases = {
        {"idx > 'abc'", "java.lang.RuntimeException: Value ''abc'' cannot be compared."},
        {"idx >", "org.apache.rocketmq.filter.parser.ParseException: Encountered \"<EOF>\""},
    };
    for (String[] bad : cases) {
      DefaultMQPushConsumer c = ctx.pushConsumer(ctx.name("cg"));
      c.subscribe(topic, MessageSelector.bySql(bad[0]));
      c.registerMessageListener(new Collector().concurrently());
      try {
        c.start();
        throw new Check.Failure("consumer with selector " + bad[0] + " started");
      } catch (MQClientException refused) {
        Check.that(refused.getResponseCode() == 23,
            bad[0] + ": code " + refused.getResponseCode() + ", " + refused.getErrorMessage());
        String remark = String.valueOf(refused.getErrorMessage());
        Check.that(remark.startsWith(bad[1]), bad[0] + ": remark " + remark);
      } finally {
        c.shutdown();
      }
    }
    return cases.length + " selectors refused";
  }

  /** What the transaction scenario's message {@code idx} asks of the transaction. */
  private enum Fate {
    COMMIT, ROLLBACK, CHECK_COMMIT, CHECK_ROLLBACK;

    static Fate of(int idx) {
      return values()[idx % values().length];
    }
  }

  /**
   * TransactionMQProducer, one message per transaction: committed at once, rolled back at
   * once, and left UNKNOW then committed or rolled back when the broker checks back. A push
   * consumer gets exactly the committed ones, intact, once each; the broker asks the checker
   * about every undecided one and about nothing else; after the checks nothing rolled back
   * arrives.
   */
  private static String transactionCheckBack(Ctx ctx) throws Exception {
    String topic = ctx.createTopic(ctx.name("t"));
    Collector got = new Collector();
    DefaultMQPushConsumer c = ctx.pushConsumer(ctx.name("cg"));
    c.subscribe(topic, "*");
    c.registerMessageListener(got.concurrently());
    c.start();
    Map<String, Integer> checked = new ConcurrentHashMap<>();
    TransactionListener listener = new TransactionListener() {
      @Override
      public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
        return switch (Fate.of(Integer.parseInt(msg.getUserProperty("idx")))) {
          case COMMIT -> LocalTransactionState.COMMIT_MESSAGE;
          case ROLLBACK -> LocalTransactionState.ROLLBACK_MESSAGE;
          case CHECK_COMMIT, CHECK_ROLLBACK -> LocalTransactionState.UNKNOW;
        };
      }

      @Override
      public LocalTransactionState checkLocalTransaction(MessageExt msg) {
        checked.merge(String.valueOf(msg.getUserProperty("cid")), 1, Integer::sum);
        return switch (Fate.of(Integer.parseInt(msg.getUserProperty("idx")))) {
          case COMMIT, CHECK_COMMIT -> LocalTransactionState.COMMIT_MESSAGE;
          case ROLLBACK, CHECK_ROLLBACK -> LocalTransactionState.ROLLBACK_MESSAGE;
        };
      }
    };
    TransactionMQProducer p = ctx.transactionProducer(listener);
    List<Check.Sent> sent = plain(ctx, topic, 16, TAGS_AB);
    List<Check.Sent> committed = new ArrayList<>();
    Set<String> undecided = new HashSet<>();
    for (Check.Sent s : sent) {
      Fate fate = Fate.of(Integer.parseInt(s.props().get("idx")));
      TransactionSendResult r = p.sendMessageInTransaction(s.toMessage(), null);
      // The client copies no offsetMsgId into a transactional send result (Java's
      // DefaultMQProducerImpl), so checkSendOk does not apply; it does carry the local
      // transaction's state.
      Check.that(r != null && r.getSendStatus() == SendStatus.SEND_OK,
          "send of " + s.cid() + " returned " + r);
      Check.that(r.getMsgId() != null && r.getQueueOffset() >= 0,
          "send result lacks id/offset: " + r);
      LocalTransactionState expected = switch (fate) {
        case COMMIT -> LocalTransactionState.COMMIT_MESSAGE;
        case ROLLBACK -> LocalTransactionState.ROLLBACK_MESSAGE;
        case CHECK_COMMIT, CHECK_ROLLBACK -> LocalTransactionState.UNKNOW;
      };
      Check.that(r.getLocalTransactionState() == expected,
          s.cid() + ": local transaction state " + r.getLocalTransactionState() + ", not "
          + expected);
      if (fate == Fate.COMMIT || fate == Fate.CHECK_COMMIT) {
        committed.add(s);
      }
      if (fate == Fate.CHECK_COMMIT || fate == Fate.CHECK_ROLLBACK) {
        undecided.add(s.cid());
      }
    }
    // The broker checks a half message once it is older than its transaction timeout, at its
    // check interval (Apache RocketMQ: 6 s and 30 s by default).
    Check.waitFor("the checks of " + undecided.size() + " undecided transactions",
        TRANSACTION_CHECK_TIMEOUT_MS, () -> checked.keySet().containsAll(undecided),
        () -> "checked " + checked.keySet());
    Check.waitFor(committed.size() + " committed messages", ARRIVAL_TIMEOUT_MS,
        () -> got.distinctCount() >= committed.size());
    Set<String> askedBeyond = new HashSet<>(checked.keySet());
    askedBeyond.removeAll(undecided);
    Check.that(askedBeyond.isEmpty(), "the broker checked decided transactions " + askedBeyond);
    // A rolled-back message would come with the committed ones; give it a moment to show.
    Thread.sleep(ROLLED_BACK_WATCH_MS);
    return Check.verify(committed, got.arrivals(), false) + " of " + sent.size()
        + " transactions, " + undecided.size() + " decided by check-back";
  }

  private static String producerSync(Ctx ctx) throws Exception {
    String topic = ctx.createTopic(ctx.name("t"));
    DefaultMQProducer p = ctx.producer();
    List<Check.Sent> sent = plain(ctx, topic, 200, TAGS_AB);
    Map<Integer, Long> lastOffset = new HashMap<>();
    for (Check.Sent s : sent) {
      SendResult r = p.send(s.toMessage());
      checkSendOk(r, s);
      Check.that(r.getMessageQueue().getTopic().equals(topic), "result names topic "
          + r.getMessageQueue().getTopic());
      Long prev = lastOffset.put(r.getMessageQueue().getQueueId(), r.getQueueOffset());
      Check.that(prev == null || r.getQueueOffset() == prev + 1,
          "queue offsets not consecutive: " + prev + " then " + r.getQueueOffset());
    }
    return consumeAll(ctx, topic, sent);
  }

  /**
   * Request-reply (DefaultMQProducer.request): a responder consumes each request and sends its
   * reply with MessageUtil.createReplyMessage; the broker pushes the reply to the requesting
   * producer, whose request() returns it. Every reply must match its own request.
   */
  private static String requestReply(Ctx ctx) throws Exception {
    String topic = ctx.createTopic(ctx.name("t"));
    DefaultMQProducer replier = ctx.producer();
    DefaultMQPushConsumer responder = ctx.pushConsumer(ctx.name("cg"));
    responder.subscribe(topic, "*");
    responder.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
      for (MessageExt m : msgs) {
        try {
          String asked = new String(m.getBody(), StandardCharsets.UTF_8);
          byte[] answer = ("reply:" + asked).getBytes(StandardCharsets.UTF_8);
          replier.send(MessageUtil.createReplyMessage(m, answer));
        } catch (Exception e) {
          return ConsumeConcurrentlyStatus.RECONSUME_LATER;
        }
      }
      return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
    });
    responder.start();
    DefaultMQProducer requester = ctx.producer();
    int requests = 10;
    for (int i = 0; i < requests; i++) {
      String asked = ctx.runId() + "-request-" + i;
      Message request = new Message(topic, asked.getBytes(StandardCharsets.UTF_8));
      // The first request also waits for the responder's first rebalance.
      Message reply = requester.request(request, i == 0 ? ARRIVAL_TIMEOUT_MS : 10_000);
      Check.that(reply != null, "request " + i + " got no reply");
      String answer = new String(reply.getBody(), StandardCharsets.UTF_8);
      Check.that(answer.equals("reply:" + asked), "request " + i + " got reply " + answer);
    }
    return requests + " requests answered in order";
  }

  private static String producerAsync(Ctx ctx) throws Exception {
    String topic = ctx.createTopic(ctx.name("t"));
    DefaultMQProducer p = ctx.producer();
    List<Check.Sent> sent = plain(ctx, topic, 200, TAGS_AB);
    CountDownLatch done = new CountDownLatch(sent.size());
    AtomicReference<String> error = new AtomicReference<>();
    for (Check.Sent s : sent) {
      p.send(s.toMessage(), new SendCallback() {
        @Override
        public void onSuccess(SendResult r) {
          if (r.getSendStatus() != SendStatus.SEND_OK || r.getMsgId() == null) {
            error.compareAndSet(null, "bad async result " + r);
          }
          done.countDown();
        }

        @Override
        public void onException(Throwable e) {
          error.compareAndSet(null, "async send failed: " + e);
          done.countDown();
        }
      });
    }
    Check.that(done.await(30, TimeUnit.SECONDS), "async callbacks did not all arrive");
    Check.that(error.get() == null, String.valueOf(error.get()));
    return consumeAll(ctx, topic, sent);
  }

  private static String producerOneway(Ctx ctx) throws Exception {
    String topic = ctx.createTopic(ctx.name("t"));
    DefaultMQProducer p = ctx.producer();
    List<Check.Sent> sent = plain(ctx, topic, 100, TAGS_AB);
    for (Check.Sent s : sent) {
      p.sendOneway(s.toMessage());
    }
    return consumeAll(ctx, topic, sent);
  }

  private static String producerBatch(Ctx ctx) throws Exception {
    String topic = ctx.createTopic(ctx.name("t"));
    DefaultMQProducer p = ctx.producer();
    List<Check.Sent> sent = new ArrayList<>();
    for (int i = 0; i < 200; i++) {
      sent.add(Check.make(ctx.runId(), topic, i, TAGS_AB, 200 + i, 0, i));
    }
    for (int from = 0; from < sent.size(); from += 50) {
      List<Message> batch = new ArrayList<>();
      for (Check.Sent s : sent.subList(from, from + 50)) {
        batch.add(s.toMessage());
      }
      SendResult r = p.send(batch);
      checkSendOk(r, sent.get(from));
      Check.that(r.getMsgId().split(",").length == 50,
          "batch result should carry 50 ids, got " + r.getMsgId());
    }
    return consumeAll(ctx, topic, sent);
  }

  private static String producerOrdered(Ctx ctx) throws Exception {
    String topic = ctx.createTopic(ctx.name("t"));
    DefaultMQProducer p = ctx.producer();
    List<Check.Sent> sent = ordered(ctx, topic, 4, 50);
    Map<Integer, Integer> queueOfOrder = new HashMap<>();
    for (Check.Sent s : sent) {
      SendResult r = p.send(s.toMessage(), BY_ORDER_ID, s.orderId());
      checkSendOk(r, s);
      Integer q = queueOfOrder.putIfAbsent(s.orderId(), r.getMessageQueue().getQueueId());
      Check.that(q == null || q == r.getMessageQueue().getQueueId(),
          "order " + s.orderId() + " moved between queues");
    }
    Collector got = new Collector();
    DefaultMQPushConsumer c = ctx.pushConsumer(ctx.name("cg"));
    c.subscribe(topic, "*");
    c.registerMessageListener(got.orderly());
    c.start();
    Check.waitFor(sent.size() + " messages", ARRIVAL_TIMEOUT_MS,
        () -> got.distinctCount() >= sent.size());
    Check.inOrderPerOrderId(got.arrivals());
    return Check.verify(sent, got.arrivals(), false) + ", in order";
  }

  private static String delayLevel(Ctx ctx) throws Exception {
    String topic = ctx.createTopic(ctx.name("t"));
    Collector got = new Collector();
    DefaultMQPushConsumer c = ctx.pushConsumer(ctx.name("cg"));
    c.subscribe(topic, "*");
    c.registerMessageListener(got.concurrently());
    c.start();
    DefaultMQProducer p = ctx.producer();
    // A plain probe first: delays are measured only once the consumer is pulling. (Right
    // after start the client bumps its subscription version on rebalance; if its heartbeat
    // with the new version is skipped, the broker answers pulls "subscription not latest"
    // until the next 30 s heartbeat.)
    List<Check.Sent> sent = plain(ctx, topic, 21, TAGS_AB);
    Check.Sent probe = sent.remove(20);
    checkSendOk(p.send(probe.toMessage()), probe);
    Check.waitFor("the probe message", ARRIVAL_TIMEOUT_MS, () -> got.distinctCount() >= 1);
    Map<String, Long> sentMs = new ConcurrentHashMap<>();
    for (Check.Sent s : sent) {
      Message m = s.toMessage();
      m.setDelayTimeLevel(1);
      sentMs.put(s.cid(), System.currentTimeMillis());
      checkSendOk(p.send(m), s);
    }
    Check.waitFor(sent.size() + " delayed messages", ARRIVAL_TIMEOUT_MS,
        () -> got.distinctCount() >= sent.size() + 1);
    long minDelay = Long.MAX_VALUE;
    long maxDelay = 0;
    for (Check.Sent s : sent) {
      long d = got.arrivalMs.get(s.cid()) - sentMs.get(s.cid());
      if (System.getenv("COMPAT_DEBUG") != null) {
        System.out.println("  " + s.cid() + " delay " + d + " ms");
      }
      minDelay = Math.min(minDelay, d);
      maxDelay = Math.max(maxDelay, d);
    }
    // Level 1 is 1 s (level 2 is 5 s, level 3 10 s): the earliest arrival tells the level was
    // honoured. A single late message is tolerated up to 40 s, because a client that misses
    // one round trip on a loaded machine recovers on its 30 s heartbeat/route timers.
    Check.that(minDelay >= 900, "a level-1 message arrived after only " + minDelay + " ms");
    Check.that(minDelay <= 4_000, "the first level-1 message took " + minDelay + " ms");
    Check.that(maxDelay <= 40_000, "a level-1 message took " + maxDelay + " ms");
    List<Check.Sent> all = new ArrayList<>(sent);
    all.add(probe);
    return Check.verify(all, got.arrivals(), false)
        + ", delay " + minDelay + ".." + maxDelay + " ms";
  }

  /**
   * Two members of one group split the four queues two and two; messages sent afterwards all
   * arrive, each member gets some, and tag filtering ("TagA || TagB") keeps TagC out.
   * The orderly variant also needs the broker's queue locks and keeps per-order sequence.
   */
  private static String pushClustering(Ctx ctx, boolean orderly) throws Exception {
    String topic = ctx.createTopic(ctx.name("t"));
    String group = ctx.name("cg");
    Collector a = new Collector();
    Collector b = new Collector();
    DefaultMQPushConsumer ca = ctx.pushConsumer(group);
    DefaultMQPushConsumer cb = ctx.pushConsumer(group);
    String filter = orderly ? "*" : "TagA || TagB";
    for (var pair : List.of(Map.entry(ca, a), Map.entry(cb, b))) {
      pair.getKey().subscribe(topic, filter);
      if (orderly) {
        pair.getKey().registerMessageListener(pair.getValue().orderly());
      } else {
        pair.getKey().registerMessageListener(pair.getValue().concurrently());
      }
      pair.getKey().start();
    }
    long t0 = System.nanoTime();
    Check.waitFor("two members to hold two queues each", SETTLE_TIMEOUT_MS, () -> {
      Set<Integer> qa = Ctx.heldQueues(ca, topic, orderly);
      Set<Integer> qb = Ctx.heldQueues(cb, topic, orderly);
      Set<Integer> union = new HashSet<>(qa);
      union.addAll(qb);
      return qa.size() == 2 && qb.size() == 2 && union.size() == Ctx.QUEUES;
    });
    String split = "queues " + Ctx.heldQueues(ca, topic, false) + "/"
        + Ctx.heldQueues(cb, topic, false);
    long t1 = System.nanoTime();
    DefaultMQProducer p = ctx.producer();
    List<Check.Sent> sent = orderly ? ordered(ctx, topic, 8, 25) : plain(ctx, topic, 300, TAGS_ABC);
    List<Check.Sent> expected = new ArrayList<>();
    for (Check.Sent s : sent) {
      SendResult r = orderly ? p.send(s.toMessage(), BY_ORDER_ID, s.orderId()) : p.send(s.toMessage());
      checkSendOk(r, s);
      if (!"TagC".equals(s.tags())) {
        expected.add(s);
      }
    }
    long t2 = System.nanoTime();
    Set<String> union = new HashSet<>();
    Check.waitFor(expected.size() + " messages across both members", ARRIVAL_TIMEOUT_MS, () -> {
      union.clear();
      for (MessageExt m : a.arrivals()) {
        union.add(m.getUserProperty("cid"));
      }
      for (MessageExt m : b.arrivals()) {
        union.add(m.getUserProperty("cid"));
      }
      return union.size() >= expected.size();
    }, () -> "got " + union.size() + "; member a " + a.distinctCount() + " on queues "
        + Ctx.heldQueues(ca, topic, false) + ", member b " + b.distinctCount() + " on queues "
        + Ctx.heldQueues(cb, topic, false));
    String phases = phases(t0, t1, t2, System.nanoTime());
    Thread.sleep(500); // lets a wrongly delivered TagC message show up before the check
    List<MessageExt> all = new ArrayList<>(a.arrivals());
    all.addAll(b.arrivals());
    String verdict = Check.verify(expected, all, true);
    Check.that(a.distinctCount() > 0 && b.distinctCount() > 0,
        "one member got nothing: " + a.distinctCount() + "/" + b.distinctCount());
    if (orderly) {
      Check.inOrderPerOrderId(a.arrivals());
      Check.inOrderPerOrderId(b.arrivals());
    }
    return verdict + ", " + split + ", split " + a.distinctCount() + "/" + b.distinctCount()
        + (orderly ? ", in order" : "") + ", " + phases;
  }

  /** "settle/send/arrive" durations, to locate a stall when a scenario is slow. */
  private static String phases(long settleNs, long sendNs, long arriveNs, long endNs) {
    return String.format("settle %.1f s, send %.1f s, arrive %.1f s",
        (sendNs - settleNs) / 1e9, (arriveNs - sendNs) / 1e9, (endNs - arriveNs) / 1e9);
  }

  /**
   * Both members of a broadcasting group get every TagA message and nothing else.
   *
   * <p>The 4.9.x client locks queues at the broker for orderly consumption even when
   * broadcasting, and the broker grants a group's queue lock to one client only, so a second
   * member would wait for the first one's lock to expire (60 s): the orderly variant runs one
   * member on 4.9.x (5.x no longer locks when broadcasting).
   */
  private static String pushBroadcasting(Ctx ctx, boolean orderly) throws Exception {
    String topic = ctx.createTopic(ctx.name("t"));
    String group = ctx.name("cg");
    List<Collector> collectors = orderly && !Ctx.client5()
        ? List.of(new Collector()) : List.of(new Collector(), new Collector());
    for (Collector col : collectors) {
      DefaultMQPushConsumer c = ctx.pushConsumer(group);
      Ctx.setBroadcasting(c);
      c.subscribe(topic, "TagA");
      if (orderly) {
        c.registerMessageListener(col.orderly());
      } else {
        c.registerMessageListener(col.concurrently());
      }
      c.start();
    }
    long t1 = System.nanoTime();
    DefaultMQProducer p = ctx.producer();
    List<Check.Sent> sent = orderly ? ordered(ctx, topic, 4, 40) : plain(ctx, topic, 160, TAGS_AB);
    List<Check.Sent> expected = new ArrayList<>();
    for (Check.Sent s : sent) {
      checkSendOk(orderly ? p.send(s.toMessage(), BY_ORDER_ID, s.orderId())
          : p.send(s.toMessage()), s);
      if ("TagA".equals(s.tags())) {
        expected.add(s);
      }
    }
    long t2 = System.nanoTime();
    Check.waitFor(expected.size() + " messages at each member", ARRIVAL_TIMEOUT_MS,
        () -> collectors.stream().allMatch(col -> col.distinctCount() >= expected.size()),
        () -> "members got " + collectors.stream().map(col -> "" + col.distinctCount()).toList());
    String phases = String.format("send %.1f s, arrive %.1f s", (t2 - t1) / 1e9,
        (System.nanoTime() - t2) / 1e9);
    Thread.sleep(500); // lets a wrongly delivered TagB message show up before the check
    String verdict = "";
    for (Collector col : collectors) {
      verdict = Check.verify(expected, col.arrivals(), false);
      if (orderly) {
        inOrderWithGaps(col.arrivals());
      }
    }
    return collectors.size() + " members, each: " + verdict + (orderly ? ", in order" : "")
        + ", " + phases;
  }

  /**
   * In the broadcasting orderly case the TagB messages are filtered out, so the sequence per
   * order has gaps: check it only increases.
   */
  private static void inOrderWithGaps(List<MessageExt> got) {
    Map<String, List<MessageExt>> byOrder = new LinkedHashMap<>();
    for (MessageExt m : got) {
      byOrder.computeIfAbsent(m.getUserProperty("order"), k -> new ArrayList<>()).add(m);
    }
    for (List<MessageExt> list : byOrder.values()) {
      int prev = -1;
      for (MessageExt m : list) {
        int seq = Integer.parseInt(m.getUserProperty("seq"));
        Check.that(seq > prev, "order " + m.getUserProperty("order") + ": seq " + seq
            + " arrived after " + prev);
        prev = seq;
      }
    }
  }

  private static List<Check.Sent> sendAllSync(Ctx ctx, String topic, int count)
      throws Exception {
    DefaultMQProducer p = ctx.producer();
    List<Check.Sent> sent = plain(ctx, topic, count, TAGS_AB);
    for (Check.Sent s : sent) {
      checkSendOk(p.send(s.toMessage()), s);
    }
    return sent;
  }

  private static List<MessageExt> pollUntil(DefaultLitePullConsumer c, int want)
      throws Exception {
    List<MessageExt> got = new ArrayList<>();
    Set<String> distinct = new HashSet<>();
    long deadline = System.currentTimeMillis() + ARRIVAL_TIMEOUT_MS;
    while (distinct.size() < want) {
      Check.that(System.currentTimeMillis() < deadline,
          "poll got " + distinct.size() + " of " + want + " messages in time");
      for (MessageExt m : c.poll(1000)) {
        got.add(m);
        distinct.add(m.getUserProperty("cid"));
      }
    }
    return got;
  }

  /**
   * Subscribe mode: the consumer rebalances, pulls from the first offset, commits; the broker's
   * consume stats must then show no lag on any queue.
   */
  private static String litePullSubscribe(Ctx ctx) throws Exception {
    String topic = ctx.createTopic(ctx.name("t"));
    List<Check.Sent> sent = sendAllSync(ctx, topic, 200);
    String group = ctx.name("cg");
    DefaultLitePullConsumer c = ctx.litePullConsumer(group);
    c.setAutoCommit(false);
    c.subscribe(topic, "*");
    c.start();
    List<MessageExt> got = pollUntil(c, sent.size());
    Check.inOrderPerQueue(got);
    String verdict = Check.verify(sent, got, false);
    // Commit the next offset of every queue and persist it to the broker now (the periodic
    // persist starts only 10 s after the client does).
    Map<MessageQueue, Long> next = new HashMap<>();
    for (MessageExt m : got) {
      next.merge(new MessageQueue(topic, m.getBrokerName(), m.getQueueId()),
          m.getQueueOffset() + 1, Math::max);
    }
    c.commitSync(next, true);
    AtomicReference<String> lastState = new AtomicReference<>("");
    Check.waitFor("committed offsets to reach the end of every queue", 15_000, () -> {
      try {
        var stats = ctx.shared.admin.examineConsumeStats(group);
        long lag = 0;
        int queues = 0;
        for (var e : stats.getOffsetTable().entrySet()) {
          if (e.getKey().getTopic().equals(topic)) {
            queues++;
            lag += e.getValue().getBrokerOffset() - e.getValue().getConsumerOffset();
          }
        }
        lastState.set("consume stats: " + queues + " queues, lag " + lag);
        return queues == Ctx.QUEUES && lag == 0;
      } catch (Exception notYet) {
        lastState.set("consume stats failed: " + notYet);
        return false;
      }
    }, lastState::get);
    return verdict + ", in order per queue, offsets committed";
  }

  /**
   * Assign mode: explicit queues, seek to 0 (checked against min/max offsets), no rebalance.
   *
   * <p>The messages are sent after the seeks. The 4.9.x client's assign() starts a pull task
   * per queue at once, and seek() replaces it without waiting for its pull in flight: if that
   * pull returns after the seek, it moves the queue's pull offset past what the seek cleared
   * from the client's cache, and those messages are never polled (a client race, whatever the
   * broker answers). With nothing to pull before the seeks, the race cannot lose anything.
   */
  private static String litePullAssign(Ctx ctx) throws Exception {
    String topic = ctx.createTopic(ctx.name("t"));
    DefaultLitePullConsumer c = ctx.litePullConsumer(ctx.name("cg"));
    c.setAutoCommit(false);
    c.start();
    Collection<MessageQueue> queues = c.fetchMessageQueues(topic);
    Check.that(queues.size() == Ctx.QUEUES, "fetchMessageQueues returned " + queues);
    c.assign(queues);
    for (MessageQueue mq : queues) {
      c.seek(mq, 0);
    }
    List<Check.Sent> sent = sendAllSync(ctx, topic, 200);
    List<MessageExt> got = pollUntil(c, sent.size());
    // The pull task a seek replaced may still deliver what its pull in flight got, so the
    // first messages of a queue can arrive twice: order is checked on first deliveries, and
    // those re-deliveries are allowed.
    Check.inOrderPerQueue(Check.firstArrivals(got));
    return Check.verify(sent, got, true) + ", in order per queue";
  }
}
