package dev.comet.compat;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BooleanSupplier;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Expected messages and the checks applied to what arrives.
 *
 * <p>Every message a scenario sends carries a user property {@code cid} (compat id) that is
 * unique per run; what arrives is matched to what was sent by it and compared field by field:
 * topic, body bytes, tags, keys and every user property.
 */
final class Check {
  private Check() {}

  /** A scenario failure with a readable reason. */
  static final class Failure extends RuntimeException {
    Failure(String message) {
      super(message);
    }
  }

  static void that(boolean condition, String message) {
    if (!condition) {
      throw new Failure(message);
    }
  }

  /** Polls {@code done} every 50 ms until it holds; fails after {@code timeoutMs}. */
  static void waitFor(String what, long timeoutMs, BooleanSupplier done)
      throws InterruptedException {
    waitFor(what, timeoutMs, done, () -> "");
  }

  /** As above; {@code state} describes what was reached when the wait times out. */
  static void waitFor(String what, long timeoutMs, BooleanSupplier done,
                      java.util.function.Supplier<String> state) throws InterruptedException {
    long deadline = System.currentTimeMillis() + timeoutMs;
    while (!done.getAsBoolean()) {
      if (System.currentTimeMillis() > deadline) {
        String reached = state.get();
        throw new Failure("timed out after " + timeoutMs + " ms waiting for " + what
            + (reached.isEmpty() ? "" : " (" + reached + ")"));
      }
      Thread.sleep(50);
    }
  }

  /** What was sent: enough to rebuild and compare the message. */
  record Sent(String cid, String topic, String tags, String keys, byte[] body,
              Map<String, String> props, int orderId, int seq) {

    Message toMessage() {
      Message m = new Message(topic, tags, keys, body);
      props.forEach(m::putUserProperty);
      return m;
    }
  }

  /**
   * Builds message {@code i} of a scenario: alternating tags from {@code tags}, two keys on odd
   * messages (RocketMQ joins them with a space), a non-ASCII property value, and a body of
   * {@code bodyBytes} (large bodies make the producer compress them).
   */
  static Sent make(String runId, String topic, int i, String[] tags, int bodyBytes,
                   int orderId, int seq) {
    String cid = runId + "-" + topic.hashCode() + "-" + i;
    String keys = i % 2 == 1 ? "k" + i + "-" + runId + " alt" + i + "-" + runId : "k" + i + "-" + runId;
    StringBuilder body = new StringBuilder("body " + cid + " ");
    while (body.length() < bodyBytes) {
      body.append((char) ('a' + (body.length() * 7 + i) % 26));
    }
    Map<String, String> props = new LinkedHashMap<>();
    props.put("cid", cid);
    props.put("idx", Integer.toString(i));
    props.put("order", Integer.toString(orderId));
    props.put("seq", Integer.toString(seq));
    props.put("note", "h\u00e9llo w\u00f6rld \u2713 a=b");
    return new Sent(cid, topic, tags[i % tags.length], keys,
        body.toString().getBytes(StandardCharsets.UTF_8), props, orderId, seq);
  }

  /**
   * Compares arrivals with what was sent. Every expected message must arrive intact; an
   * arrival that was never sent (or not expected here, e.g. filtered out by tag) fails.
   * Duplicates fail unless {@code allowDuplicates} (at-least-once delivery around rebalances).
   */
  static String verify(Collection<Sent> expected, Collection<MessageExt> got,
                       boolean allowDuplicates) {
    Map<String, Sent> byCid = new HashMap<>();
    for (Sent s : expected) {
      byCid.put(s.cid(), s);
    }
    Map<String, Integer> seen = new HashMap<>();
    List<String> problems = new ArrayList<>();
    int duplicates = 0;
    for (MessageExt m : got) {
      String cid = m.getUserProperty("cid");
      Sent s = cid == null ? null : byCid.get(cid);
      if (s == null) {
        problems.add("unexpected message cid=" + cid + " tags=" + m.getTags() + " id=" + m.getMsgId());
        continue;
      }
      if (seen.merge(cid, 1, Integer::sum) > 1) {
        duplicates++;
        continue;
      }
      compare(s, m, problems);
    }
    int missing = 0;
    for (Sent s : expected) {
      if (!seen.containsKey(s.cid())) {
        if (missing++ < 3) {
          problems.add("missing cid=" + s.cid());
        }
      }
    }
    if (missing > 3) {
      problems.add("... " + missing + " missing in all");
    }
    if (duplicates > 0 && !allowDuplicates) {
      problems.add(duplicates + " duplicate deliveries");
    }
    if (!problems.isEmpty()) {
      throw new Failure(problems.size() + " problem(s): "
          + String.join("; ", problems.subList(0, Math.min(8, problems.size()))));
    }
    return expected.size() + " msgs intact" + (duplicates > 0 ? ", " + duplicates + " dup" : "");
  }

