package dev.comet.compat;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.message.MessageRequestMode;
import org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig;

/**
 * Server-side assignment (5.x clients only: this file is left out of the 4.9.x build, see
 * pom.xml): push consumers with {@code setClientRebalance(false)} take their queues from the
 * broker's QUERY_ASSIGNMENT answer instead of computing them, in PULL mode (the broker's
 * default) and in POP mode after SET_MESSAGE_REQUEST_MODE through the admin API (what mqadmin
 * setConsumeMode sends).
 */
final class ServerAssignment {
  private ServerAssignment() {}

  private static final long SETTLE_TIMEOUT_MS = 60_000;
  private static final long ARRIVAL_TIMEOUT_MS = 60_000;
  /** The POP consumers' invisible time: short, so the check for redeliveries is quick. */
  private static final long POP_INVISIBLE_MS = 5_000;
  private static final int MESSAGES = 200;

  /** Adds this file's scenarios; {@link Scenarios#all} calls it on a 5.x client. */
  static void register(Map<String, Main.Scenario> s) {
    s.put("push_server_assignment_pull", ServerAssignment::pull);
    s.put("push_server_assignment_pop", ServerAssignment::pop);
  }

  /**
   * Two members, the broker's default PULL mode: the broker splits the four queues two and
   * two, and every message arrives.
   */
  private static String pull(Ctx ctx) throws Exception {
    String topic = ctx.createTopic(ctx.name("t"));
    String group = ctx.name("cg");
    Collector a = new Collector();
    Collector b = new Collector();
    DefaultMQPushConsumer ca = serverRebalanced(ctx, group, topic, a);
    DefaultMQPushConsumer cb = serverRebalanced(ctx, group, topic, b);
    Check.waitFor("the broker to give two members two queues each", SETTLE_TIMEOUT_MS, () -> {
      Set<Integer> qa = Ctx.heldQueues(ca, topic, false);
      Set<Integer> qb = Ctx.heldQueues(cb, topic, false);
      Set<Integer> union = new HashSet<>(qa);
      union.addAll(qb);
      return qa.size() == 2 && qb.size() == 2 && union.size() == Ctx.QUEUES;
    }, () -> "held " + Ctx.heldQueues(ca, topic, false) + "/" + Ctx.heldQueues(cb, topic, false));
    String split = "queues " + Ctx.heldQueues(ca, topic, false) + "/"
        + Ctx.heldQueues(cb, topic, false);
    Check.that(popQueues(ca, topic).isEmpty() && popQueues(cb, topic).isEmpty(),
        "PULL mode, yet a member pops: " + popQueues(ca, topic) + "/" + popQueues(cb, topic));
    List<Check.Sent> sent = sendAll(ctx, topic);
    List<MessageExt> all = awaitAll(sent, a, b);
    String verdict = Check.verify(sent, all, true);
    Check.that(a.distinctCount() > 0 && b.distinctCount() > 0,
        "one member got nothing: " + a.distinctCount() + "/" + b.distinctCount());
    return verdict + ", " + split + ", split " + a.distinctCount() + "/" + b.distinctCount();
  }

