package dev.comet.compat;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Deque;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.UUID;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * Per-scenario context: unique names, topic creation, and the clients a scenario started
 * (closed in reverse order when the scenario ends, whatever its outcome).
 */
final class Ctx implements AutoCloseable {
  /** Read and write permission bits of a topic (PermName.PERM_READ | PERM_WRITE). */
  private static final int PERM_READ_WRITE = 4 | 2;
  static final int QUEUES = 4;

  /** State shared by all scenarios of a run: the admin client and the run id. */
  static final class Shared implements AutoCloseable {
    final String namesrv;
    final String runId = UUID.randomUUID().toString().substring(0, 8);
    final DefaultMQAdminExt admin;
    final List<String> masterAddrs = new ArrayList<>();

    Shared(String namesrv) throws Exception {
      this.namesrv = namesrv;
      admin = new DefaultMQAdminExt(10_000);
      admin.setNamesrvAddr(namesrv);
      admin.setInstanceName("compat-admin-" + runId);
      admin.setAdminExtGroup("compat_admin_" + runId);
      admin.start();
      // A broker that has just started may not have registered yet: wait for a master.
      long deadline = System.currentTimeMillis() + 30_000;
      while (true) {
        try {
          var cluster = admin.examineBrokerClusterInfo();
          for (var broker : cluster.getBrokerAddrTable().values()) {
            String master = broker.getBrokerAddrs().get(0L);
            if (master != null) {
              masterAddrs.add(master);
            }
          }
        } catch (Exception e) {
          if (System.currentTimeMillis() > deadline) {
            throw e;
          }
        }
        if (!masterAddrs.isEmpty()) {
          return;
        }
        Check.that(System.currentTimeMillis() < deadline,
            "the name server knows no master broker after 30 s");
        Thread.sleep(200);
      }
    }

    @Override
    public void close() {
      admin.shutdown();
    }
  }

  final Shared shared;
  final String scenario;
  private final Deque<Runnable> closers = new ArrayDeque<>();
  private int serial;

  Ctx(Shared shared, String scenario) {
    this.shared = shared;
    this.scenario = scenario;
  }

  String runId() {
    return shared.runId;
  }

  /** A unique resource name: {@code prefix_scenario_runId}. */
  String name(String prefix) {
    return prefix + "_" + scenario + "_" + shared.runId;
  }

  /**
   * Creates {@code topic} with {@link #QUEUES} read/write queues on every master and waits until
   * the name server returns its route, so clients started afterwards find it at once.
   */
  String createTopic(String topic) throws Exception {
    for (String addr : shared.masterAddrs) {
      shared.admin.createAndUpdateTopicConfig(addr,
          new TopicConfig(topic, QUEUES, QUEUES, PERM_READ_WRITE));
    }
    long deadline = System.currentTimeMillis() + 30_000;
    while (true) {
      try {
        var route = shared.admin.examineTopicRouteInfo(topic);
        if (route != null && !route.getQueueDatas().isEmpty()) {
          return topic;
        }
      } catch (Exception notYet) {
        if (System.currentTimeMillis() > deadline) {
          throw new Check.Failure("route of new topic " + topic + " never appeared: " + notYet);
        }
      }
      Thread.sleep(100);
    }
  }

  DefaultMQProducer producer() throws Exception {
    DefaultMQProducer p = new DefaultMQProducer(name("pg") + "_" + serial++);
    p.setNamesrvAddr(shared.namesrv);
    p.setInstanceName(name("prod") + "_" + serial++);
    p.setSendMsgTimeout(10_000);
    p.start();
    closers.push(p::shutdown);
    return p;
  }

  /**
   * A started transactional producer of its own group whose half messages {@code listener}
   * decides, and which the broker asks back about the undecided ones.
   */
  TransactionMQProducer transactionProducer(TransactionListener listener) throws Exception {
    TransactionMQProducer p = new TransactionMQProducer(name("tpg") + "_" + serial++);
    p.setNamesrvAddr(shared.namesrv);
    p.setInstanceName(name("tprod") + "_" + serial++);
    p.setSendMsgTimeout(10_000);
    p.setTransactionListener(listener);
    p.start();
    closers.push(p::shutdown);
    return p;
  }

  /**
   * A push consumer with its own client instance (two members of one group in this JVM must
   * not share a client id, or the broker would count them as one), reading new groups from the
   * first offset. Not started: the scenario sets the model and listener first.
   */
  DefaultMQPushConsumer pushConsumer(String group) {
    DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
    c.setNamesrvAddr(shared.namesrv);
    c.setInstanceName(name("cons") + "_" + serial++);
    c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
    closers.push(c::shutdown);
    return c;
  }

  DefaultLitePullConsumer litePullConsumer(String group) {
    DefaultLitePullConsumer c = new DefaultLitePullConsumer(group);
    c.setNamesrvAddr(shared.namesrv);
    c.setInstanceName(name("pull") + "_" + serial++);
    c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
    closers.push(c::shutdown);
    return c;
  }

  /** True when the client on the class path is 5.x or later (not 4.9.x). */
  static boolean client5() {
    return org.apache.rocketmq.common.MQVersion.CURRENT_VERSION
        >= org.apache.rocketmq.common.MQVersion.Version.V5_0_0.ordinal();
  }

  /** The queues this push consumer currently holds (live, not dropped) for {@code topic}. */
  static Set<Integer> heldQueues(DefaultMQPushConsumer c, String topic, boolean needLock) {
    Set<Integer> ids = new TreeSet<>();
    var table = c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable();
    for (var e : table.entrySet()) {
      MessageQueue mq = e.getKey();
      var pq = e.getValue();
      if (mq.getTopic().equals(topic) && !pq.isDropped() && (!needLock || pq.isLocked())) {
        ids.add(mq.getQueueId());
      }
    }
    return Collections.unmodifiableSet(ids);
  }

  /**
   * Sets BROADCASTING. MessageModel moved package between 4.9 and 5.x, so it is looked up from
   * the setter's parameter type, which keeps one source for both client versions.
   */
  @SuppressWarnings({"unchecked", "rawtypes"})
  static void setBroadcasting(DefaultMQPushConsumer c) throws Exception {
    for (var m : c.getClass().getMethods()) {
      if (m.getName().equals("setMessageModel")) {
        Class<? extends Enum> type = (Class<? extends Enum>) m.getParameterTypes()[0];
        m.invoke(c, Enum.valueOf(type, "BROADCASTING"));
        return;
      }
    }
    throw new Check.Failure("DefaultMQPushConsumer has no setMessageModel");
  }

  @Override
  public void close() {
    while (!closers.isEmpty()) {
      try {
        closers.pop().run();
      } catch (RuntimeException e) {
        System.out.println("  (shutdown of a client failed: " + e + ")");
      }
    }
  }
}