  private static void compare(Sent s, MessageExt m, List<String> problems) {
    String id = "cid=" + s.cid() + ": ";
    if (!s.topic().equals(m.getTopic())) {
      problems.add(id + "topic " + m.getTopic() + " != " + s.topic());
    }
    if (!Arrays.equals(s.body(), m.getBody())) {
      problems.add(id + "body differs (" + (m.getBody() == null ? -1 : m.getBody().length)
          + " bytes, sent " + s.body().length + ")");
    }
    if (!s.tags().equals(m.getTags())) {
      problems.add(id + "tags '" + m.getTags() + "' != '" + s.tags() + "'");
    }
    if (!s.keys().equals(m.getKeys())) {
      problems.add(id + "keys '" + m.getKeys() + "' != '" + s.keys() + "'");
    }
    for (Map.Entry<String, String> p : s.props().entrySet()) {
      String v = m.getUserProperty(p.getKey());
      if (!p.getValue().equals(v)) {
        problems.add(id + "property " + p.getKey() + "='" + v + "' != '" + p.getValue() + "'");
      }
    }
    if (m.getMsgId() == null || m.getQueueOffset() < 0 || m.getStoreTimestamp() <= 0
        || m.getBornTimestamp() <= 0) {
      problems.add(id + "bad system fields msgId=" + m.getMsgId() + " queueOffset="
          + m.getQueueOffset() + " storeTimestamp=" + m.getStoreTimestamp());
    }
  }

  /**
   * Checks that, for each order id, the first delivery of each message came in send order
   * (seq 0, 1, 2, ...). {@code got} must be in the order the listener saw them.
   */
  static void inOrderPerOrderId(List<MessageExt> got) {
    Map<String, Integer> next = new HashMap<>();
    Map<String, Boolean> firstSeen = new HashMap<>();
    for (MessageExt m : got) {
      String cid = m.getUserProperty("cid");
      if (firstSeen.putIfAbsent(cid, true) != null) {
        continue;
      }
      String order = m.getUserProperty("order");
      int seq = Integer.parseInt(m.getUserProperty("seq"));
      int want = next.getOrDefault(order, 0);
      that(seq == want, "order " + order + ": got seq " + seq + " where " + want + " was due");
      next.put(order, want + 1);
    }
  }

  /** The first delivery of each message, in arrival order (later re-deliveries dropped). */
  static List<MessageExt> firstArrivals(List<MessageExt> got) {
    java.util.Set<String> seen = new java.util.HashSet<>();
    List<MessageExt> first = new ArrayList<>();
    for (MessageExt m : got) {
      if (seen.add(m.getUserProperty("cid"))) {
        first.add(m);
      }
    }
    return first;
  }

  /** Checks that within each queue the offsets (hence messages) arrived in increasing order. */
  static void inOrderPerQueue(List<MessageExt> got) {
    Map<Integer, Long> last = new HashMap<>();
    for (MessageExt m : got) {
      Long prev = last.put(m.getQueueId(), m.getQueueOffset());
      that(prev == null || m.getQueueOffset() > prev, "queue " + m.getQueueId() + ": offset "
          + m.getQueueOffset() + " arrived after " + prev);
    }
  }
}