  /**
   * POP mode set for the group on every master (share count 0: every member pops every
   * queue): both members hold only POP assignments (queue id -1), every message arrives once,
   * and none comes back after the invisible time, so every ack was taken.
   */
  private static String pop(Ctx ctx) throws Exception {
    String topic = ctx.createTopic(ctx.name("t"));
    String group = ctx.name("cg");
    for (String addr : ctx.shared.masterAddrs) {
      SubscriptionGroupConfig config = new SubscriptionGroupConfig();
      config.setGroupName(group);
      ctx.shared.admin.createAndUpdateSubscriptionGroupConfig(addr, config);
      ctx.shared.admin.setMessageRequestMode(addr, topic, group, MessageRequestMode.POP, 0,
          10_000);
    }
    Collector a = new Collector();
    Collector b = new Collector();
    DefaultMQPushConsumer ca = serverRebalanced(ctx, group, topic, a);
    DefaultMQPushConsumer cb = serverRebalanced(ctx, group, topic, b);
    Set<String> brokers = new TreeSet<>();
    for (String addr : ctx.shared.masterAddrs) {
      brokers.add(ctx.shared.admin.examineBrokerClusterInfo().getBrokerAddrTable().values()
          .stream().filter(d -> addr.equals(d.getBrokerAddrs().get(0L)))
          .map(d -> d.getBrokerName()).findFirst().orElse(addr));
    }
    Check.waitFor("the broker to give both members every broker's queues to pop",
        SETTLE_TIMEOUT_MS,
        () -> popQueues(ca, topic).equals(everyQueue(brokers))
            && popQueues(cb, topic).equals(everyQueue(brokers)),
        () -> "pop " + popQueues(ca, topic) + "/" + popQueues(cb, topic) + ", pull "
            + Ctx.heldQueues(ca, topic, false) + "/" + Ctx.heldQueues(cb, topic, false));
    Check.that(Ctx.heldQueues(ca, topic, false).isEmpty()
            && Ctx.heldQueues(cb, topic, false).isEmpty(),
        "POP mode, yet a member pulls: " + Ctx.heldQueues(ca, topic, false) + "/"
            + Ctx.heldQueues(cb, topic, false));
    List<Check.Sent> sent = sendAll(ctx, topic);
    awaitAll(sent, a, b);
    // An ack the broker lost brings its message back once the invisible time is over (the
    // broker's revive, through the pop retry topic, which these members pop too).
    Thread.sleep(3 * POP_INVISIBLE_MS);
    List<MessageExt> all = new ArrayList<>(a.arrivals());
    all.addAll(b.arrivals());
    String verdict = Check.verify(sent, all, false);
    return verdict + ", popped " + a.distinctCount() + "/" + b.distinctCount()
        + ", nothing back after " + (3 * POP_INVISIBLE_MS / 1000) + " s";
  }

  private static DefaultMQPushConsumer serverRebalanced(Ctx ctx, String group, String topic,
      Collector collector) throws Exception {
    DefaultMQPushConsumer c = ctx.pushConsumer(group);
    c.setClientRebalance(false);
    c.setPopInvisibleTime(POP_INVISIBLE_MS);
    c.subscribe(topic, "*");
    c.registerMessageListener(collector.concurrently());
    c.start();
    return c;
  }

  /** The POP assignments a member holds for {@code topic}, as "brokerName:queueId". */
  private static Set<String> popQueues(DefaultMQPushConsumer c, String topic) {
    Set<String> held = new TreeSet<>();
    var table = c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getPopProcessQueueTable();
    for (var e : table.entrySet()) {
      MessageQueue mq = e.getKey();
      if (mq.getTopic().equals(topic) && !e.getValue().isDropped()) {
        held.add(mq.getBrokerName() + ":" + mq.getQueueId());
      }
    }
    return held;
  }

  private static Set<String> everyQueue(Set<String> brokers) {
    Set<String> queues = new TreeSet<>();
    for (String broker : brokers) {
      queues.add(broker + ":-1");
    }
    return queues;
  }

  private static List<Check.Sent> sendAll(Ctx ctx, String topic) throws Exception {
    DefaultMQProducer p = ctx.producer();
    String[] tags = {"TagA", "TagB"};
    List<Check.Sent> sent = new ArrayList<>();
    for (int i = 0; i < MESSAGES; i++) {
      int bodyBytes = i % 25 == 0 ? 8 * 1024 : 100 + i % 300;
      Check.Sent s = Check.make(ctx.runId(), topic, i, tags, bodyBytes, 0, i);
      SendResult r = p.send(s.toMessage());
      Check.that(r != null && r.getSendStatus() == SendStatus.SEND_OK,
          "send of " + s.cid() + " returned " + r);
      sent.add(s);
    }
    return sent;
  }

  private static List<MessageExt> awaitAll(List<Check.Sent> sent, Collector a, Collector b)
      throws InterruptedException {
    Set<String> union = new HashSet<>();
    Check.waitFor(sent.size() + " messages across both members", ARRIVAL_TIMEOUT_MS, () -> {
      union.clear();
      for (MessageExt m : a.arrivals()) {
        union.add(m.getUserProperty("cid"));
      }
      for (MessageExt m : b.arrivals()) {
        union.add(m.getUserProperty("cid"));
      }
      return union.size() >= sent.size();
    }, () -> "got " + union.size() + ": " + a.distinctCount() + "/" + b.distinctCount());
    List<MessageExt> all = new ArrayList<>(a.arrivals());
    all.addAll(b.arrivals());
    return all;
  }
}
