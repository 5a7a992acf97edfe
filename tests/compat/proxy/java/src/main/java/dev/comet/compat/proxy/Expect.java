package dev.comet.compat.proxy;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.message.MessageView;

/**
 * What a scenario sent, and the message-by-message check of what arrives.
 *
 * <p>Every message carries a user property {@code cid} unique to the run; an arrival is matched
 * by it and compared with what was sent: topic, body bytes, tag, keys, every user property,
 * message group and delivery timestamp, and the message id the send receipt gave.
 */
final class Expect {
  private Expect() {}

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

  /** How often {@link #waitFor} looks again. */
  private static final long POLL_INTERVAL_MS = 50;

  /** Polls {@code done} every {@link #POLL_INTERVAL_MS} until it holds; fails after
   * {@code timeoutMs}. */
  static void waitFor(String what, long timeoutMs, BooleanSupplier done, Supplier<String> state)
      throws InterruptedException {
    long deadline = System.currentTimeMillis() + timeoutMs;
    while (!done.getAsBoolean()) {
      if (System.currentTimeMillis() > deadline) {
        throw new Failure("timed out after " + timeoutMs + " ms waiting for " + what + " ("
            + state.get() + ")");
      }
      Thread.sleep(POLL_INTERVAL_MS);
    }
  }

  /** One message as sent; {@code messageId} is filled from the send receipt. */
  static final class Sent {
    final String cid;
    final String topic;
    final String tag;
    final List<String> keys;
    final byte[] body;
    final Map<String, String> props;
    final String group;
    final Long deliveryTimestamp;
    volatile String messageId;

    Sent(String cid, String topic, String tag, List<String> keys, byte[] body,
         Map<String, String> props, String group, Long deliveryTimestamp) {
      this.cid = cid;
      this.topic = topic;
      this.tag = tag;
      this.keys = keys;
      this.body = body;
      this.props = props;
      this.group = group;
      this.deliveryTimestamp = deliveryTimestamp;
    }

    Message toMessage(ClientServiceProvider provider) {
      MessageBuilder b = provider.newMessageBuilder().setTopic(topic).setTag(tag)
          .setKeys(keys.toArray(new String[0])).setBody(body);
      props.forEach(b::addProperty);
      if (group != null) {
        b.setMessageGroup(group);
      }
      if (deliveryTimestamp != null) {
        b.setDeliveryTimestamp(deliveryTimestamp);
      }
      return b.build();
    }
  }

  /**
   * Message {@code i} of a scenario: tag {@code tag}, two keys on odd messages, a non-ASCII
   * property value containing '=', and an 8 KiB body on every 25th message.
   */
  static Sent make(String runId, String topic, int i, String tag, String group,
                   Long deliveryTimestamp) {
    String cid = runId + "-" + topic + "-" + i;
    List<String> keys = i % 2 == 1
        ? List.of("k" + i + "-" + runId, "alt" + i + "-" + runId)
        : List.of("k" + i + "-" + runId);
    int bodyBytes = i % 25 == 0 ? 8192 : 64 + i;
    StringBuilder body = new StringBuilder("body " + cid + " ");
    while (body.length() < bodyBytes) {
      body.append((char) ('a' + (body.length() * 7 + i) % 26));
    }
    Map<String, String> props = new LinkedHashMap<>();
    props.put("cid", cid);
    props.put("idx", Integer.toString(i));
    props.put("note", "naïve=ü " + i);
    return new Sent(cid, topic, tag, keys, body.toString().getBytes(StandardCharsets.UTF_8),
        props, group, deliveryTimestamp);
  }

  static byte[] bytes(ByteBuffer buffer) {
    ByteBuffer copy = buffer.duplicate();
    byte[] out = new byte[copy.remaining()];
    copy.get(out);
    return out;
  }

