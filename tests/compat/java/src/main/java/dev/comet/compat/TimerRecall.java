package dev.comet.compat;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;

/**
 * Timed messages with the 5.x producer (5.x clients only: this file is left out of the 4.9.x
 * build, see pom.xml): a timed send answers a recall handle, {@code recallMessage} cancels the
 * message while one due at the same time still arrives, and a recall under another topic is
 * refused by the broker. (Timed batches are not sent: the 5.x client refuses to build one,
 * "Delayed messages are not supported for batching".)
 */
final class TimerRecall {
  private TimerRecall() {}

  private static final long ARRIVAL_TIMEOUT_MS = 60_000;
  /** How far ahead the timed messages are due: room for the sends and the recall. */
  private static final long DUE_IN_MS = 8_000;
  /** RocketMQ's ILLEGAL_OPERATION response code. */
  private static final int ILLEGAL_OPERATION = 604;

  /** Adds this file's scenarios; {@link Scenarios#all} calls it on a 5.x client. */
  static void register(Map<String, Main.Scenario> s) {
    s.put("timer_recall", TimerRecall::recall);
  }

  /** Sets {@code recallMessageEnable} (off by default, as in RocketMQ) on every master. */
  private static void enableRecall(Ctx ctx, boolean on) throws Exception {
    Properties properties = new Properties();
    properties.setProperty("recallMessageEnable", String.valueOf(on));
    for (String addr : ctx.shared.masterAddrs) {
      ctx.shared.admin.updateBrokerConfig(addr, properties);
    }
  }

  private static SendResult sendOk(DefaultMQProducer p, Message m) throws Exception {
    SendResult r = p.send(m);
    Check.that(r != null && r.getSendStatus() == SendStatus.SEND_OK, "send returned " + r);
    return r;
  }

  /**
   * Three messages due at the same time on one queue and a later sentinel: the first is
   * recalled by its handle; the other two and the sentinel arrive, the recalled one never.
   */
  private static String recall(Ctx ctx) throws Exception {
    String topic = ctx.createTopic(ctx.name("t"));
    String other = ctx.createTopic(ctx.name("o"));
    enableRecall(ctx, true);
    try {
      Collector got = new Collector();
      DefaultMQPushConsumer c = ctx.pushConsumer(ctx.name("cg"));
      c.subscribe(topic, "*");
      c.registerMessageListener(got.concurrently());
      c.start();
      DefaultMQProducer p = ctx.producer();
      List<Check.Sent> sent = new ArrayList<>();
      for (int i = 0; i < 5; i++) {
        sent.add(Check.make(ctx.runId(), topic, i, new String[] {"TagA"}, 100, 0, i));
      }
      SendResult plain = sendOk(p, sent.get(0).toMessage());
      Check.that(plain.getRecallHandle() == null,
          "an untimed send answered a recall handle: " + plain.getRecallHandle());
      long dueMs = System.currentTimeMillis() + DUE_IN_MS;
      List<SendResult> timed = new ArrayList<>();
      for (int i = 1; i <= 3; i++) {
        Message m = sent.get(i).toMessage();
        m.setDeliverTimeMs(dueMs);
        timed.add(sendOk(p, m));
      }
      Message late = sent.get(4).toMessage();
      late.setDeliverTimeMs(dueMs + 2_000);
      sendOk(p, late);
      String handle = timed.get(0).getRecallHandle();
      Check.that(handle != null && !handle.isEmpty(), "a timed send answered no recall handle");
      try {
        p.recallMessage(other, handle);
        throw new Check.Failure("a recall under another topic was accepted");
      } catch (MQBrokerException refused) {
        Check.that(refused.getResponseCode() == ILLEGAL_OPERATION,
            "a recall under another topic answered " + refused.getResponseCode() + " "
                + refused.getErrorMessage());
      }
      String recalledId = p.recallMessage(topic, handle);
      Check.that(timed.get(0).getMsgId().equals(recalledId),
          "recall answered " + recalledId + " for " + timed.get(0).getMsgId());
      Check.that(System.currentTimeMillis() < dueMs - 1_000,
          "the recall finished too close to the due time to prove anything");
      String recalledCid = sent.get(1).cid();
      Check.waitFor("the kept timed messages and the sentinel", ARRIVAL_TIMEOUT_MS, () -> {
        for (int i : new int[] {0, 2, 3, 4}) {
          if (!got.arrivalMs.containsKey(sent.get(i).cid())) {
            return false;
          }
        }
        return true;
      });
      Check.that(!got.arrivalMs.containsKey(recalledCid), "the recalled message arrived");
      for (int i : new int[] {2, 3}) {
        long early = dueMs - got.arrivalMs.get(sent.get(i).cid());
        // RocketMQ rounds a due time down to its 1 s slot; Comet delivers to the millisecond.
        Check.that(early <= 1_500, sent.get(i).cid() + " arrived " + early + " ms early");
      }
      List<Check.Sent> expected = new ArrayList<>(sent);
      expected.remove(1);
      return Check.verify(expected, got.arrivals(), false) + ", recalled " + recalledId;
    } finally {
      enableRecall(ctx, false);
    }
  }
}