  /** Compares an arrival with what was sent; returns a reason, or null when they match. */
  static String mismatch(Sent s, MessageView v) {
    if (!s.topic.equals(v.getTopic())) {
      return "topic " + v.getTopic() + " != " + s.topic;
    }
    if (!Arrays.equals(s.body, bytes(v.getBody()))) {
      return "body differs (" + v.getBody().remaining() + " bytes, sent " + s.body.length + ")";
    }
    if (!Optional.of(s.tag).equals(v.getTag())) {
      return "tag " + v.getTag() + " != " + s.tag;
    }
    if (!new HashSet<>(s.keys).equals(new HashSet<>(v.getKeys()))) {
      return "keys " + v.getKeys() + " != " + s.keys;
    }
    for (Map.Entry<String, String> e : s.props.entrySet()) {
      if (!e.getValue().equals(v.getProperties().get(e.getKey()))) {
        return "property " + e.getKey() + "=" + v.getProperties().get(e.getKey()) + " != "
            + e.getValue();
      }
    }
    if (!Objects.equals(Optional.ofNullable(s.group), v.getMessageGroup())) {
      return "message group " + v.getMessageGroup() + " != " + s.group;
    }
    if (!Objects.equals(Optional.ofNullable(s.deliveryTimestamp), v.getDeliveryTimestamp())) {
      return "delivery timestamp " + v.getDeliveryTimestamp() + " != " + s.deliveryTimestamp;
    }
    if (s.messageId != null && !s.messageId.equals(v.getMessageId().toString())) {
      return "message id " + v.getMessageId() + " != the send receipt's " + s.messageId;
    }
    long now = System.currentTimeMillis();
    if (v.getBornTimestamp() < now - 600_000 || v.getBornTimestamp() > now + 5_000) {
      return "born timestamp " + v.getBornTimestamp() + " is not recent";
    }
    if (v.getDeliveryAttempt() < 1) {
      return "delivery attempt " + v.getDeliveryAttempt();
    }
    return null;
  }

  /** Arrivals matched to what was sent, with duplicates and strangers recorded as errors. */
  static final class Arrivals {
    private final Map<String, Sent> sent = new ConcurrentHashMap<>();
    final Map<String, List<MessageView>> got = new ConcurrentHashMap<>();
    final Map<String, Long> firstAtMs = new ConcurrentHashMap<>();
    final List<String> errors = java.util.Collections.synchronizedList(new ArrayList<>());

    void expect(Sent s) {
      sent.put(s.cid, s);
    }

    /** Records {@code v}; returns its cid (null for a message this scenario never sent). */
    String record(MessageView v) {
      String cid = v.getProperties().get("cid");
      Sent s = cid == null ? null : sent.get(cid);
      if (s == null) {
        errors.add("a message never sent arrived: id " + v.getMessageId() + " cid " + cid);
        return null;
      }
      String bad = mismatch(s, v);
      if (bad != null) {
        errors.add(cid + ": " + bad);
      }
      firstAtMs.putIfAbsent(cid, System.currentTimeMillis());
      got.computeIfAbsent(cid, k -> java.util.Collections.synchronizedList(new ArrayList<>()))
          .add(v);
      return cid;
    }

    Sent sent(String cid) {
      return sent.get(cid);
    }

    int distinct() {
      return got.size();
    }

    String state() {
      return got.size() + " of " + sent.size() + " distinct messages arrived";
    }

    void checkErrors() {
      synchronized (errors) {
        if (!errors.isEmpty()) {
          throw new Failure(errors.size() + " bad arrivals, first: " + errors.get(0));
        }
      }
    }

    /** Every cid arrived exactly once. */
    void checkExactlyOnce(java.util.Collection<Sent> expected) {
      checkErrors();
      for (Sent s : expected) {
        List<MessageView> l = got.get(s.cid);
        that(l != null, s.cid + " never arrived");
        that(l.size() == 1, s.cid + " arrived " + l.size() + " times");
      }
    }
  }
}
